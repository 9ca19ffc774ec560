"""grades.csv: columns and values, raw total, late columns and final total."""

import csv
import textwrap
import threading

import pytest

from grader.points import load_points
from grader.report import gradebook, model
from grader.results import END_LINE, header_line, read_stream, record_line
from grader.results import TestRecord as Record

POINTS = {
    "matmul": """
        [problem]
        id = "matmul"
        title = "Tiled matmul"
        order = 1
        [checks."matmul.correct"]
        points = 3
        description = "matches torch"
        [checks."matmul.hidden_shapes"]
        points = 2
        suite = "hidden"
        description = "odd shapes"
        [perf."matmul.perf.square"]
        points = 5
        description = "square bf16 vs cuBLAS"
        ladder = { pass = 0.5, good = 0.7, excellent = 0.85 }
    """,
    "softmax": """
        [problem]
        id = "softmax"
        title = "Softmax"
        order = 2
        [checks."softmax.rows"]
        points = 4
        description = "rows"
    """,
}


@pytest.fixture
def points(tmp_path):
    for name, text in POINTS.items():
        (tmp_path / f"{name}.toml").write_text(textwrap.dedent(text))
    return load_points(tmp_path, calibration_file=tmp_path / "none.json")


def _graded(points, student="alice", late=None):
    records = [Record("tests_public/test_matmul.py::test_correct", "matmul.correct", "passed"),
               Record("tests_hidden/test_matmul_hidden.py::test_odd", "matmul.hidden_shapes", "failed",
                      "max |err| 3.1 > allowed 0.02 (M=257 N=33 bf16)"),
               Record("tests_hidden/test_matmul_hidden.py::test_perf", "matmul.perf.square", "passed",
                      perf={"ratio": 0.9}),
               Record("tests_public/test_softmax.py::test_rows", "softmax.rows", "not_implemented",
                      "softmax: not implemented yet")]
    stream = "\n".join([header_line("x", "cuda", {}, []), *map(record_line, records), END_LINE])
    return model.build_result(student, points, read_stream(stream), "graded", "", "", {"late": late, "timing": {}},
                              suites=("public", "hidden"))


def test_csv_has_one_row_per_student_and_a_column_per_problem_and_perf_part(points, tmp_path):
    results = [_graded(points, late=True),
               model.not_gradable_result("bob", "no assignment module files, found: a, b", {"late": None}, 14.0)]
    path = tmp_path / "grades.csv"
    gradebook.write_grades_csv(path, results, points)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["id", "status", "total", "max", "matmul", "matmul_perf", "softmax",
                             "softmax_perf", "late", "late_hours", "penalty", "final", "provisional", "reason"]
    assert rows[0] | {} == {"id": "alice", "status": "graded", "total": "8", "max": "14", "matmul": "8",
                            "matmul_perf": "5", "softmax": "0", "softmax_perf": "", "late": "yes",
                            "late_hours": "", "penalty": "0", "final": "8", "provisional": "", "reason": ""}
    assert rows[1]["status"] == "not_gradable" and rows[1]["total"] == "0" and rows[1]["late"] == ""
    assert rows[1]["reason"] == "no assignment module files, found: a, b"


def test_parallel_writers_of_grades_csv_never_collide_or_leave_temporaries(points, tmp_path):
    """A Slurm report job, `grader report` and a local run may rebuild grades.csv at once: each must
    write through a temporary file of its own (a shared name lets one rename away another's)."""
    results = [_graded(points)]
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "grades.csv"
    errors = []

    def write():
        try:
            for _ in range(100):
                gradebook.write_grades_csv(path, results, points)
        except OSError as error:
            errors.append(error)

    writers = [threading.Thread(target=write) for _ in range(8)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []
    assert list(path.parent.iterdir()) == [path]
    assert [row["id"] for row in csv.DictReader(path.open())] == ["alice"]


def _graded_on_cpu(points):
    """A CPU run: the perf check is GPU-only, so it was not run here."""
    records = [Record("tests_public/test_matmul.py::test_correct", "matmul.correct", "passed"),
               Record("tests_hidden/test_matmul_hidden.py::test_perf", "matmul.perf.square", "not_run_here",
                      "GPU-only check: not run here (no CUDA)")]
    stream = "\n".join([header_line("x", "cpu", {}, []), *map(record_line, records), END_LINE])
    return model.build_result("carol", points, read_stream(stream), "graded", "", "", {"late": None, "timing": {}},
                              suites=("public", "hidden"))


def test_cpu_grade_with_gpu_only_checks_not_run_is_marked_provisional_everywhere(points, tmp_path):
    # a CPU grade is not final: a Triton path refusing CPU tensors would score 9.1 instead of 27.3
    from grader.report import html

    context = {"suite": "all", "files": {}, "ignored": [], "missing": [], "sandbox": "none", "grader_version": "0"}
    cpu, gpu = ({**result, **context} for result in (_graded_on_cpu(points), _graded(points)))
    assert "5 points of GPU-only checks were not run" in cpu["provisional"] and gpu["provisional"] == ""
    path = tmp_path / "grades.csv"
    gradebook.write_grades_csv(path, [cpu, gpu], points)
    assert [row["provisional"] for row in csv.DictReader(path.open())] == ["yes", ""]
    assert "Provisional grade." in html.render_student(cpu) and "Provisional grade." not in html.render_student(gpu)
    index = html.render_index([cpu, gpu], points)
    assert index.count('class="badge provisional"') == 1


@pytest.mark.parametrize("student", ['=HYPERLINK("http://evil.example","grades")', "+1+cmd|' /C calc'!A0",
                                     "-2+3", "@SUM(A1:A9)", "\t=1+1"])
def test_a_submission_id_that_reads_as_a_formula_is_written_as_text(points, tmp_path, student):
    path = tmp_path / "grades.csv"
    result = _graded(points, student=student)
    result["reason"] = "=1+1 in the reason too"
    gradebook.write_grades_csv(path, [result], points)
    row = next(csv.DictReader(path.open()))
    assert row["id"] == "'" + student and row["reason"] == "'=1+1 in the reason too"
    assert row["total"] == "8"                     # numbers stay numbers


def test_negative_numbers_are_not_taken_for_formulas():
    from grader.report.plain_text import csv_cell

    assert [csv_cell(v) for v in ("-0.5", "-3", "+2e3", "-", "-x")] == ["-0.5", "-3", "+2e3", "'-", "'-x"]
