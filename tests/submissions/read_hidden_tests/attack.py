# target: softmax
"""Cheat: read the hidden tests from disk and carry them out in an error message, which the checking
process records and the student's report prints for a public test. It looks where they could be: the
checker tree (the worker's working directory), the test folders on sys.path, and the submission's
scratch (where a sandboxed run keeps its disposable copy of them), sources and bytecode alike.
Defence: that copy is emptied right after collection, before the worker imports this module, and the
checker tree's own copy is covered by it (grader.disposable); the message says what the search found."""
import os as _os
import sys as _sys
from pathlib import Path as _Path

_SENTINEL = b"GALLERY-HIDDEN-" + b"SENTINEL"   # in two parts, so this file does not match itself


def _candidate_folders():
    folders = [_Path.cwd() / "tests_hidden", _Path.cwd()]
    folders += [_Path(p) for p in _sys.path if p.endswith("tests_hidden")]
    if _os.environ.get("HOME"):
        folders.append(_Path(_os.environ["HOME"]).parent)    # the submission's scratch
    return folders


def _hidden_sources():
    found, looked = [], 0
    for folder in _candidate_folders():
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.suffix not in (".py", ".pyc") or "triton-cache" in path.parts:
                continue
            looked += 1
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if _SENTINEL in data:
                at = data.index(_SENTINEL)
                found.append(f"== {path}\n{data[max(0, at - 200):at + 200]!r}")
    return "\n".join(found) or f"no hidden tests found ({looked} files looked at)"


def softmax_triton(x):
    raise ValueError("hidden tests: " + _hidden_sources()[:1500])


def online_softmax(x, block_size):
    raise NotImplementedError("online_softmax: not implemented yet")
