"""`grader gradescope build`: the autograder zip Gradescope runs at every submission.

Gradescope's contract: the zip holds `setup.sh` (run once, as root, on its Ubuntu image) and
`run_autograder` (run per submission, with the upload in /autograder/submission; it must write
/autograder/results/results.json). Gradescope unpacks the zip into /autograder/source. This zip adds
the grader package, the stubs, the public suite and the hidden test files of the checks the course
file marks visible after the due date (`[gradescope] visible_after_due`), and `autograder.json`: which
tests to run, the budget, and the versions setup.sh installs (the Makefile's TORCH_PIN and TRITON_PIN,
torch as its CPU wheel). With `--final REPORTS`, each graded student's gradescope.json from a GPU grade
rides along under final/: after uploading that zip and regrading, Gradescope shows the final grade.

The hidden tests of marked checks, and the grader itself, can be read by submitted code in
Gradescope's container: mark only checks whose tests may be seen. Hidden-suite helpers (packages
whose AUDIENCE is "checker") ship only when a hidden check is marked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from grader import layout
from grader.errors import GraderError

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST = "autograder.json"
FINAL_DIR = "final"
SOURCE_FOLDERS = ("grader", "assignment", "tests_public")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}
DEFAULT_TIMEOUT_S = 1200.0
CPU_WHEELS = "https://download.pytorch.org/whl/cpu"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04 or later):
# Python, the CPU wheel of torch and Triton pinned as the course's Makefile pins them, bubblewrap (used
# when the container allows it), and the grader, in a venv inside the source folder.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap >/dev/null
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip "setuptools>=70.1"
.venv/bin/python -m pip install -q --index-url {wheels} "{torch}"
.venv/bin/python -m pip install -q "{triton}"
.venv/bin/python -m pip install -q -e .
.venv/bin/python -c "import torch, triton, grader; print('ready: torch', torch.__version__, triton.__version__)"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: it grades /autograder/submission on the CPU as
# `grader grade` would and writes /autograder/results/results.json. GRADESCOPE_ROOT puts the
# /autograder tree elsewhere (the CI test runs it in a temporary folder); GRADER_PYTHON picks the
# interpreter (default: the venv setup.sh made).
set -uo pipefail
ROOT="${GRADESCOPE_ROOT:-/autograder}"
SOURCE="$ROOT/source"
PYTHON="${GRADER_PYTHON:-}"
if [ -z "$PYTHON" ]; then
  if [ -x "$SOURCE/.venv/bin/python" ]; then PYTHON="$SOURCE/.venv/bin/python"; else PYTHON=python3; fi
fi
cd "$SOURCE" || exit 1
exec "$PYTHON" -m grader gradescope run --root "$ROOT"
"""


def build_autograder(out: Path, course=None, final_reports: Path | None = None) -> str:
    """Write the zip at `out`; return a line saying what it holds. `course`: a Course (course.toml)."""
    torch_pin, triton_pin = makefile_pins(REPO_ROOT / "Makefile")
    marked = tuple(course.visible_after_due) if course else ()
    selection, hidden_files = hidden_selection(marked) if marked else ([], [])
    timeout = (course.gradescope_timeout_s if course else None) or DEFAULT_TIMEOUT_S
    manifest = {"format": 1, "suite": "all" if marked else "public", "selection": ["tests_public", *selection],
                "visible_after_due": list(marked), "timeout_s": timeout, "torch": torch_pin, "triton": triton_pin}
    finals = baked_finals(final_reports) if final_reports else {}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        setup = SETUP_SH.format(wheels=CPU_WHEELS, torch=torch_pin, triton=triton_pin)
        _add_text(archive, "setup.sh", setup, 0o755)
        _add_text(archive, "run_autograder", RUN_AUTOGRADER, 0o755)
        _add_text(archive, MANIFEST, json.dumps(manifest, indent=1))
        for path in source_files(bool(marked)) + hidden_files:
            archive.write(path, path.relative_to(REPO_ROOT).as_posix())
        if course and course.source:
            archive.write(course.source, "course.toml")
        for key, text in sorted(finals.items()):
            _add_text(archive, f"{FINAL_DIR}/{key}.json", text)
    hidden = f", hidden checks visible after the due date: {', '.join(marked)}" if marked else ""
    baked = f", {len(finals)} final grades baked in" if finals else ""
    return f"wrote {out} ({torch_pin}, {triton_pin}{hidden}{baked})"


