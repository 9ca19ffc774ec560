"""What the runs sharing a GPU waited for, from the lock timelines their results keep (`gpu_lock`).

Every checking run on a shared GPU records its waits, holds and lends on the host's monotonic clock
(grader.perf.gpu_lock). Laid side by side, they say for each run how long it waited to share the GPU while
a neighbour had it alone (that neighbour's perf check timing), while a neighbour only waited for it
alone (the turnstile holds new sharers back then), and otherwise; and for the batch how much of the
time some run had the GPU alone, some shared it, or none held it at all.

Usage: python scripts/investigations/gpu_lock_timeline.py OUT_FOLDER [OUT_FOLDER ...]   (a graded folder: */result.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grader.results import parse_interval


def load_timelines(folder: Path) -> dict[str, list[tuple[str, float, float]]]:
    """{submission id: [(kind, start, end)]} for every result in `folder` that kept a lock timeline."""
    timelines = {}
    for path in sorted(folder.glob("*/result.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        intervals = (result.get("gpu_lock") or {}).get("intervals") or []
        parsed = [interval for interval in map(parse_interval, intervals) if interval is not None]
        if parsed:
            timelines[str(result.get("id", path.parent.name))] = parsed
    return timelines


def analyse(timelines: dict[str, list[tuple[str, float, float]]]) -> dict:
    """Seconds per run and for the batch, from one sweep over every interval's ends."""
    events = sorted((time, step, name, kind) for name, intervals in timelines.items()
                    for kind, start, end in intervals for time, step in ((start, 1), (end, -1)))
    runs = {name: {"wait_shared while a neighbour was alone": 0.0,
                   "wait_shared while a neighbour waited to be alone": 0.0,
                   "wait_shared otherwise": 0.0, "wait_alone": 0.0, "alone": 0.0, "shared": 0.0, "lent": 0.0}
            for name in timelines}
    batch = {"someone alone": 0.0, "shared, nobody alone": 0.0, "nobody holding": 0.0}
    open_now = {name: {} for name in timelines}          # run -> kind -> intervals open now
    previous = None
    for time, step, name, kind in events:
        if previous is not None and time > previous:
            _account(open_now, time - previous, runs, batch)
        open_now[name][kind] = open_now[name].get(kind, 0) + step
        previous = time
    span = events[-1][0] - events[0][0] if events else 0.0
    return {"span_s": span, "runs": runs, "batch": batch}


def _account(open_now, width, runs, batch) -> None:
    """Add one stretch of `width` seconds in which nothing started or ended."""
    states = {name: {kind for kind, count in kinds.items() if count > 0} for name, kinds in open_now.items()}
    alone = {name for name, kinds in states.items() if "alone" in kinds}
    waiting_alone = {name for name, kinds in states.items() if "wait_alone" in kinds}
    sharing = {name for name, kinds in states.items() if "shared" in kinds}
    batch["someone alone" if alone else "shared, nobody alone" if sharing else "nobody holding"] += width
    for name, kinds in states.items():
        for kind in kinds - {"wait_shared"}:
            runs[name][kind] += width
        if "wait_shared" in kinds:
            why = ("while a neighbour was alone" if alone - {name} else
                   "while a neighbour waited to be alone" if waiting_alone - {name} else "otherwise")
            runs[name][f"wait_shared {why}"] += width


def main(arguments: list[str]) -> int:
    if not arguments:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for folder in arguments:
        timelines = load_timelines(Path(folder))
        if not timelines:
            print(f"== {folder}: no result keeps a GPU lock timeline (was the GPU shared?)")
            continue
        report = analyse(timelines)
        print(f"== {folder}: {len(timelines)} runs over {report['span_s']:.1f} s")
        print("  batch: " + ", ".join(f"{what} {seconds:.1f} s" for what, seconds in report["batch"].items()))
        for name, seconds in report["runs"].items():
            print(f"  {name}: " + ", ".join(f"{what} {value:.1f}" for what, value in seconds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
