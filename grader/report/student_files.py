"""One student's output folder: result.json, the Gradescope file, report.html and log.txt, each atomic.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.report import gradebook, html
from grader.report.atomic import write_atomic
from grader.report.class_files import RESULT_FILE


def write_submission_outputs(folder: Path, result: dict, log: str) -> None:
    """result.json, Gradescope's results.json, report.html and log.txt, each written atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "log.txt", log)
    write_atomic(folder / "results.json", json.dumps(gradebook.gradescope_results(result), indent=1))
    try:
        page = html.render_student(result)
    except Exception as error:  # noqa: BLE001 - one report that cannot render must not stop the batch
        page = (f"<!doctype html><title>report</title><p>The report could not be rendered "
                f"({type(error).__name__}); result.json holds the grade.</p>")
    write_atomic(folder / "report.html", page)
    write_atomic(folder / RESULT_FILE, json.dumps(result, indent=1, sort_keys=True))   # last: marks done
