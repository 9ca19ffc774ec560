"""grader bench / calibrate / bench grading: the CPU runs end to end (tiny cases in Triton's interpreter),
benchmark accounting, statuses, ladders, calibration file, the grading summary."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from perf_fakes import FakeImpl, baseline, clock_bench, exact_check, kernel_module

from grader.bench import kernels as bench
from grader.cli import main
from grader.errors import GraderError
from grader.perf.cases import KERNELS, Benchmark, benchmarks
from grader.perf.record import PerfResult
from grader.points import CALIBRATION_FILE, load_points

REPO_ROOT = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch")
on_cpu = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU run (on a GPU the real command runs)")


# --- the commands on the CPU, end to end ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_bench(tmp_path_factory):
    """`grader bench kernels --impl solutions` in a fresh process, as staff type it, on this CPU."""
    folder = tmp_path_factory.mktemp("bench")
    done = subprocess.run([sys.executable, "-m", "grader", "bench", "kernels", "--impl", "solutions",
                           "--json", str(folder / "bench.json"), "--chart", str(folder / "roofline.svg")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    return done, folder


@on_cpu
def test_bench_on_the_cpu_runs_every_tiny_case_of_the_reference_right(cpu_bench):
    done, folder = cpu_bench
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((folder / "bench.json").read_text())
    measured = [(case["kernel"], case["case"]) for case in data["cases"]]
    assert measured == [(case.kernel, case.case) for case in benchmarks(tiny=True)]
    assert {kernel for kernel, _ in measured} == set(KERNELS)
    assert [case for case in data["cases"] if case["status"] != "ok"] == []


@on_cpu
def test_bench_on_the_cpu_marks_every_ratio_not_meaningful_and_gives_no_level(cpu_bench):
    done, folder = cpu_bench
    rows = [line for line in done.stdout.splitlines() if line.startswith(KERNELS)]
    assert {row.split()[0] for row in rows} == set(KERNELS)
    assert all(row.count(bench.NOT_MEANINGFUL) == 1 for row in rows), rows
    assert not any(level in row for row in rows for level in ("pass", "good", "excellent", "below"))
    data = json.loads((folder / "bench.json").read_text())
    assert data["meaningful"] is False and {case["level"] for case in data["cases"]} == {None}
    assert not (folder / "roofline.svg").exists() and "no roofline chart" in done.stdout


@on_cpu
def test_bench_exits_non_zero_when_a_case_does_not_run(tmp_path):
    done = CliRunner().invoke(main, ["bench", "kernels", "--impl", "assignment", "--kernel", "softmax",
                                     "--chart", str(tmp_path / "chart.svg")])
    assert done.exit_code == 1, done.output
    assert "not implemented" in done.output and "5 of 5 cases did not run or were wrong" in done.output


@on_cpu
def test_calibrate_on_the_cpu_refuses_to_write_the_ladders():
    before = CALIBRATION_FILE.read_bytes()
    done = CliRunner().invoke(main, ["calibrate"])
    assert done.exit_code == 2
    assert "only from a CUDA GPU" in done.output and "--dry-run" in done.output
    assert CALIBRATION_FILE.read_bytes() == before


@on_cpu
def test_calibrate_dry_run_on_the_cpu_shows_the_ladders_and_writes_nothing():
    before = CALIBRATION_FILE.read_bytes()
    done = CliRunner().invoke(main, ["calibrate", "--dry-run", "--kernel", "training"])
    assert done.exit_code == 0, done.output
    assert "ladders for CPU" in done.output and bench.NOT_MEANINGFUL in done.output
    assert "mixed_precision.perf.step:" in done.output and "(reference ratio" in done.output
    assert "not written" in done.output and CALIBRATION_FILE.read_bytes() == before


@on_cpu
def test_bench_grading_on_the_cpu_grades_a_copy_and_prints_its_summary():
    done = CliRunner().invoke(main, ["bench", "grading", "--copies", "1", "--suite", "public"])
    assert done.exit_code == 0, done.output
    assert "graded 1 copies of the reference" in done.output and "statuses: graded" in done.output
    assert "per submission:" in done.output


def test_bench_times_through_the_impl_the_perf_checks_use():
    """measure_ratio calls more of the impl than `run` (run_harness, ...): bench must hand it the real
    in-process impl, so that a new call there cannot break bench alone."""
    from grader.impl import InProcessImpl

    impl = bench.local_impl("solutions")
    assert isinstance(impl, InProcessImpl)
    (case,) = benchmarks(["training"], tiny=True)
    result = bench._measure_one(impl, case, seed=0, environment=lambda: [], **bench.CPU_TIMING)
    assert result.ok, f"{result.status}: {result.message}"


def test_an_unknown_implementation_is_a_one_line_error(tmp_path):
    with pytest.raises(GraderError, match="not 'assignment', 'solutions' or a folder"):
        bench.local_impl(str(tmp_path / "nowhere"))


# --- benchmark descriptions -------------------------------------------------------------------------------


def cases(kernel):
    return benchmarks([kernel])


def test_every_kernel_has_benchmarks_with_a_graded_baseline():
    for kernel in KERNELS:
        assert cases(kernel), kernel
        for case in cases(kernel):
            assert case.baselines and case.flops > 0 and case.bytes_moved > 0, case.case


def test_every_target_names_a_function_the_solutions_define():
    import importlib

    from grader.worker.modules import Modules, resolve

    modules = Modules(resolve("solutions"))
    for case in benchmarks():
        if ":" in case.target:
            module_name, factory = case.target.split(":")
            assert callable(getattr(importlib.import_module(module_name), factory)), case.target
        else:
            module_name, function = case.target.split(".")
            assert callable(getattr(modules.load(module_name), function)), case.target


def test_tiny_cases_mirror_the_gpu_cases_one_for_one_and_are_smaller():
    gpu, tiny = benchmarks(), benchmarks(tiny=True)
    assert len(gpu) == len(tiny)
    for big, small in zip(gpu, tiny):
        assert (small.kernel, small.target, small.check, small.unit) == (big.kernel, big.target, big.check, big.unit)
        assert len(small.baselines) == len(big.baselines)
        assert small.flops < big.flops / 100 and small.bytes_moved < big.bytes_moved / 100, small.case


def test_tiny_cases_keep_the_paths_the_shapes_test():
    names = [case.case for case in benchmarks(["matmul", "softmax"], tiny=True)]
    assert "bf16 15x15x15" in names                       # 1793 stays odd: its edge tiles stay masked
    assert "bf16 1x262144 (online)" in names              # softmax's long rows keep their length


def test_unknown_kernel_is_a_clear_error():
    with pytest.raises(GraderError, match="unknown kernel"):
        benchmarks(["convolution"])


def test_matmul_covers_the_brief_shapes_in_both_dtypes():
    names = [case.case for case in cases("matmul")]
    for size in (2048, 4096, 8192, 1792, 1793):
        for dtype in ("bf16", "fp16"):
            assert f"{dtype} {size}x{size}x{size}" in names
    assert any("LLM" in name for name in names)


def test_square_matmul_intensity_is_n_over_3_in_bf16():
    case = next(c for c in cases("matmul") if c.case == "bf16 8192x8192x8192")
    assert case.flops == 2 * 8192 ** 3
    assert case.intensity == pytest.approx(8192 / 3)
    assert case.check is not None


def test_small_matmuls_are_shown_but_not_graded():
    assert all(c.check is None for c in cases("matmul") if "2048x" in c.case or "1793" in c.case)


def test_softmax_is_memory_bound_and_graded_against_copy():
    for case in cases("softmax"):
        assert next(iter(case.baselines)) == "D2D copy"
        assert case.unit == "GB/s"
        assert case.intensity < 2            # two orders of magnitude left of any GPU's ridge
        assert case.bytes_moved >= 2 * 256e6  # 256 MB in, 256 MB out: beyond L2


def test_attention_flops_follow_the_papers_convention():
    by_name = {case.case: case for case in cases("flash_attention")}
    fwd = by_name["fwd bf16 B4 H16 N4096 d128 non-causal"]
    assert fwd.flops == 4 * 4 * 16 * 4096 ** 2 * 128
    assert by_name["fwd bf16 B4 H16 N4096 d128 causal"].flops == fwd.flops / 2
    assert by_name["bwd bf16 B4 H16 N4096 d128 non-causal"].flops == 2.5 * fwd.flops
    assert fwd.intensity == pytest.approx(4096 / 2)      # N/2 per head


def test_attention_is_graded_against_cudnn_and_also_shows_flash():
    for case in cases("flash_attention"):
        assert list(case.baselines) == ["SDPA cuDNN", "SDPA flash"]


def test_training_counts_six_flops_per_parameter_per_token():
    from grader.perf.cases import training

    (case,) = cases("training")
    assert case.flops == 6 * training.PARAMS * training.TOKENS


# --- statuses: a missing or failing kernel is a row, never a crash -------------------------------------------


def fake_case(check_output=exact_check, target="demo.add_one", check="demo.perf.speed"):
    return Benchmark(kernel="demo", case="one int", target=target,
                     make_inputs=lambda gen: (int(torch.randint(0, 100, (1,), generator=gen)),),
                     baselines={"base": None}, flops=4e9, bytes_moved=1e6, check_output=check_output,
                     check=check)


def run_case(clock, modules, case=None, baseline_ms=1.0, impl_class=FakeImpl):
    case = case or fake_case()
    case = Benchmark(**{**case.__dict__, "baselines": {"base": baseline(clock, baseline_ms)}})
    impl = impl_class(modules, clock)
    return bench._measure_one(impl, case, seed=0, environment=lambda: [], bench=clock_bench(clock),
                              clock=clock, sync=lambda: None)


def demo_module(**functions):
    """A real module object, as the submission's modules are (an attribute missing from one is a stub)."""
    module = types.ModuleType("demo")
    module.__dict__.update(functions)
    return types.SimpleNamespace(demo=module)


