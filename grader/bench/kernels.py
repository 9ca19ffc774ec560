"""`grader bench` and `grader calibrate`: every kernel at its benchmark shapes against its baselines.

Bench is staff and student tooling: it imports the implementation into this process and times each
case with the same `grader.perf.measure.measure_ratio` the hidden perf tests use, then prints a table
(achieved throughput, baseline, ratio, ladder level) under the environment fingerprint and draws the
roofline chart. Calibrate runs the reference solutions the same way and writes, for this GPU model,
ladders of 0.70 / 0.85 / 0.90 x the reference's ratio to grader/calibration.json. The reference ratio
of a check is the LOWEST over its cases, so the reference itself reaches "excellent" on every case with
10% to spare: on the H200 the same code's graded ratios moved by up to 9% between grades (attention
forward 0.79-0.92 over two grades), so 5% (perf-anchors 9.1 item 5's 0.95) cost it points to noise.
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.perf import cases as bench_cases
from grader.points import CALIBRATION_FILE, LADDER_LEVELS, load_calibration, load_points

# Levels at least 12% apart, so a 10% speed difference moves a grade by at most one level gap.
LADDER_FRACTIONS = {"pass": 0.65, "good": 0.80, "excellent": 0.90}
BENCH_ROUNDS = 3
DEVICE = "cuda"              # where inputs are drawn; the CPU tests switch it
NEEDS_GPU = "grader {command} needs a CUDA GPU: none is visible here (torch.cuda.is_available() is False)."


@dataclass
class CaseResult:
    benchmark: bench_cases.Benchmark
    status: str                     # "ok", "not implemented", "wrong output", "error"
    message: str = ""
    perf: object = None             # grader.perf.record.PerfResult when status == "ok"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class LocalImpl:
    """`impl.run` for bench: the implementation's modules live in this process."""

    def __init__(self, name_or_path: str):
        from grader.errors import GraderError
        from grader.worker.modules import Modules, resolve

        self.label = name_or_path
        try:
            self.modules = Modules(resolve(name_or_path))
        except FileNotFoundError as error:
            raise GraderError(str(error)) from None

    def run(self, fn, *args, **kwargs):
        return fn(self.modules, *args, **kwargs)


def measure_case(impl, case: bench_cases.Benchmark, seed: int = 0, **options):
    """Time one benchmark case against its baselines with fresh inputs per round (a PerfResult).

    Perf tests call this too, with the `impl` fixture, so tests, bench and calibrate measure alike.
    """
    import torch

    from grader.perf.measure import measure_ratio

    seeds = itertools.count(seed)

    def make_inputs():
        return case.make_inputs(torch.Generator(device=DEVICE).manual_seed(next(seeds)))

    return measure_ratio(impl, case.target, make_inputs, case.baselines, check=case.check_output,
                         flops=case.flops, bytes_moved=case.bytes_moved, **options)


def measure_all(impl_name: str, kernels=(), environment=None, graded_only=False, echo=print) -> list[CaseResult]:
    """Every case of `kernels` (only those a perf check grades if `graded_only`).

    A missing or failing kernel becomes a status, never a crash.
    """
    import torch

    impl = LocalImpl(impl_name)
    results = []
    for index, case in enumerate(bench_cases.benchmarks(kernels)):
        if graded_only and case.check is None:
            continue
        echo(f"  {case.kernel:<16} {case.case} ...", file=sys.stderr)
        results.append(_measure_one(impl, case, 1000 * index, environment))
        torch.cuda.empty_cache()
    return results


