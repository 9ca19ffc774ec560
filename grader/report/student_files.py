"""One student's output folder, each file written atomically:

- result.json: the grader's own record of the grade (grader/report/model.py), written last;
- gradescope.json: the same grade in Gradescope's results format, late penalty applied, ready to
  upload (grader/course/gradescope_json.py);
- report.html: the student's report;
- log.txt: the checking run's output.

report.html and gradescope.json derive from result.json and the course file kept in the output folder
(OUT/course.toml): the class files' rebuild writes them again when the course file changed them.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.course import gradescope_json, late, leaderboard
from grader.course.course_file import installed_course
from grader.errors import GraderError
from grader.report import html
from grader.report.atomic import write_atomic
from grader.report.plain_text import printable

RESULT_FILE = "result.json"
GRADESCOPE_FILE = "gradescope.json"
OLD_GRADESCOPE_FILE = "results.json"     # what the Gradescope file was called before: removed when met


def write_submission_outputs(folder: Path, result: dict, log: str) -> None:
    """log.txt, gradescope.json, report.html, then result.json (last: it marks the student done)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "log.txt", printable(log))   # the student's output: no terminal escapes for staff
    try:
        course = installed_course(folder.parent)
        name = leaderboard.pseudonym(result, leaderboard.salt_for(folder.parent, course))
    except (GraderError, OSError):    # the class files' rebuild names the problem; the grade is written
        course, name = None, ""
    for file_name, text in derived_files(result, late.assess(course, result), name).items():
        write_atomic(folder / file_name, text)
    (folder / OLD_GRADESCOPE_FILE).unlink(missing_ok=True)
    write_atomic(folder / RESULT_FILE, json.dumps(result, indent=1, sort_keys=True))


def refresh_derived_files(folder: Path, result: dict, lateness, leaderboard_name: str) -> bool:
    """Write report.html and gradescope.json again where their content changed; True if one did."""
    changed = False
    for file_name, text in derived_files(result, lateness, leaderboard_name).items():
        path = folder / file_name
        try:
            same = path.read_text(encoding="utf-8") == text
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            write_atomic(path, text)
            changed = True
    (folder / OLD_GRADESCOPE_FILE).unlink(missing_ok=True)
    return changed


def derived_files(result: dict, lateness, leaderboard_name: str) -> dict[str, str]:
    try:
        page = html.render_student(result, lateness, leaderboard_name)
    except Exception as error:  # noqa: BLE001 - one report that cannot render must not stop the batch
        page = (f"<!doctype html><title>report</title><p>The report could not be rendered "
                f"({type(error).__name__}); result.json holds the grade.</p>")
    upload = json.dumps(gradescope_json.final(result, lateness), indent=1)
    return {GRADESCOPE_FILE: upload, "report.html": page}
