"""`grader bench` and `grader calibrate`: every kernel at its benchmark shapes against its baselines.

Bench is staff and student tooling: it imports the implementation into this process and times each
case with the same `grader.perf.measure.measure_ratio` the hidden perf tests use, then prints a table
(achieved throughput, baseline, ratio, ladder level) under the environment fingerprint and draws the
roofline chart. Calibrate runs the reference solutions the same way and writes, for this GPU model,
ladders of 0.70 / 0.85 / 0.90 x the reference's ratio to grader/calibration.json. The reference ratio
of a check is the LOWEST over its cases, so the reference itself reaches "excellent" on every case with
10% to spare: on the H200 the same code's graded ratios moved by up to 9% between grades (attention
forward 0.79-0.92 over two grades), so 5% (perf-anchors 9.1 item 5's 0.95) cost it points to noise.

Without a CUDA GPU both run every case's tiny variant (grader.perf.cases) in Triton's interpreter, the
same code path at sizes the interpreter runs in seconds, so that CI sees a broken path: the table
marks the ratios "not meaningful on CPU" and shows no ladder level, and calibrate writes nothing.
"""

from __future__ import annotations

import itertools
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from grader import devices
from grader.perf import cases as bench_cases
from grader.points import CALIBRATION_FILE, LADDER_LEVELS, load_calibration, load_points

# Levels at least 12% apart, so a 10% speed difference moves a grade by at most one level gap.
LADDER_FRACTIONS = {"pass": 0.65, "good": 0.80, "excellent": 0.90}
BENCH_ROUNDS = 3
# On the CPU a time means nothing: one round and the shortest timing loops run every path once or so.
CPU_TIMING = {"rounds": 1, "warmup_ms": 0, "rep_ms": 0}
NOT_MEANINGFUL = "not meaningful on CPU"
CPU_NOTE = ("No CUDA GPU here: every case ran at tiny sizes in Triton's interpreter. The table checks that "
            f"each path runs and is correct; its times and ratios are {NOT_MEANINGFUL} (no ladder level).")
CPU_WRITES_NO_CALIBRATION = (
    "grader calibrate writes {path} only from a CUDA GPU: ratios timed on the CPU, in Triton's interpreter "
    "at tiny sizes, are not meaningful. Run it on the grading GPU, or add --dry-run to check here that "
    "calibration runs (nothing is written).")


@dataclass
class CaseResult:
    benchmark: bench_cases.Benchmark
    status: str                     # "ok", "not implemented", "wrong output", "error"
    message: str = ""
    perf: object = None             # grader.perf.record.PerfResult when status == "ok"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def local_impl(name_or_path: str):
    """The implementation imported into this process, behind the `impl` API the perf tests time through
    (grader.impl.InProcessImpl): bench and the perf checks call one interface."""
    from grader.errors import GraderError
    from grader.impl import make_impl

    try:
        return make_impl(name_or_path, isolated=False)
    except FileNotFoundError as error:
        raise GraderError(str(error)) from None


def measure_case(impl, case: bench_cases.Benchmark, seed: int = 0, device: str | None = None, **options):
    """Time one benchmark case against its baselines with fresh inputs per round (a PerfResult).

    Inputs are drawn on `device` (default: where this process runs kernels, grader.devices).
    """
    import torch

    from grader.perf.measure import measure_ratio

    seeds = itertools.count(seed)
    device = device or devices.configure().device

    def make_inputs():
        return case.make_inputs(torch.Generator(device=device).manual_seed(next(seeds)))

    return measure_ratio(impl, case.target, make_inputs, case.baselines, check=case.check_output,
                         flops=case.flops, bytes_moved=case.bytes_moved, **options)


