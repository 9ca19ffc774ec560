"""`grader grade` and `grader bench grading` from the command line, and the example submissions."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import cli
from grader.bench import grading
from grader.bench.grading import bench_summary
from grader.grade import runner, sizing

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))

import make_examples  # noqa: E402


def _capture(monkeypatch, module, name):
    """Replace `module.name` with a recorder, on a machine that has GPUs 0 and 1."""
    monkeypatch.setattr(sizing, "detect_gpus", lambda env: ["0", "1"])
    seen = {}

    def fake(*args, **kwargs):
        seen["args"], seen["kwargs"] = args, kwargs
        return 0

    monkeypatch.setattr(module, name, fake)
    return seen


def test_grade_passes_every_option_to_grade_all(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, runner, "grade_all")
    result = CliRunner().invoke(cli.main, ["grade", str(tmp_path), "--out", str(tmp_path / "r"),
                                           "--suite", "public", "--gpus", "0,1", "--jobs", "3",
                                           "--timeout", "60", "--only", "alice", "--only", "bob",
                                           "--force", "--no-sandbox", "--no-perf", "--worker-memory", "4096",
                                           "--per-gpu", "3", "--whole-suite"])
    assert result.exit_code == 0, result.output
    assert seen["kwargs"] == {"submissions": str(tmp_path), "out": str(tmp_path / "r"), "suite": "public",
                              "gpus": "0,1", "jobs": 3, "timeout": 60.0, "only": ("alice", "bob"),
                              "force": True, "no_sandbox": True, "no_perf": True, "worker_memory": 4096,
                              "per_gpu": 3, "split": False}


def test_grade_slurm_passes_the_slurm_options_to_grade_on_slurm(monkeypatch, tmp_path):
    from grader.grade import slurm

    seen = {}
    monkeypatch.setattr(slurm, "grade_on_slurm", lambda *a, **k: seen.update(k) or 0)
    result = CliRunner().invoke(cli.main, ["grade", str(tmp_path), "--slurm", "--sbatch-arg=--partition=gpu",
                                           "--sbatch-arg", "--time=1:00:00", "--array-parallelism", "8",
                                           "--no-wait", "--only", "alice"])
    assert result.exit_code == 0, result.output
    assert seen["sbatch_args"] == ("--partition=gpu", "--time=1:00:00")
    assert seen["array_parallelism"] == 8 and seen["no_wait"] is True and seen["only"] == ("alice",)


def test_slurm_only_options_without_slurm_are_refused(tmp_path):
    result = CliRunner().invoke(cli.main, ["grade", str(tmp_path), "--no-wait"])
    assert result.exit_code == 2 and "need --slurm" in result.output


def test_report_rebuilds_the_class_files_from_results_on_disk(tmp_path):
    result = {"id": "alice", "status": "not_gradable", "reason": "empty", "late": None, "problems": [],
              "score": {"earned": 0, "possible": 10, "total": 10}}
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "result.json").write_text(json.dumps(result))
    done = CliRunner().invoke(cli.main, ["report", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "grades.csv").read_text().splitlines()[1].startswith("alice,not_gradable,0,")
    assert "alice" in (tmp_path / "index.html").read_text()


def test_grade_refuses_a_missing_submissions_folder(tmp_path):
    result = CliRunner().invoke(cli.main, ["grade", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_bench_grading_calls_bench_grader_with_copies(monkeypatch):
    seen = _capture(monkeypatch, grading, "bench_grader")
    result = CliRunner().invoke(cli.main, ["bench", "grading", "--copies", "3"])
    assert result.exit_code == 0, result.output
    assert seen["args"] == (3,)
    assert seen["kwargs"] == {"gpus": None, "suite": "all", "no_perf": False, "per_gpu": None, "out": None,
                              "split": None, "save_test_seconds": False}


def test_bench_grading_passes_gpus_per_gpu_suite_no_perf_and_out(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, grading, "bench_grader")
    result = CliRunner().invoke(cli.main, ["bench", "grading", "--copies", "2", "--gpus", "0,1", "--per-gpu", "4",
                                           "--suite", "public", "--no-perf", "--out", str(tmp_path), "--split"])
    assert result.exit_code == 0, result.output
    assert seen["args"] == (2,) and seen["kwargs"] == {"gpus": "0,1", "suite": "public", "no_perf": True,
                                                       "per_gpu": 4, "out": str(tmp_path), "split": True,
                                                       "save_test_seconds": False}


def test_bench_summary_reports_throughput_and_overhead():
    results = [{"status": "graded", "timing": {"tests_s": 2.0, "child_s": 4.0, "total_s": 4.5}}] * 2
    text = bench_summary(results, elapsed=60.0)
    assert "2.00 submissions/minute" in text
    assert "overhead beyond test time: 2.50 s" in text and "grader side 0.50 s" in text
    assert "per hour per GPU" not in text        # no GPU: no per-GPU figure


def test_bench_summary_reads_no_overhead_off_tests_that_ran_in_parts_at_once():
    results = [{"status": "graded", "parts": ["1-a", "2-b"],
                "timing": {"tests_s": 200.0, "child_s": 110.0, "total_s": 111.0}}]
    text = bench_summary(results, elapsed=111.0)
    assert "overhead beyond test time: not measured, the tests ran in 2 parts at once" in text
    assert "-89" not in text                     # 111 s in all less 200 s of tests summed over the parts


def test_bench_summary_reports_submissions_per_hour_per_gpu():
    results = [{"status": "graded", "gpu": "0", "per_gpu": 4,
                "timing": {"tests_s": 2.0, "child_s": 4.0, "total_s": 4.5}}] * 4
    text = bench_summary(results, elapsed=600.0, gpus=2)
    assert "12.0 submissions per hour per GPU (2 GPU(s), 4 at once on each)" in text


def test_examples_hold_reference_stubs_and_a_buggy_partial(tmp_path):
    warnings = make_examples.write_examples(tmp_path / "submissions")
    assert warnings == [] or all("does not exist yet" in w for w in warnings)
    reference, partial = tmp_path / "submissions" / "reference", tmp_path / "submissions" / "partial"
    for module, _, old, new in make_examples.BUGS:
        if (REPO / "solutions" / f"{module}.py").exists():
            text = (partial / "assignment" / f"{module}.py").read_text()
            assert old not in text and new in text
            assert text != (reference / f"{module}.py").read_text()
    assert not (partial / "assignment" / f"{make_examples.MISSING_IN_PARTIAL}.py").exists()
    assert (partial / "conftest.py").exists()
    stubs = list((tmp_path / "submissions" / "stubs").glob("*.py"))
    assert stubs and all("NotImplementedError" in stub.read_text() for stub in stubs)


def test_grade_help_runs_without_importing_torch():
    code = ("import sys\nsys.modules['torch'] = None\nfrom grader.cli import main\n"
            "sys.argv = ['grader', 'grade', '--help']\nmain()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "--no-sandbox" in done.stdout and "--only" in done.stdout


@pytest.mark.parametrize("option, value", [("--jobs", "0"), ("--timeout", "0"), ("--worker-memory", "-1"),
                                           ("--per-gpu", "0")])
def test_out_of_range_options_are_refused_before_anything_runs(tmp_path, option, value):
    result = CliRunner().invoke(cli.main, ["grade", str(tmp_path), option, value])
    assert result.exit_code == 2 and option in result.output and "Traceback" not in result.output


def test_the_partial_examples_matmul_is_wrong_but_never_reads_past_the_matrix(tmp_path):
    """Its bug must give the same wrong answer every run: inputs are views into NaN-filled buffers, so
    a read past a row or column would put NaN in the output."""
    import importlib.util

    import torch

    make_examples.write_examples(tmp_path / "submissions")
    path = tmp_path / "submissions" / "partial" / "assignment" / "matmul.py"
    spec = importlib.util.spec_from_file_location("partial_matmul", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generator = torch.Generator().manual_seed(0)
    m, k, n = 33, 45, 17
    a_buffer = torch.full((m + 8, k + 8), float("nan"))
    b_buffer = torch.full((k + 8, n + 8), float("nan"))
    a, b = a_buffer[:m, :k], b_buffer[:k, :n]
    a.copy_(torch.randn(m, k, generator=generator))
    b.copy_(torch.randn(k, n, generator=generator))
    first, second = module.matmul(a, b), module.matmul(a, b)
    assert torch.isfinite(first).all() and torch.equal(first, second)
    assert not torch.allclose(first, a @ b, atol=1e-3)          # still a bug the suites catch


def test_gpus_the_machine_does_not_have_are_refused_with_what_it_has(monkeypatch, tmp_path):
    monkeypatch.setattr(sizing, "detect_gpus", lambda env: [])
    for command in (["grade", str(tmp_path)], ["bench", "grading"]):
        result = CliRunner().invoke(cli.main, [*command, "--gpus", "3"])
        assert result.exit_code != 0
        assert "GPU 3 is not on this machine" in result.output and "no GPU" in result.output, result.output
    monkeypatch.setattr(sizing, "detect_gpus", lambda env: ["0", "1"])
    result = CliRunner().invoke(cli.main, ["grade", str(tmp_path), "--gpus", "0,3"])
    assert result.exit_code != 0 and "it has GPUs 0, 1" in result.output, result.output


@pytest.mark.parametrize("make, only, expected", [
    (lambda root: None, (), "no submissions in"),
    (lambda root: (root / "alice").mkdir(), ("nobody",), "--only nobody: no such submission"),
])
def test_nothing_to_grade_is_refused_with_what_exists(tmp_path, make, only, expected):
    subs = tmp_path / "subs"
    subs.mkdir()
    make(subs)
    arguments = ["grade", str(subs), "--out", str(tmp_path / "out"), "--gpus", "", "--no-sandbox"]
    result = CliRunner().invoke(cli.main, [*arguments, *(f"--only={who}" for who in only)])
    assert result.exit_code != 0 and expected in result.output, result.output
    if only:
        assert "there are 1: alice" in result.output
