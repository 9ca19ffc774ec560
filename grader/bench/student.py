"""`make bench` (`python -m grader.bench`): your kernels timed the way the hidden perf checks time them.

The same benchmark cases (`grader.perf.cases`), the same timing (`grader.perf.measure.measure_ratio`
through `grader.bench.kernels.measure_case`) and the same ladders as grading: for each graded case it
prints the ratio to the baseline and the level (below / pass / good / excellent) the ratio reaches,
then each perf check's points at that level. Ungraded cases (shown for information) have level "-".

On a machine without a CUDA GPU nothing can be timed: it lists what would be timed, against what,
and the ladders, and says that CPU tests check correctness only (a matmul with 16 x 16 tiles passes
every CPU test and is graded slow only here, on a GPU).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.perf import cases as bench_cases
from grader.points import CALIBRATION_FILE, POINTS_DIR, load_points

HERE = Path(__file__).resolve().parent
# The handout's points files list public checks only; the build ships the perf checks here for bench.
SHIPPED_PERF_POINTS = HERE / "perf_points"
SHIPPED_CALIBRATION = HERE / "calibration.json"
LEVEL_FRACTION = {"below": 0.0, "pass": 0.5, "good": 0.8, "excellent": 1.0}

NO_GPU = """\
No CUDA GPU here (torch.cuda.is_available() is False): nothing can be timed on this machine.
On a CPU, `make test` checks correctness only (Triton's interpreter runs your kernels slowly and says
nothing about their speed). A kernel that is right but slow, e.g. a matmul with 16 x 16 tiles,
passes every CPU test; only this bench on a GPU, and the perf checks at grading, show it.
What `make bench` times on a GPU, and the ladder each graded case is scored on (ratio = baseline
time / your time; for bandwidth checks, your GB/s / the baseline's GB/s):"""


def perf_points(gpu_name: str | None = None):
    """The perf checks with their ladders (calibrated for `gpu_name` when that GPU was calibrated)."""
    if SHIPPED_PERF_POINTS.is_dir():
        return load_points(SHIPPED_PERF_POINTS, SHIPPED_CALIBRATION, gpu_name=gpu_name)
    return load_points(POINTS_DIR, CALIBRATION_FILE, gpu_name=gpu_name)


def describe_plan(points, kernels=()) -> str:
    """What would be timed: one line per benchmark case, then each perf check's ladder and points."""
    cases = bench_cases.benchmarks(kernels)
    width = max(len(case.case) for case in cases)
    lines = []
    for case in cases:
        graded = f"graded: {case.check}" if case.check else "shown only, not graded"
        lines.append(f"  {case.kernel:<16} {case.case:<{width}}  vs {next(iter(case.baselines))}  ({graded})")
    timed = {case.check for case in cases}
    for check in sorted(c.id for c in points.checks.values() if c.perf and c.id not in timed):
        lines.append(f"  {check}: timed only at grading (its baseline would give the answer away)")
    lines.append("Ladders (pass / good / excellent earn 50% / 80% / 100% of a check's points):")
    for check in sorted((c for c in points.checks.values() if c.perf), key=lambda c: c.id):
        ladder = check.ladder
        lines.append(f"  {check.id:<34} {check.points:g} pts  {ladder.passing:.2f} / {ladder.good:.2f} / "
                     f"{ladder.excellent:.2f}  ({ladder.source} ladder; baseline: {check.baseline})")
    return "\n".join(lines)


def points_by_check(results, points) -> list[str]:
    """Per graded check: its lowest level over its cases (as grading averages, the weakest case shows)."""
    levels: dict[str, list[str]] = {}
    for result in results:
        check = result.benchmark.check
        if check is None:
            continue
        if not result.ok:
            levels.setdefault(check, []).append("below")
            continue
        ladder = points.checks[check].ladder if check in points.checks else None
        levels.setdefault(check, []).append(ladder.level(result.perf.ratio) if ladder else "below")
    lines = []
    for check, found in sorted(levels.items()):
        earned = points.checks[check].points * sum(LEVEL_FRACTION[level] for level in found) / len(found)
        lines.append(f"  {check:<34} levels {', '.join(found)}  ~ {earned:.1f} / {points.checks[check].points:g} pts")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="assignment", help="assignment (default), solutions or a folder")
    parser.add_argument("--kernel", action="append", default=[], choices=bench_cases.KERNELS,
                        help="time only this kernel (repeatable)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(NO_GPU)
        print(describe_plan(perf_points(), args.kernel))
        return 0
    from grader.bench.kernels import format_environment, format_table, measure_all
    from grader.perf.environment import fingerprint, problems

    environment = fingerprint(measure=True)
    reasons = problems(environment)
    for reason in reasons:
        print(f"warning: {reason} (timings here may be low)", file=sys.stderr)
    points = perf_points(environment.get("gpu_name"))
    results = measure_all(args.impl, args.kernel, environment=lambda: reasons)
    print(format_environment(environment))
    print(format_table(results, points))
    print("Perf checks at these levels (each graded case counts; grading repeats the timing):")
    print("\n".join(points_by_check(results, points)) or "  none measured")
    return 0