def measure_all(impl_name: str, kernels=(), environment=None, graded_only=False, echo=print,
                cpu: bool = False) -> list[CaseResult]:
    """Every case of `kernels` (only those a perf check grades if `graded_only`); `cpu`: their tiny
    variants, timed as briefly as the timing code allows.

    A missing or failing kernel becomes a status, never a crash.
    """
    import torch

    impl = local_impl(impl_name)
    timing = CPU_TIMING if cpu else {"rounds": BENCH_ROUNDS}
    results = []
    for index, case in enumerate(bench_cases.benchmarks(kernels, tiny=cpu)):
        if graded_only and case.check is None:
            continue
        echo(f"  {case.kernel:<16} {case.case} ...", file=sys.stderr)
        results.append(_measure_one(impl, case, 1000 * index, environment, **timing))
        torch.cuda.empty_cache()
    return results


def _measure_one(impl, case, seed, environment, **options) -> CaseResult:
    options.setdefault("rounds", BENCH_ROUNDS)
    try:
        perf = measure_case(impl, case, seed=seed, environment=environment, **options)
    except NotImplementedError as error:
        return CaseResult(case, "not implemented", str(error) or "NotImplementedError")
    except AttributeError as error:
        if isinstance(getattr(error, "obj", None), types.ModuleType):   # the module lacks the function
            return CaseResult(case, "not implemented", str(error))
        return CaseResult(case, "error", _one_line(error))              # the harness's own fault shows
    except AssertionError as error:
        return CaseResult(case, "wrong output", str(error).splitlines()[0] if str(error) else "")
    except Exception as error:  # noqa: BLE001 - any failure of student code is a row in the table
        return CaseResult(case, "error", _one_line(error))
    return CaseResult(case, "ok", perf=perf)


def _one_line(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


# --- grader bench -----------------------------------------------------------------------------------------


def run_bench(impl_name: str, json_path: str | None = None, chart_path: str | None = "roofline.svg",
              kernels=()) -> int:
    """Time every kernel of `impl_name`, print the table, write JSON and the roofline chart.

    Exit status 0 when every case ran and was right, 1 otherwise. Without CUDA: the tiny cases in
    Triton's interpreter, the ratios marked not meaningful, no chart."""
    on_gpu = devices.configure().on_gpu   # before Triton is imported: it reads whether to interpret
    from grader.perf.environment import fingerprint, problems, query_gpu

    environment = fingerprint(measure=on_gpu)
    reasons = problems(environment)
    results = measure_all(impl_name, kernels, environment=lambda: reasons, cpu=not on_gpu)
    if on_gpu:
        environment["clocks_after_bench"] = query_gpu(environment.get("gpu_uuid")).get("clocks")
    points = load_points(gpu_name=environment["gpu_name"])
    print(format_environment(environment))
    if not on_gpu:
        print(CPU_NOTE)
    print(format_table(results, points, meaningful=on_gpu))
    if json_path:
        data = bench_json(impl_name, environment, results, points, meaningful=on_gpu)
        Path(json_path).write_text(json.dumps(data, indent=1))
        print(f"wrote {json_path}")
    if chart_path and on_gpu:
        from grader.bench.roofline import roofline_svg

        Path(chart_path).write_text(roofline_svg(chart_points(results), environment))
        print(f"wrote {chart_path}")
    elif chart_path:
        print(f"no roofline chart: throughputs are {NOT_MEANINGFUL}")
    failed = [result for result in results if not result.ok]
    if failed:
        print(f"{len(failed)} of {len(results)} cases did not run or were wrong", file=sys.stderr)
    return 1 if failed else 0


def format_environment(env: dict) -> str:
    if not env.get("gpu_name"):
        return (f"device: CPU (no CUDA GPU), Triton's interpreter\n"
                f"torch {env.get('torch')}  triton {env.get('triton')}  python {env.get('python')}")
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


def format_table(results: list[CaseResult], points, meaningful: bool = True) -> str:
    """One row per baseline of each case; `meaningful` False (CPU): ratios shown, never a level."""
    header = ("kernel", "case", "achieved", "baseline", "baseline at", "ratio", "level")
    rows = []
    for result in results:
        case = result.benchmark
        if not result.ok:
            rows.append((case.kernel, case.case, result.status, result.message[:60], "", "", ""))
            continue
        perf = result.perf
        graded_level = _level(points, case.check, perf.ratio) if meaningful else NOT_MEANINGFUL
        for index, name in enumerate(case.baselines):
            achieved = _achieved(case, perf.submission_ms) if index == 0 else ""
            level = graded_level if index == 0 else ""
            flags = ((" retry" if perf.retry and index == 0 else "")
                     + (" wall-bound" if perf.bound_applied and index == 0 else ""))
            rows.append((case.kernel if index == 0 else "", case.case if index == 0 else "", achieved, name,
                         _achieved(case, perf.baselines_ms[name]), _ratio_text(perf.ratios[name]), level + flags))
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in [header, tuple("-" * w for w in widths), *rows]]
    return "\n".join(lines)


