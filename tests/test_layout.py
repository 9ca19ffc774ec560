"""grader/'s folders say whom each part serves; what ships and what regrades is derived from them."""

import shutil
from pathlib import Path

import pytest

from grader import layout
from grader.grade import checker_tree as checker_tree_module
from grader.grade.checker_tree import build_checker_tree
from grader.grade.settings import Settings

GRADER = Path(layout.__file__).resolve().parent


def test_every_subpackage_declares_a_known_audience():
    packages = [p.parent for p in GRADER.glob("*/__init__.py")]
    assert len(packages) >= 7
    for package in packages:
        assert layout.declared_audience(package) in layout.AUDIENCES


def test_a_subpackage_without_an_audience_is_refused(tmp_path):
    (tmp_path / "newpart").mkdir()
    (tmp_path / "newpart" / "__init__.py").write_text('"""Something new."""\n')
    with pytest.raises(LookupError, match="does not say whom it serves"):
        layout.audience_of("newpart/thing.py", tmp_path)


@pytest.mark.parametrize("path, audience", [
    ("plugin.py", "students"), ("points/softmax.toml", "students"), ("references/attention.py", "students"),
    ("scenarios/flash_attention.py", "checker"), ("perf/cases/matmul.py", "students"),
    ("bench/student.py", "tools"),
    ("grade/runner.py", "staff"), ("report/templates/style.css", "staff"), ("handout/build.py", "staff"),
    ("cli/__init__.py", "staff"),
])
def test_the_folder_decides_the_audience(path, audience):
    assert layout.audience_of(path) == audience


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A copy of the grader package as the runner's source checkout, and a way to fingerprint it."""
    repo = tmp_path / "repo"
    shutil.copytree(GRADER, repo / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    for suite in ("tests_public", "tests_hidden"):
        (repo / suite).mkdir()
        (repo / suite / f"test_{suite}.py").write_text("def test_x():\n    pass\n")
    monkeypatch.setattr(checker_tree_module, "REPO_ROOT", repo)
    settings = Settings(submissions=tmp_path, out=tmp_path / "out", tests_root=repo,
                        points_dir=repo / "grader" / "points")
    trees = iter(range(100))
    return repo, lambda: build_checker_tree(settings, tmp_path / f"tree{next(trees)}")


@pytest.mark.parametrize("staff_file", ["report/templates/style.css", "grade/runner.py", "handout/build.py",
                                        "bench/roofline.py", "cli/__init__.py"])
def test_a_staff_only_edit_keeps_existing_grades(checkout, staff_file):
    repo, fingerprint = checkout
    before = fingerprint()
    with open(repo / "grader" / staff_file, "a") as f:
        f.write("\n# edited\n")
    assert fingerprint() == before


@pytest.mark.parametrize("checker_file", ["plugin.py", "scenarios/flash_attention.py", "references/matmul.py",
                                          "points/softmax.toml", "perf/cases/softmax.py"])
def test_an_edit_the_checking_run_sees_regrades(checkout, checker_file):
    repo, fingerprint = checkout
    before = fingerprint()
    with open(repo / "grader" / checker_file, "a") as f:
        f.write("\n# edited\n")
    assert fingerprint() != before
