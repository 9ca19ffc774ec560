"""The class files (grades.csv, index.html), rebuilt from every result.json in the output folder.

Only the end of a whole batch writes them: `grader grade` run locally, the report job of a Slurm
run, or `grader report OUT`. A Slurm task that grades a few students never does, so tasks never race
on them; and since they derive from the results on disk, rebuilding them is always safe.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.report import gradebook, html

RESULT_FILE = "result.json"


def load_results(out: Path) -> list[dict]:
    results = []
    for path in sorted(Path(out).glob(f"*/{RESULT_FILE}")):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(results, key=lambda r: r.get("id", ""))


def write_class_files(out: Path, points) -> str:
    """Write grades.csv and index.html from the results on disk; return a line saying so."""
    out = Path(out)
    results = load_results(out)
    gradebook.write_grades_csv(out / "grades.csv", results, points)
    html.write_index(out / "index.html", results, points)
    return f"wrote {out / 'grades.csv'} and {out / 'index.html'} ({len(results)} submissions)"