def _measure_one(impl, case, seed, environment, **options) -> CaseResult:
    try:
        perf = measure_case(impl, case, seed=seed, rounds=BENCH_ROUNDS, environment=environment, **options)
    except NotImplementedError as error:
        return CaseResult(case, "not implemented", str(error) or "NotImplementedError")
    except AttributeError as error:      # the module lacks the function
        return CaseResult(case, "not implemented", str(error))
    except AssertionError as error:
        return CaseResult(case, "wrong output", str(error).splitlines()[0] if str(error) else "")
    except Exception as error:  # noqa: BLE001 - any failure of student code is a row in the table
        return CaseResult(case, "error", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    return CaseResult(case, "ok", perf=perf)


# --- grader bench -----------------------------------------------------------------------------------------


def run_bench(impl_name: str, json_path: str | None = None, chart_path: str | None = "roofline.svg",
              kernels=()) -> int:
    """Time every kernel of `impl_name`, print the table, write JSON and the roofline chart."""
    import torch

    if not torch.cuda.is_available():
        print(NEEDS_GPU.format(command="bench"), file=sys.stderr)
        return 2
    from grader.perf.environment import fingerprint, problems, query_gpu

    environment = fingerprint(measure=True)
    reasons = problems(environment)
    results = measure_all(impl_name, kernels, environment=lambda: reasons)
    environment["clocks_after_bench"] = query_gpu(environment.get("gpu_uuid")).get("clocks")
    points = load_points(gpu_name=environment["gpu_name"])
    print(format_environment(environment))
    print(format_table(results, points))
    if json_path:
        Path(json_path).write_text(json.dumps(bench_json(impl_name, environment, results, points), indent=1))
        print(f"wrote {json_path}")
    if chart_path:
        from grader.bench.roofline import roofline_svg

        Path(chart_path).write_text(roofline_svg(chart_points(results), environment))
        print(f"wrote {chart_path}")
    return 0


def format_environment(env: dict) -> str:
    clocks = " -> ".join(f"SM {c['sm_mhz']} MHz / mem {c['mem_mhz']} MHz"
                         for c in (env.get("clocks_before"), env.get("clocks_after_bench")) if c)
    lines = [
        f"GPU: {env.get('gpu_name')} x{env.get('gpu_count')}  driver {env.get('driver')}  CUDA {env.get('cuda')}",
        f"torch {env.get('torch')}  triton {env.get('triton')}  cuDNN {env.get('cudnn')}  python {env.get('python')}",
        f"clocks: {clocks or 'unknown'}",
        f"measured: D2D copy {env.get('copy_gbs')} GB/s, bf16 8192^3 torch.matmul {env.get('matmul_tflops')} TFLOP/s",
    ]
    calibration = env.get("calibration") or {}
    if calibration.get("warning"):
        lines.append(f"warning: {calibration['warning']}")
    return "\n".join(lines)


def format_table(results: list[CaseResult], points) -> str:
    header = ("kernel", "case", "achieved", "baseline", "baseline at", "ratio", "level")
    rows = []
    for result in results:
        case = result.benchmark
        if not result.ok:
            rows.append((case.kernel, case.case, result.status, result.message[:60], "", "", ""))
            continue
        perf = result.perf
        for index, name in enumerate(case.baselines):
            achieved = _achieved(case, perf.submission_ms) if index == 0 else ""
            level = _level(points, case.check, perf.ratio) if index == 0 else ""
            flags = ((" retry" if perf.retry and index == 0 else "")
                     + (" wall-bound" if perf.bound_applied and index == 0 else ""))
            rows.append((case.kernel if index == 0 else "", case.case if index == 0 else "", achieved, name,
                         _achieved(case, perf.baselines_ms[name]), f"{perf.ratios[name]:.3f}", level + flags))
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in [header, tuple("-" * w for w in widths), *rows]]
    return "\n".join(lines)


def _achieved(case, milliseconds) -> str:
    from grader.perf.record import throughput

    if case.unit == "GB/s":
        return f"{throughput(case.bytes_moved, milliseconds, 1e9):,.0f} GB/s"
    return f"{throughput(case.flops, milliseconds, 1e12):,.1f} TFLOP/s"


def _level(points, check_id, ratio) -> str:
    check = points.checks.get(check_id) if check_id else None
    if check is None or check.ladder is None:
        return "-"
    return check.ladder.level(ratio)


def bench_json(impl_name, environment, results, points) -> dict:
    cases = []
    for result in results:
        case = result.benchmark
        entry = {"kernel": case.kernel, "case": case.case, "check": case.check, "status": result.status,
                 "message": result.message, "flops": case.flops, "bytes": case.bytes_moved, "unit": case.unit}
        if result.ok:
            entry.update(result.perf.as_record())
            entry["level"] = _level(points, case.check, result.perf.ratio)
        cases.append(entry)
    return {"impl": impl_name, "environment": environment, "cases": cases}


