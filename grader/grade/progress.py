"""What the TA sees while a batch runs: the time left, from the runs that have finished.
"""

from __future__ import annotations


def estimate_eta(durations: list[float], in_flight: list[float], queued: int, slots: int) -> float | None:
    """Seconds until the batch ends: each run in flight needs the mean run time minus what it has had,
    each queued one the mean, shared over the slots. None until a run has finished."""
    if not durations:
        return None if (in_flight or queued) else 0.0
    mean = sum(durations) / len(durations)
    left = sum(max(0.0, mean - elapsed) for elapsed in in_flight) + max(0, queued) * mean
    return left / max(1, slots)


def clock_text(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"
