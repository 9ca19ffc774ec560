"""The checker tree a batch grades with, and the key that says when a grade can be kept.

`build_checker_tree` copies what the checking run needs (the grader package, the points, the suites)
into a pristine tree and fingerprints what the checking run uses of it (grader/layout.py); `grade_key`
joins that fingerprint to a submission's content and the options the TA gave.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from grader import layout
from grader.grade.settings import REPO_ROOT, SUITE_DIRS, Settings
from grader.points import POINTS_DIR


def build_checker_tree(settings: Settings, root: Path) -> str:
    """A pristine copy of what the checking run needs (grader package, points, suites, pytest config);
    returns a fingerprint of its content, part of every grade's resume key."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "calibration.json.tmp")
    shutil.copytree(REPO_ROOT / "grader", root / "grader", ignore=ignore)
    if settings.points_dir.resolve() != POINTS_DIR.resolve():
        shutil.rmtree(root / "grader" / "points")
        shutil.copytree(settings.points_dir, root / "grader" / "points", ignore=ignore)
    for name in SUITE_DIRS[settings.suite]:
        source = settings.tests_root / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            (root / name).mkdir(parents=True)
    if (REPO_ROOT / "pyproject.toml").exists():
        shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        # Files the checking run never uses (grader/layout.py: staff, tools) keep existing grades.
        if not name.startswith("grader/") or layout.is_graded(name[len("grader/"):], root / "grader"):
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def grade_key(content_hash: str, settings: Settings, fingerprint: str) -> str:
    """Same files, same suite and options, same grader and tests: same grade. Only options the TA
    gave count: a default worked out from the machine (the memory cap from its RAM) would make every
    node of a cluster, or a bigger grading box, regrade the whole class."""
    text = f"{content_hash}|{settings.suite}|perf={settings.perf}|{fingerprint}"
    if settings.worker_memory_option is not None:
        text += f"|memory={settings.worker_memory_option}"
    if settings.selection:                   # a chosen subset of the suites grades something else
        text += "|selection=" + ",".join(settings.selection)
    return hashlib.sha256(text.encode()).hexdigest()


def remove_tree(root: Path) -> None:
    """rmtree that also removes the read-only checker tree."""
    for path in Path(root).rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)
