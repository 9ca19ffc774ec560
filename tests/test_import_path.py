"""The checker's import path holds no folder student code can write once collection is over."""

from __future__ import annotations

import sys
from pathlib import Path

from grader.worker import import_path


def test_working_folder_and_suite_folders_are_unsafe(tmp_path):
    hidden, other = tmp_path / "tests_hidden", tmp_path / "site"
    entries = ["", ".", str(hidden), str(hidden / "sub"), str(other)]
    assert import_path.writable_entries(entries, [str(hidden)]) == ["", ".", str(hidden), str(hidden / "sub")]


def test_seal_drops_them_keeps_the_grader_and_preloads_late_imports(tmp_path, monkeypatch):
    hidden, scratch_tmp = tmp_path / "tests_hidden", tmp_path / "tmp"
    grader_home = str(Path(import_path.__file__).resolve().parent.parent)
    monkeypatch.setattr(sys, "path", ["", str(hidden), str(scratch_tmp / "x"), grader_home, *sys.path])
    dropped = import_path.seal([str(hidden)], environ={"TMPDIR": str(scratch_tmp)})
    assert dropped == ["", str(hidden), str(scratch_tmp / "x")]
    assert grader_home in sys.path and "" not in sys.path
    assert {"hmac", "colorsys", "json"} <= set(sys.modules)
