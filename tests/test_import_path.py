"""The checker's import path holds no folder student code can write once collection is over."""

from __future__ import annotations

import sys
import sysconfig
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


def test_seal_keeps_the_interpreters_own_folders_when_python_lives_under_home(monkeypatch, tmp_path):
    # pyenv, conda or the handout's .venv under HOME: dropping site-packages broke late imports (sympy)
    site_packages = Path(sysconfig.get_paths()["purelib"])
    planted = tmp_path / "planted"
    monkeypatch.setattr(sys, "path", ["", str(site_packages), str(planted), *sys.path])
    dropped = import_path.seal([], environ={"HOME": str(Path(sys.prefix).parent), "TMPDIR": str(tmp_path)})
    assert dropped == ["", str(planted)] and str(site_packages) in sys.path
