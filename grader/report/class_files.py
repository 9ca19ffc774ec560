"""The class files, rebuilt from every result.json in the output folder: grades.csv, index.html and
leaderboard.html, with the course file kept there (OUT/course.toml) applied; each student's
report.html and gradescope.json are written again where the course file changed them.

Only the end of a whole batch writes them: `grader grade` run locally, the report job of a Slurm
run, or `grader report OUT`. A Slurm task that grades a few students never does, so tasks never race
on them; and since they derive from the results on disk, rebuilding them is always safe.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.course import late, leaderboard
from grader.course.course_file import installed_course
from grader.report import gradebook, html
from grader.report.student_files import RESULT_FILE, refresh_derived_files

SIMILARITY_INDEX = "similarity/index.html"     # where `grader similarity --out OUT/similarity` writes
LEADERBOARD_FILE = "leaderboard.html"

__all__ = ["RESULT_FILE", "load_results", "write_class_files"]


def load_results(out: Path) -> list[dict]:
    results = []
    for path in sorted(Path(out).glob(f"*/{RESULT_FILE}")):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(results, key=lambda r: r.get("id", ""))


def write_class_files(out: Path, points) -> str:
    """Write the class files from the results on disk; return a line saying so."""
    out = Path(out)
    results = load_results(out)
    course = installed_course(out)
    lateness = {r["id"]: late.assess(course, r) for r in results}
    gradebook.write_grades_csv(out / "grades.csv", results, points, course)
    salt = leaderboard.salt_for(out, course)
    leaderboard.write_leaderboard(out / LEADERBOARD_FILE, results, salt)
    links = [(LEADERBOARD_FILE, "speed leaderboard")]
    if (out / SIMILARITY_INDEX).is_file():
        links.append((SIMILARITY_INDEX, "similarity report (staff only)"))
    rule = late.rule_text(course, "") if course else ""
    html.write_index(out / "index.html", results, points, lateness, rule, links)
    names = leaderboard.names(results, salt)
    refreshed = sum(refresh_derived_files(out / str(r["id"]), r, lateness[r["id"]], names[r["id"]])
                    for r in results if (out / str(r["id"]) / RESULT_FILE).is_file())
    again = f"; {refreshed} student report(s) brought up to date" if refreshed else ""
    return (f"wrote {out / 'grades.csv'}, {out / 'index.html'} and {out / LEADERBOARD_FILE} "
            f"({len(results)} submissions{again})")
