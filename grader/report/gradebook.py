"""Machine outputs: the class gradebook (grades.csv) and Gradescope's autograder results.json.

grades.csv has one row per student: id, status, total, max, then per problem its points and the perf
part of them, then late, provisional ("yes" when GPU-only checks were not run, as on a CPU) and the
reason. Gradescope's schema (score, tests with name, score, max_score, output, visibility) gets one
test per check; hidden checks are `after_published`.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.report import model
from grader.report.atomic import write_atomic

OUTPUT_LIMIT = 8000     # characters of failure text per Gradescope test


def grades_columns(points) -> list[str]:
    columns = ["id", "status", "total", "max"]
    for problem in points.problems:
        columns += [problem.id, f"{problem.id}_perf"]
    return columns + ["late", "provisional", "reason"]


def grades_row(result: dict, points) -> dict:
    unscored = result["status"] == model.HARNESS_ERROR     # not a grade: no number to copy anywhere
    row = {"id": result["id"], "status": result["status"],
           "total": "" if unscored else _number(result["score"]["earned"]),
           "max": _number(result["score"]["possible"]),
           "late": {True: "yes", False: "no"}.get(result.get("late"), ""),
           "provisional": "yes" if model.provisional_note(result) else "",
           "reason": " ".join(str(result.get("reason", "")).split())}
    by_id = {p["id"]: p for p in result.get("problems", [])}
    for problem in points.problems:
        scored = by_id.get(problem.id)
        row[problem.id] = _number(scored["earned"]) if scored else ("0" if result["status"] == "not_gradable" else "")
        row[f"{problem.id}_perf"] = _number(scored["perf_earned"]) if scored and scored["perf_possible"] else ""
    return row


def write_grades_csv(path: Path, results: list[dict], points) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=grades_columns(points))
    writer.writeheader()
    for result in results:
        writer.writerow(grades_row(result, points))
    write_atomic(Path(path), text.getvalue())


def gradescope_results(result: dict) -> dict:
    """Gradescope's autograder results.json for one submission."""
    tests = []
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            failing = [t for t in check["tests"] if t["outcome"] != "passed"]
            output = "\n\n".join(f"{t['nodeid']}: {model.OUTCOME_LABELS.get(t['outcome'], t['outcome'])}"
                                 + (f"\n{model.student_message(t['message'], check['suite'])}" if t["message"] else "")
                                 for t in failing)
            tests.append({
                "name": f"{problem['title']}: {check['description'] or check['id']}",
                "number": check["id"],
                "score": round(check["earned"], 4),
                "max_score": check["possible"],
                "status": "passed" if not failing else "failed",
                "output": output[:OUTPUT_LIMIT],
                "visibility": "after_published" if check["suite"] == "hidden" else "visible",
                "tags": [problem["id"]] + (["perf"] if check["perf"] else []),
            })
    summary = model.STATUS_LABELS.get(result["status"], result["status"])
    if result.get("reason"):
        summary += f": {result['reason']}"
    return {"score": round(result["score"]["earned"], 4), "output": summary, "visibility": "visible",
            "stdout_visibility": "hidden", "execution_time": int(result.get("timing", {}).get("total_s", 0)),
            "tests": tests}


def _number(value: float) -> str:
    return f"{round(value, 4):g}"