def makefile_pins(makefile: Path) -> tuple[str, str]:
    try:
        text = makefile.read_text()
    except OSError:
        raise GraderError(f"{makefile} not found: the autograder pins torch and Triton as the Makefile does; "
                          "build it from the course's checkout") from None
    pins = [re.search(rf"^{name}\s*\?=\s*(\S+)\s*$", text, re.M) for name in ("TORCH_PIN", "TRITON_PIN")]
    if not all(pins):
        raise GraderError(f"{makefile}: no TORCH_PIN / TRITON_PIN line (`TORCH_PIN ?= torch==X`)")
    return pins[0].group(1), pins[1].group(1)


def source_files(with_checker: bool) -> list[Path]:
    """The files of the checkout the autograder runs from: the grader package (without hidden-suite
    helpers unless hidden checks run), the stubs, the public suite and pyproject.toml."""
    files = [REPO_ROOT / "pyproject.toml"]
    for folder in SOURCE_FOLDERS:
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            relative = path.relative_to(REPO_ROOT)
            if not path.is_file() or SKIPPED_PARTS & set(relative.parts) or path.suffix in (".pyc", ".tmp"):
                continue
            hidden_helper = folder == "grader" and layout.audience_of(relative.relative_to("grader")) == "checker"
            if hidden_helper and not with_checker:
                continue
            files.append(path)
    return files


def hidden_selection(marked: tuple[str, ...]) -> tuple[list[str], list[Path]]:
    """(the hidden test functions of the marked checks, as pytest node ids; their files). Found by
    collecting the hidden suite once: each marked check must be a hidden check with tests, and a test
    function must not mix marked and unmarked checks (the autograder runs whole functions)."""
    from grader.grade.parts import unit_of
    from grader.points import load_points

    checks = load_points().checks
    for check_id in marked:
        if check_id not in checks:
            raise GraderError(f"gradescope.visible_after_due: {check_id!r} is not a check of grader/points/*.toml")
        if checks[check_id].suite != "hidden":
            raise GraderError(f"gradescope.visible_after_due: {check_id!r} is a {checks[check_id].suite} check; "
                              "public checks always run at submission")
    collected = collected_hidden_tests()
    units: dict[str, set[str]] = {}
    for nodeid, check in collected:
        units.setdefault(unit_of(nodeid), set()).add(check)
    chosen = sorted(unit for unit, ids in units.items() if ids & set(marked))
    for unit in chosen:
        mixed = units[unit] - set(marked)
        if mixed:
            raise GraderError(f"{unit} tests both marked and unmarked checks ({', '.join(sorted(mixed))}): mark "
                              "them together in gradescope.visible_after_due, or neither")
    found = {check for unit in chosen for check in units[unit]}
    missing = [c for c in marked if c not in found]
    if missing:
        raise GraderError(f"gradescope.visible_after_due: no hidden test checks {', '.join(missing)}")
    files = sorted({REPO_ROOT / unit.split("::", 1)[0] for unit in chosen})
    return chosen, files


def collected_hidden_tests() -> list[tuple[str, str]]:
    """(node id, check id) of every hidden test, from a collect-only run of the hidden suite."""
    from grader.results import read_stream

    with tempfile.TemporaryDirectory(prefix="grader-collect-") as scratch:
        stream = Path(scratch) / "collected.jsonl"
        env = dict(os.environ, GRADER_FORCE_CPU="1", PYTHONPATH=str(REPO_ROOT))
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "grader.plugin", "tests_hidden", "--collect-only",
                               "-q", "--impl", "solutions", "--results-json", str(stream), "-p", "no:cacheprovider"],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
        header = read_stream(stream.read_text()).results if stream.exists() else None
    if header is None or header.collected_tests is None:
        raise GraderError(f"collecting the hidden suite failed (exit {done.returncode}): "
                          f"{(done.stdout + done.stderr).strip()[-800:]}")
    return [tuple(pair) for pair in header.collected_tests]


def baked_finals(reports: Path) -> dict[str, str]:
    """submission id -> its gradescope.json, for every graded student in a GPU grade's output folder."""
    from grader.report.student_files import GRADESCOPE_FILE

    finals = {}
    for path in sorted(Path(reports).glob(f"*/{GRADESCOPE_FILE}")):
        result = path.parent / "result.json"
        if result.is_file() and json.loads(result.read_text()).get("status") != "harness_error":
            finals[path.parent.name] = path.read_text()
    if not finals:
        raise GraderError(f"{reports}: no graded student's {GRADESCOPE_FILE} to bake in "
                          "(grade them with `grader grade` first)")
    return finals


def _add_text(archive: zipfile.ZipFile, name: str, text: str, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, text)
