"""The class gradebook, grades.csv: the one writer of it.

One row per student: id, status, total (the raw total, before any late penalty), max, then per problem
its points and the perf part of them, then late ("yes"/"no", empty when unknown), late_hours (how long
after its due date, from the course file and metadata.csv), penalty (points off by the course's late
policy), final (the total after it: what goes to the LMS), provisional ("yes" when GPU-only checks were
not run, as on a CPU) and the reason. Gradescope's format is grader/course/gradescope_json.py's.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.course import late
from grader.report import model
from grader.report.atomic import write_atomic
from grader.report.plain_text import csv_cell


def grades_columns(points) -> list[str]:
    columns = ["id", "status", "total", "max"]
    for problem in points.problems:
        columns += [problem.id, f"{problem.id}_perf"]
    return columns + ["late", "late_hours", "penalty", "final", "provisional", "reason"]


def grades_row(result: dict, points, lateness=None) -> dict:
    unscored = result["status"] == model.HARNESS_ERROR     # not a grade: no number to copy anywhere
    lateness = lateness or late.assess(None, result)
    hours = lateness.late_hours
    row = {"id": result["id"], "status": result["status"],
           "total": "" if unscored else _number(result["score"]["earned"]),
           "max": _number(result["score"]["possible"]),
           "late": {True: "yes", False: "no"}.get(lateness.late, ""),
           "late_hours": "" if hours is None or not lateness.late else f"{hours:.2f}",
           "penalty": "" if unscored else _number(lateness.penalty),
           "final": "" if unscored or lateness.final is None else _number(lateness.final),
           "provisional": "yes" if model.provisional_note(result) else "",
           "reason": " ".join(str(result.get("reason", "")).split())}
    by_id = {p["id"]: p for p in result.get("problems", [])}
    for problem in points.problems:
        scored = by_id.get(problem.id)
        row[problem.id] = _number(scored["earned"]) if scored else ("0" if result["status"] == "not_gradable" else "")
        row[f"{problem.id}_perf"] = _number(scored["perf_earned"]) if scored and scored["perf_possible"] else ""
    return row


def write_grades_csv(path: Path, results: list[dict], points, course=None) -> None:
    """grades.csv for `results`, the late policy of `course` (a grader.course.course_file.Course) applied."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=grades_columns(points))
    writer.writeheader()
    for result in results:
        row = grades_row(result, points, late.assess(course, result))
        # ids and reasons come from submissions: no cell may be a spreadsheet formula
        writer.writerow({column: csv_cell(value) for column, value in row.items()})
    write_atomic(Path(path), text.getvalue())


def _number(value: float) -> str:
    return f"{round(value, 4):g}"