def test_a_working_kernel_is_measured(clock):
    result = run_case(clock, kernel_module(clock, 2.0))
    assert result.ok and result.perf.ratio == pytest.approx(0.5)


def test_a_stub_is_listed_as_not_implemented(clock):
    def stub(x):
        raise NotImplementedError("add_one: not implemented yet")

    result = run_case(clock, demo_module(add_one=stub))
    assert result.status == "not implemented"


def test_a_missing_function_is_listed_as_not_implemented(clock):
    result = run_case(clock, demo_module())
    assert result.status == "not implemented" and "add_one" in result.message


class RunOnlyImpl:
    """An impl with `run` alone, short of what the timing calls on it: a fault of the harness."""

    def __init__(self, modules, clock):
        self._impl = FakeImpl(modules, clock)

    def run(self, fn, *args):
        return self._impl.run(fn, *args)


def test_a_harness_fault_is_listed_as_an_error_never_as_a_missing_kernel(clock):
    result = run_case(clock, kernel_module(clock, 2.0), impl_class=RunOnlyImpl)
    assert result.status == "error" and "run_harness" in result.message


def test_a_wrong_kernel_is_listed_as_wrong_output(clock):
    result = run_case(clock, kernel_module(clock, 2.0, output=lambda x: x))
    assert result.status == "wrong output" and "wrong output" in result.message


