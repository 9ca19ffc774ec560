"""Where a perf check's time goes, test by test: from a checking run's results stream and its log.

`scripts/measure/gpu_proofs.sh profile` runs the reference's perf checks with GRADER_TIMING_DEBUG=1, so the worker
prints each timing call's steps (clone, first call, bench, sync span: wall ms) and the stream holds each
round's wall times on the checker's side. This lays both out per test, then sums them.

Usage: python scripts/measure/perf_profile_summary.py RESULTS.jsonl [LOG]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gpu_proofs_summary import round_split  # scripts/ is on the path when this file runs

from grader.results import read_stream

STEP = re.compile(r"wall ms: clone ([\d.]+), first call ([\d.]+), bench ([\d.]+), sync span ([\d.]+)")


def worker_steps(log: str) -> list[tuple[float, float, float, float]]:
    """(clone, first call, bench, sync span) ms of every timing call the worker printed, in order."""
    return [tuple(float(value) for value in match.groups()) for match in STEP.finditer(log)]


def main(arguments: list[str]) -> int:
    if not arguments:
        print(__doc__, file=sys.stderr)
        return 2
    read = read_stream(Path(arguments[0]).read_text(errors="replace"))
    steps = worker_steps(Path(arguments[1]).read_text(errors="replace")) if len(arguments) > 1 else []
    if read.results is None:
        print("no results header in the stream", file=sys.stderr)
        return 1
    totals = dict.fromkeys(("test", "rounds_in", "submission", "baselines", "pause", "other", "window"), 0.0)
    rounds_in_all = 0
    for record in read.results.tests:
        measured = (record.perf or {}).get("measured") or {}
        rounds = measured.get("rounds") or []
        if not rounds:
            continue
        split = round_split(rounds)
        inside = sum(split.values())
        window = (measured.get("wall_window") or {}).get("wall_ms", 0.0) / 1e3
        for name, value in {"test": record.duration, "rounds_in": inside, **split, "window": window}.items():
            totals[name] += value
        rounds_in_all += len(rounds)
        print(f"{record.nodeid.split('::', 1)[-1]:70s} test {record.duration:6.2f} s, {len(rounds)} rounds "
              f"{inside:5.2f} s (kernel {split['submission']:5.2f}, baselines {split['baselines']:5.2f}, pause "
              f"{split['pause']:4.2f}, other {split['other']:4.2f}), window {window:4.2f}, "
              f"claim {measured.get('claimed_ms')} ms")
    print("TOTAL " + ", ".join(f"{name} {value:.1f} s" for name, value in totals.items()) + f"; {rounds_in_all} rounds")
    if steps:
        sums = [sum(step[i] for step in steps) / 1e3 for i in range(4)]
        print(f"WORKER {len(steps)} timing calls: clone {sums[0]:.1f} s, first call {sums[1]:.1f} s, bench "
              f"{sums[2]:.1f} s, sync span {sums[3]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
