"""The disposable copy of the hidden suite: readable while the checker collects it, gone before any
student code runs.

In a sandboxed grading run the runner binds a writable, marked copy of the hidden suite's folder over the checker
tree's own (`make_copy`) and names it in the environment (ENV). Once pytest has imported every test
module, the plugin empties it (`empty_named_copy`); the worker imports the student's modules only on its
first call, which a test makes after collection. The tests then run from memory: nothing of the hidden
suite is left on disk for student code to read (tracebacks of hidden tests show no source lines).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ENV = "GRADER_DISPOSABLE_TESTS"
MARKER = ".grader-disposable-copy"   # only a folder the runner marked is ever emptied


class NotDisposable(RuntimeError):
    """ENV names a folder the runner did not mark, or emptying it failed: grading must not go on."""


def make_copy(source: Path, target: Path) -> Path:
    """A writable copy of `source` (bytecode caches included, so nothing recompiles), marked disposable."""
    shutil.copytree(source, target)
    for folder in (target, *(path for path in target.rglob("*") if path.is_dir())):
        folder.chmod(0o755)   # the checker tree is read-only: the copy's folders must allow deleting
    (target / MARKER).write_text("emptied by the checker once its tests are collected (grader.disposable)\n")
    return target


def empty_named_copy(environ=os.environ) -> Path | None:
    """Empty the folder ENV names (a bind mount's target in the sandbox: the folder itself stays)."""
    named = environ.get(ENV)
    if not named:
        return None
    folder = Path(named)
    if not (folder / MARKER).is_file():
        raise NotDisposable(f"{ENV}={named} is not a disposable copy (no {MARKER}): not deleting it, "
                            "and not grading with the hidden tests readable")
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    left = sorted(entry.name for entry in folder.iterdir())
    if left:
        raise NotDisposable(f"{ENV}={named}: could not delete {left}")
    return folder