def test_a_crashing_kernel_is_listed_as_an_error(clock):
    def crash(x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    result = run_case(clock, demo_module(add_one=crash))
    assert result.status == "error" and "illegal memory access" in result.message


# --- table, ladders and calibration --------------------------------------------------------------------------


POINTS_TOML = """
[problem]
id = "demo"
title = "Demo"

[perf."demo.perf.speed"]
points = 4
description = "speed"
baseline = "base"
ladder = { pass = 0.5, good = 0.7, excellent = 0.85 }
"""


@pytest.fixture
def points_dir(tmp_path):
    folder = tmp_path / "points"
    folder.mkdir()
    (folder / "demo.toml").write_text(POINTS_TOML)
    return folder


def ok_result(ratio, check="demo.perf.speed"):
    perf = PerfResult(baseline_name="base", claimed_ms=1.0 / ratio, submission_ms=1.0 / ratio,
                      baselines_ms={"base": 1.0}, ratios={"base": ratio}, rounds=[])
    return bench.CaseResult(fake_case(check=check), "ok", perf=perf)


def test_ladder_is_point_7_85_95_of_the_reference_ratio():
    assert bench.ladder_for(0.9) == {"pass": 0.585, "good": 0.72, "excellent": 0.81, "reference_ratio": 0.9}


def test_reference_ratio_is_the_lowest_case_of_a_check():
    results = [ok_result(0.92), ok_result(0.86), ok_result(0.5, check=None),
               bench.CaseResult(fake_case(), "error", "boom")]
    assert bench.reference_ratios(results) == {"demo.perf.speed": 0.86}


def test_calibration_writes_only_declared_checks_and_keeps_other_models(tmp_path, points_dir):
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"NVIDIA H100 80GB HBM3": {"demo.perf.speed": bench.ladder_for(0.8)}}))
    points = load_points(points_dir, calibration, gpu_name="NVIDIA H200")
    ladders = bench.ladders_from([ok_result(0.9), ok_result(0.9, check="other.perf.x")], points)
    assert list(ladders) == ["demo.perf.speed"]
    bench.write_calibration(calibration, "NVIDIA H200", ladders)
    data = json.loads(calibration.read_text())
    assert set(data) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    ladder = load_points(points_dir, calibration, gpu_name="NVIDIA H200").checks["demo.perf.speed"].ladder
    assert (ladder.passing, ladder.good, ladder.excellent, ladder.source) == (0.585, 0.72, 0.81, "NVIDIA H200")


