"""Gradescope's autograder results format (results.json in Gradescope's container, gradescope.json in
each student's output folder): the one writer of it, and a check of it against Gradescope's
documented schema.

Two documents are written: the CPU preview that the autograder returns at submission time
(`preview`: public checks, plus hidden checks the staff mark visible after the due date, all on the
CPU; GPU-only checks are named in the top-level message as graded later), and the final upload from a
GPU grade (`final`: every check, the late penalty applied, the perf ratios as Gradescope's
`leaderboard`). One test per check; its output is markdown.
"""

from __future__ import annotations

import json
import math
import re

from grader.course import leaderboard
from grader.report import model

OUTPUT_LIMIT = 8000          # characters of failure text per test
FORMATS = ("text", "html", "simple_format", "md", "ansi")
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
             "tags", "visibility", "extra_data"}
HIDDEN_VISIBILITY = {"final": "after_published", "preview": "after_due_date"}


def final(result: dict, lateness=None) -> dict:
    """The upload for a GPU grade: every check scored, the late penalty applied, the leaderboard."""
    tests = [_test(problem, check, "final") for problem in result.get("problems", []) for check in problem["checks"]]
    lines = [f"**{_status_line(result)}**"]
    score = round(result["score"]["earned"], 4)
    if lateness is not None and lateness.outcome:
        lines.append(f"Late policy: {lateness.rule}. {lateness.outcome}.")
    if lateness is not None and lateness.penalty:
        score = lateness.final           # the top-level score overrides the tests' sum (Gradescope's rule)
    if model.provisional_note(result):
        lines.append(model.provisional_note(result).capitalize() + ".")
    data = {"score": score, "output": "\n\n".join(lines), "output_format": "md", "visibility": "visible",
            "stdout_visibility": "hidden", "execution_time": _seconds(result), "tests": tests}
    board = leaderboard.gradescope_entries(result)
    if board:
        data["leaderboard"] = board
    return data


def preview(result: dict, elapsed_s: float, visible_after_due: tuple[str, ...] = ()) -> dict:
    """What the autograder returns at submission time: the checks that ran on the CPU, scored; the
    GPU-only ones named as graded later."""
    tests, later = [], []
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            if not check["tests"]:
                continue                 # a hidden check the autograder does not run
            if check["not_run_here"]:
                later.append(f"- {problem['title']}: {check['description'] or check['id']} "
                             f"({model.points_text(check['points'])} points)")
                continue
            tests.append(_test(problem, check, "preview"))
    score = round(sum(t["score"] for t in tests), 4)
    possible = sum(t["max_score"] for t in tests)
    lines = [f"**CPU check at submission: {model.points_text(score)} / {model.points_text(possible)} points.** "
             + _status_line(result),
             "The GPU part comes later: after the due date every submission is graded again on the grading "
             "GPU, with the hidden tests at full size and the timed performance checks; that grade replaces "
             "this one" + (", and the hidden checks shown here become visible after the due date."
                           if visible_after_due else ".")]
    if later:
        lines.append("Graded on the GPU later:\n" + "\n".join(later))
    return {"score": score, "output": "\n\n".join(lines), "output_format": "md", "visibility": "visible",
            "stdout_visibility": "hidden", "execution_time": max(0, int(round(elapsed_s))), "tests": tests}


def _test(problem: dict, check: dict, kind: str) -> dict:
    failing = [t for t in check["tests"] if t["outcome"] != "passed"]
    blocks = []
    for test in failing:
        label = model.OUTCOME_LABELS.get(test["outcome"], test["outcome"])
        shown = "a hidden test" if check["suite"] == "hidden" else f"`{model.test_name(test['nodeid'])}`"
        block = f"- {shown}: {label}"
        message = model.student_message(test["message"], check["suite"]) if test["message"] else ""
        blocks.append(block + (f"\n\n{_fenced(message)}" if message else ""))
    output = "\n".join(blocks) if blocks else "All tests passed."
    if len(output) > OUTPUT_LIMIT:
        output = output[:OUTPUT_LIMIT] + "\n\n(cut short)"
    hidden = check["suite"] == "hidden"
    return {"name": f"{problem['title']}: {check['description'] or check['id']}", "number": check["id"],
            "score": round(check["earned"], 4), "max_score": check["possible"],
            "status": "passed" if not failing else "failed", "output": output, "output_format": "md",
            "visibility": HIDDEN_VISIBILITY[kind] if hidden else "visible",
            "tags": [problem["id"]] + (["perf"] if check["perf"] else [])}


