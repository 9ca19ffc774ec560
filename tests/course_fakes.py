"""Small graded results for the course-operations tests (late policy, leaderboard, Gradescope, Canvas):
a two-problem points table and result.json records built through the real result model."""

import json
import textwrap
from pathlib import Path

from grader.perf.record import PerfResult, Round
from grader.points import load_points
from grader.report import model
from grader.report.student_files import write_submission_outputs
from grader.results import END_LINE, header_line, read_stream, record_line
from grader.results import TestRecord as Record

POINTS = {
    "matmul": """
        [problem]
        id = "matmul"
        title = "Tiled matmul"
        order = 1
        [checks."matmul.correct"]
        points = 6
        description = "matches torch"
        [checks."matmul.hidden_shapes"]
        points = 2
        suite = "hidden"
        description = "odd shapes"
        [perf."matmul.perf.throughput"]
        points = 4
        description = "bf16 against cuBLAS"
        baseline = "torch.matmul (cuBLAS)"
        ladder = { pass = 0.6, good = 0.75, excellent = 0.85 }
    """,
}
PERF_CASES = ("tests_hidden/test_matmul_hidden.py::test_throughput_against_cublas[bf16_4096x4096x4096]",
              "tests_hidden/test_matmul_hidden.py::test_throughput_against_cublas[bf16_8192x8192x8192]")


def write_points(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in POINTS.items():
        (folder / f"{name}.toml").write_text(textwrap.dedent(text))
    return load_points(folder, calibration_file=folder / "none.json")


def perf_record(ratio: float) -> dict:
    """The perf record as the plugin keeps it, written by its one writer (grader/perf/record.py)."""
    baseline = "torch.matmul (cuBLAS)"
    measured = PerfResult(baseline, claimed_ms=1.0 / ratio, submission_ms=1.0 / ratio, baselines_ms={baseline: 1.0},
                          ratios={baseline: ratio}, rounds=[Round(1.0 / ratio, {baseline: 1.0}, 1.1 / ratio)])
    return measured.as_record()


def graded(points, student: str, correct: int = 1, ratios=(0.9, 0.8), device: str = "cuda",
           status: str = "graded", **context) -> dict:
    """A result: matmul.correct passed or not, the hidden check failed, one perf test per ratio
    (None: that case failed its output check; on the CPU every perf test is not run here)."""
    records = [Record("tests_public/test_matmul.py::test_correct", "matmul.correct",
                      "passed" if correct else "failed", "" if correct else "max |err| 3 > 0.02"),
               Record("tests_hidden/test_matmul_hidden.py::test_odd", "matmul.hidden_shapes", "failed",
                      "max |err| 3.1 > allowed 0.02 (M=257 N=33 bf16)")]
    for nodeid, ratio in zip(PERF_CASES, ratios):
        if device == "cpu":
            records.append(Record(nodeid, "matmul.perf.throughput", "not_run_here", "GPU-only check: not run here"))
        elif ratio is None:
            records.append(Record(nodeid, "matmul.perf.throughput", "failed", "wrong output while timed"))
        else:
            records.append(Record(nodeid, "matmul.perf.throughput", "passed", perf=perf_record(ratio)))
    stream = "\n".join([header_line("x", device, {}, []), *map(record_line, records), END_LINE])
    base = {"late": None, "submitted_at": "", "suite": "all", "files": {"matmul": "ab"}, "ignored": [],
            "missing": [], "sandbox": "bubblewrap", "grader_version": "0", "timing": {"total_s": 12.3}}
    return model.build_result(student, points, read_stream(stream), status, "", "", base | context,
                              suites=("public", "hidden"))


def write_results(out: Path, results) -> Path:
    for result in results:
        write_submission_outputs(out / result["id"], result, log="")
    return out


def read_json(path: Path):
    return json.loads(Path(path).read_text())