def chart_points(results) -> list[dict]:
    return [{"kernel": r.benchmark.kernel, "case": r.benchmark.case, "intensity": r.benchmark.intensity,
             "tflops": r.perf.tflops} for r in results if r.ok]


# --- grader calibrate ---------------------------------------------------------------------------------------


def calibrate(gpu_name: str | None = None, dry_run: bool = False, calibration_file: Path = CALIBRATION_FILE) -> int:
    """Measure the reference solutions here and write this GPU model's ladders."""
    import torch

    if not torch.cuda.is_available():
        print(NEEDS_GPU.format(command="calibrate"), file=sys.stderr)
        return 2
    from grader.perf.environment import fingerprint, problems

    environment = fingerprint(measure=True)
    model = gpu_name or environment["gpu_name"]
    print(format_environment(environment))
    for reason in problems(environment):
        # Ratios are timed side by side, so a uniformly slow GPU moves both sides; say so, go on.
        print(f"warning: {reason}; the ladders may need a re-run on a healthy GPU", file=sys.stderr)
    results = measure_all("solutions", environment=lambda: [], graded_only=True)
    failed = [r for r in results if not r.ok]
    for result in failed:
        print(f"reference {result.benchmark.kernel} {result.benchmark.case}: {result.status} {result.message}",
              file=sys.stderr)
    for result in results:
        if result.ok and result.perf.retry:
            print(f"warning: {result.benchmark.case}: {'; '.join(result.perf.retry_reasons)}", file=sys.stderr)
    points = load_points(calibration_file=calibration_file, gpu_name=model)
    new = ladders_from(results, points)
    print(format_ladders(model, points, new))
    if not dry_run and new:
        write_calibration(calibration_file, model, new)
        print(f"wrote {calibration_file} ({model}: {len(new)} checks)")
    return 1 if failed else 0


def reference_ratios(results) -> dict[str, float]:
    """Per perf check id: the lowest graded ratio of the reference over the check's cases."""
    ratios: dict[str, float] = {}
    for result in results:
        check = result.benchmark.check
        if result.ok and check:
            ratios[check] = min(ratios.get(check, float("inf")), result.perf.ratio)
    return ratios


def ladders_from(results, points) -> dict[str, dict]:
    """{check id: {"pass", "good", "excellent", "reference_ratio"}} for checks the points files declare."""
    ladders = {}
    for check_id, ratio in sorted(reference_ratios(results).items()):
        check = points.checks.get(check_id)
        if check is None or not check.perf:
            print(f"note: benchmark check {check_id!r} has no [perf] entry in grader/points; not written",
                  file=sys.stderr)
            continue
        ladders[check_id] = ladder_for(ratio)
    return ladders


def ladder_for(reference_ratio: float) -> dict:
    ladder = {level: round(fraction * reference_ratio, 3) for level, fraction in LADDER_FRACTIONS.items()}
    ladder["reference_ratio"] = round(reference_ratio, 4)
    return ladder


def format_ladders(model, points, new) -> str:
    lines = [f"ladders for {model} (old -> new; ratio to the baseline):"]
    for check_id, check in sorted(points.checks.items()):
        if not check.perf:
            continue
        ladder = check.ladder
        old = f"{ladder.passing:.3f} / {ladder.good:.3f} / {ladder.excellent:.3f} ({ladder.source})"
        if check_id in new:
            ladder = new[check_id]
            shown = " / ".join(f"{ladder[level]:.3f}" for level in LADDER_LEVELS)
            lines.append(f"  {check_id}: {old} -> {shown} (reference ratio {ladder['reference_ratio']:.3f})")
        else:
            lines.append(f"  {check_id}: {old} -> unchanged (no benchmark measures it)")
    return "\n".join(lines)


def write_calibration(path: Path, model: str, ladders: dict) -> None:
    data = load_calibration(path)
    data[model] = {**data.get(model, {}), **ladders}
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