def _fenced(text: str) -> str:
    """A markdown code block that no backtick run in `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _status_line(result: dict) -> str:
    line = model.STATUS_LABELS.get(result["status"], result["status"]).capitalize()
    return line + (f": {result['reason']}" if result.get("reason") else ".")


def _seconds(result: dict) -> int:
    value = (result.get("timing") or {}).get("total_s", 0) or 0
    return max(0, int(round(float(value))))


# --- the schema check --------------------------------------------------------------------------------


def problems(data) -> list[str]:
    """Every way `data` breaks Gradescope's results.json format; [] when it follows it."""
    found = []
    if not isinstance(data, dict):
        return ["the document is not a JSON object"]
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as error:
        found.append(f"not strict JSON: {error}")
    found += [f"unknown top-level key {key!r}" for key in sorted(set(data) - TOP_KEYS)]
    tests = data.get("tests")
    if "score" not in data and not (isinstance(tests, list) and tests and all(
            isinstance(t, dict) and "score" in t for t in tests)):
        found.append("no top-level score, and not every test has one")
    for key in ("score", "execution_time"):
        if key in data and not _number(data[key]):
            found.append(f"{key} is not a finite number")
    for key in ("output",):
        if key in data and not isinstance(data[key], str):
            found.append(f"{key} is not a string")
    for key in ("output_format", "test_output_format", "test_name_format"):
        if key in data and data[key] not in FORMATS:
            found.append(f"{key} {data[key]!r} is not one of {FORMATS}")
    for key in ("visibility", "stdout_visibility"):
        if key in data and data[key] not in VISIBILITIES:
            found.append(f"{key} {data[key]!r} is not one of {VISIBILITIES}")
    if "extra_data" in data and not isinstance(data["extra_data"], dict):
        found.append("extra_data is not an object")
    if tests is not None:
        if not isinstance(tests, list):
            found.append("tests is not a list")
        else:
            for index, test in enumerate(tests):
                found += [f"tests[{index}]: {p}" for p in _test_problems(test)]
    if "leaderboard" in data:
        found += _leaderboard_problems(data["leaderboard"])
    return found


def _test_problems(test) -> list[str]:
    if not isinstance(test, dict):
        return ["not an object"]
    found = [f"unknown key {key!r}" for key in sorted(set(test) - TEST_KEYS)]
    for key in ("score", "max_score"):
        if key in test and not _number(test[key]):
            found.append(f"{key} is not a finite number")
    for key in ("name", "number", "output"):
        if key in test and not isinstance(test[key], str):
            found.append(f"{key} is not a string")
    if "status" in test and test["status"] not in ("passed", "failed"):
        found.append(f"status {test['status']!r} is not passed or failed")
    for key in ("output_format", "name_format"):
        if key in test and test[key] not in FORMATS:
            found.append(f"{key} {test[key]!r} is not one of {FORMATS}")
    if "visibility" in test and test["visibility"] not in VISIBILITIES:
        found.append(f"visibility {test['visibility']!r} is not one of {VISIBILITIES}")
    if "tags" in test and not (isinstance(test["tags"], list) and all(isinstance(t, str) for t in test["tags"])):
        found.append("tags is not a list of strings")
    if "extra_data" in test and not isinstance(test["extra_data"], dict):
        found.append("extra_data is not an object")
    return found


def _leaderboard_problems(board) -> list[str]:
    if not isinstance(board, list):
        return ["leaderboard is not a list"]
    found, seen = [], set()
    for index, entry in enumerate(board):
        where = f"leaderboard[{index}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "value", "order"}:
            found.append(f"{where}: an object of name, value and (optionally) order")
            continue
        if not isinstance(entry.get("name"), str) or entry["name"] in seen:
            found.append(f"{where}: name missing, not a string, or repeated")
        seen.add(entry.get("name"))
        if not (_number(entry.get("value")) or isinstance(entry.get("value"), str)):
            found.append(f"{where}: value is not a number or a string")
        if "order" in entry and entry["order"] not in ("asc", "desc"):
            found.append(f"{where}: order {entry['order']!r} is not asc or desc")
    return found


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
