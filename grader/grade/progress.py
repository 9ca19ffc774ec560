"""What the TA sees while a batch runs: the time left, from the rate at which it has graded so far."""

from __future__ import annotations


def eta_from_rate(finished: int, elapsed_s: float, remaining: int) -> float | None:
    """Seconds until the batch ends at the rate measured so far: `finished` runs graded in `elapsed_s`
    seconds since the batch began, `remaining` still to finish (in flight or queued). None until a run
    has finished, since no rate exists yet; never zero while one remains, and a stall, which stretches
    `elapsed_s` with no run finishing, moves it out."""
    if remaining <= 0:
        return 0.0
    if finished <= 0 or elapsed_s <= 0:
        return None
    return remaining * elapsed_s / finished


def clock_text(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"