def test_ladder_display_shows_old_and_new(points_dir, tmp_path):
    points = load_points(points_dir, tmp_path / "none.json", gpu_name="NVIDIA H200")
    text = bench.format_ladders("NVIDIA H200", points, {"demo.perf.speed": bench.ladder_for(0.9)})
    assert "0.500 / 0.700 / 0.850 (default) -> 0.585 / 0.720 / 0.810" in text


def test_table_lists_ratio_level_and_missing_kernels(points_dir, tmp_path):
    points = load_points(points_dir, tmp_path / "none.json")
    results = [ok_result(0.75), bench.CaseResult(fake_case(), "not implemented", "stub")]
    table = bench.format_table(results, points)
    assert "0.750" in table and "good" in table
    assert "not implemented" in table
    assert "3.0 TFLOP/s" in table      # the kernel: 4e9 FLOP in 1/0.75 ms
    assert "4.0 TFLOP/s" in table      # the baseline: 4e9 FLOP in 1 ms


def test_bench_json_carries_the_perf_record(points_dir, tmp_path):
    points = load_points(points_dir, tmp_path / "none.json")
    data = bench.bench_json("solutions", {"gpu_name": "X"}, [ok_result(0.9)], points)
    (entry,) = data["cases"]
    assert entry["ratio"] == pytest.approx(0.9) and entry["level"] == "excellent" and entry["status"] == "ok"


def test_bench_grader_flag_is_the_grading_command_spelled_as_the_issue_asked(monkeypatch):
    from grader.bench import grading as grading_module

    calls = []
    monkeypatch.setattr(grading_module, "bench_grader", lambda copies, **options: calls.append((copies, options)) or 0)
    for spelling in (["bench", "grading"], ["bench", "--grader"]):
        done = CliRunner().invoke(main, [*spelling, "--copies", "2", "--no-perf"])
        assert done.exit_code == 0, done.output
    assert len(calls) == 2 and calls[0] == calls[1] and calls[0][0] == 2 and calls[0][1]["no_perf"]


# --- bench grading's summary ------------------------------------------------------------------------------


def test_grading_summary_of_cpu_results_with_only_some_figures_does_not_crash():
    from grader.bench.grading import bench_summary

    results = [{"status": "graded", "timing": {"tests_s": 13.0, "child_s": 16.5, "total_s": 16.6}},
               {"status": "error", "timing": {"tests_s": 0.0}}, {"status": "timeout"}]
    text = bench_summary(results, elapsed=40.0)
    assert "graded 3 copies" in text
    assert "statuses: error, graded, timeout" in text
