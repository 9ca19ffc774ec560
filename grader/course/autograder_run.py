"""`grader gradescope run`: what run_autograder does inside Gradescope's container, per submission.

It stages ROOT/submission as `grader grade` would (any layout grade accepts: flat files, assignment/,
a wrapper folder, one archive), grades it on the CPU with the public suite and the hidden checks
marked visible after the due date (the zip's autograder.json), sandboxed when bubblewrap works in the
container, and writes ROOT/results/results.json: the CPU preview (grader.course.gradescope_json). When
the zip carries this submission's final grade from the GPU (`gradescope build --final`), that is
written instead. A run the harness itself cannot complete writes no results.json and exits 1:
Gradescope then shows the autograder as failed, which is not a zero for the student.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import click

from grader.course import gradescope_json
from grader.course.autograder_build import FINAL_DIR, MANIFEST
from grader.errors import GraderError

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
SUBMISSION_ID = "submission"


def run_autograder(root: Path) -> int:
    root = Path(root)
    source = root / "source"
    started = time.monotonic()
    try:
        manifest = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        click.echo(f"harness error: {source / MANIFEST} unreadable ({error}); rebuild the autograder zip", err=True)
        return 1
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    final = baked_final(source, _metadata(root))
    if final is not None:
        _write(results, final)
        click.echo("wrote the final grade baked into the autograder (from the GPU grading)", err=True)
        return 0
    with tempfile.TemporaryDirectory(prefix="autograder-") as scratch:
        try:
            result = grade_upload(root / "submission", Path(scratch), manifest)
        except GraderError as error:
            click.echo(f"harness error: {error}", err=True)
            return 1
    if result is None or result.get("status") == "harness_error":
        reason = (result or {}).get("reason", "no result was written")
        click.echo(f"harness error (not the student's fault; no results.json written): {reason}", err=True)
        return 1
    data = gradescope_json.preview(result, time.monotonic() - started, tuple(manifest.get("visible_after_due", ())))
    for problem in gradescope_json.problems(data):
        click.echo(f"warning: results.json breaks Gradescope's format: {problem}", err=True)
    _write(results, data)
    return 0


def grade_upload(upload: Path, scratch: Path, manifest: dict) -> dict | None:
    """Grade the upload as the one submission of a batch, on the CPU; its result.json, or None."""
    from grader.grade.runner import grade_all

    submissions, out = scratch / "submissions", scratch / "out"
    submissions.mkdir()
    stage_upload(upload, submissions)
    grade_all(submissions, out=out, suite=manifest.get("suite", "public"), gpus="", jobs=1,
              timeout=float(manifest.get("timeout_s", 1200)), no_sandbox=not bubblewrap_works(),
              selection=tuple(manifest.get("selection", ())), force=True)
    path = out / SUBMISSION_ID / "result.json"
    return json.loads(path.read_text()) if path.is_file() else None


def stage_upload(upload: Path, submissions: Path) -> Path:
    """Put the upload where a batch finds it: a lone archive stays an archive, anything else is a
    folder (links are copied as links, which intake lists and never follows)."""
    if not upload.is_dir():
        raise GraderError(f"{upload} does not exist: nothing was submitted")
    entries = [p for p in upload.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_file() and not entries[0].is_symlink():
        suffix = next((s for s in ARCHIVE_SUFFIXES if entries[0].name.lower().endswith(s)), None)
        if suffix is not None:
            target = submissions / f"{SUBMISSION_ID}{suffix}"
            shutil.copyfile(entries[0], target)
            return target
    target = submissions / SUBMISSION_ID
    shutil.copytree(upload, target, symlinks=True)
    return target


def bubblewrap_works() -> bool:
    """bubblewrap is installed and can start this interpreter here (a container may forbid it)."""
    from grader.grade import sandbox

    bwrap = sandbox.find_bwrap()
    if bwrap is None:
        return False
    try:
        return subprocess.run(sandbox.probe_argv(bwrap), capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def baked_final(source: Path, metadata: dict) -> dict | None:
    """The final grade the zip carries for this submission: found by Gradescope's submission id
    (`submission_<id>`, the folder name of Gradescope's export), or a submitter's email or SID."""
    folder = source / FINAL_DIR
    if not folder.is_dir():
        return None
    keys = []
    if metadata.get("id") is not None:
        keys += [f"submission_{metadata['id']}", str(metadata["id"])]
    for user in metadata.get("users") or []:
        keys += [str(user.get(k)) for k in ("email", "sid") if user.get(k)]
    for key in keys:
        path = folder / f"{key}.json"
        if "/" not in key and path.is_file():
            return json.loads(path.read_text())
    return None


def _metadata(root: Path) -> dict:
    try:
        data = json.loads((root / "submission_metadata.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(results: Path, data: dict) -> None:
    from grader.report.atomic import write_atomic

    write_atomic(results / "results.json", json.dumps(data, indent=1, allow_nan=False))