def _ratio_text(ratio: float) -> str:
    return f"{ratio:.3f}" if ratio >= 0.001 else f"{ratio:.1e}"


def _achieved(case, milliseconds) -> str:
    from grader.perf.record import throughput

    if case.unit == "GB/s":
        value, shown = throughput(case.bytes_moved, milliseconds, 1e9), "{:,.0f} GB/s"
    else:
        value, shown = throughput(case.flops, milliseconds, 1e12), "{:,.1f} TFLOP/s"
    if value < 1:      # the interpreter's rates: two digits rather than a row of zeros
        shown = "{:.2g} " + case.unit
    return shown.format(value)


def _level(points, check_id, ratio) -> str:
    check = points.checks.get(check_id) if check_id else None
    if check is None or check.ladder is None:
        return "-"
    return check.ladder.level(ratio)


def bench_json(impl_name, environment, results, points, meaningful: bool = True) -> dict:
    cases = []
    for result in results:
        case = result.benchmark
        entry = {"kernel": case.kernel, "case": case.case, "check": case.check, "status": result.status,
                 "message": result.message, "flops": case.flops, "bytes": case.bytes_moved, "unit": case.unit}
        if result.ok:
            entry.update(result.perf.as_record())
            entry["level"] = _level(points, case.check, result.perf.ratio) if meaningful else None
        cases.append(entry)
    return {"impl": impl_name, "environment": environment, "meaningful": meaningful, "cases": cases}


def chart_points(results) -> list[dict]:
    return [{"kernel": r.benchmark.kernel, "case": r.benchmark.case, "intensity": r.benchmark.intensity,
             "tflops": r.perf.tflops} for r in results if r.ok]


# --- grader calibrate ---------------------------------------------------------------------------------------


def calibrate(gpu_name: str | None = None, dry_run: bool = False, calibration_file: Path = CALIBRATION_FILE,
              kernels=()) -> int:
    """Measure the reference solutions here and write this GPU model's ladders (of `kernels`' checks,
    all when empty). Without CUDA only `dry_run` runs (the tiny cases); nothing is written."""
    on_gpu = devices.configure().on_gpu
    if not on_gpu and not dry_run:
        print(CPU_WRITES_NO_CALIBRATION.format(path=calibration_file), file=sys.stderr)
        return 2
    from grader.perf.environment import fingerprint, problems

    environment = fingerprint(measure=on_gpu)
    model = gpu_name or environment["gpu_name"] or "CPU"
    print(format_environment(environment))
    if not on_gpu:
        print(CPU_NOTE)
    for reason in problems(environment):
        # Ratios are timed side by side, so a uniformly slow GPU moves both sides; say so, go on.
        print(f"warning: {reason}; the ladders may need a re-run on a healthy GPU", file=sys.stderr)
    results = measure_all("solutions", kernels, environment=lambda: [], graded_only=True, cpu=not on_gpu)
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
    if dry_run:
        print(f"dry run: {calibration_file} not written")
    elif new:
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
            lines.append(f"  {check_id}: {old} -> unchanged (not measured here)")
    return "\n".join(lines)


def write_calibration(path: Path, model: str, ladders: dict) -> None:
    data = load_calibration(path)
    data[model] = {**data.get(model, {}), **ladders}
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
