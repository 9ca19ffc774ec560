"""Proofs that a built handout is consistent. Each returns a list of failures (empty = proven).

1. `repo_stubs_current`: the repo's assignment/ is what the builder generates, and
   `stubs_import_cleanly`: every generated module imports in a fresh interpreter.
2. `solutions_score_full`: the solutions earn every point of both suites that can run here.
3. `stubs_score_zero`: the stubs earn nothing, and every graded test reports "not implemented";
   `solutions_pass_inside_handout`: the grader as shipped (import closure only) passes the solutions.
4. `nothing_leaks`: no solution code, hidden test name or hidden check in any handout file;
   `staff_paths_named`: no shipped text names a repo path students do not have; `authoring_shorthand`:
   no lecture-note shorthand; `default_package_index`: the Makefile leaves pip its own index.
5. `handout_installs_and_tests`: the tarball, unpacked into a fresh folder, installs quietly into a fresh venv
   and `make test` there runs the public suite and prints the points summary.
"""

from __future__ import annotations

import ast
import os
import re
import site
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from grader.handout import SKIP_NAMES
from grader.handout.stubs import BEGIN, END, expected_stubs, find_regions, stale_files
from grader.points import load_points
from grader.results import NOT_IMPLEMENTED, NOT_RUN_HERE, PASSED, read_stream
from grader.scoring import score_checks

# A solution line shorter than this is too generic to count as a leak (`return out`, `acc = 0`).
MIN_LEAK_CHARS = 24
SUMMARY_MARKER = "TOTAL"
SUITE_TIMEOUT_S = 1800
INSTALL_LINES = 6          # what `make install` may print when nothing fails: a few lines of its own


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADER_IMPL", "GRADER_ISOLATE")}
    env.update(extra)
    return env


# --- 1. the repo's stubs ------------------------------------------------------------------------------------


def repo_stubs_current(root: Path) -> list[str]:
    stale = stale_files(root, expected_stubs(root))
    return [f"assignment/{name} differs from what `grader handout stubs` generates" for name in stale]


_IMPORT_EACH = """
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as error:
        print(f"{name}: {type(error).__name__}: {error}")
"""


def stubs_import_cleanly(handout: Path) -> list[str]:
    """`import assignment.<module>` works for every stub, in a fresh interpreter (Triton interpreted)."""
    modules = [("assignment" if p.name == "__init__.py" else f"assignment.{p.stem}")
               for p in sorted((handout / "assignment").glob("*.py"))]
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *modules], cwd=handout, capture_output=True,
                          text=True, timeout=300, env=_clean_env(TRITON_INTERPRET="1"))
    failures = [f"stubs: `import {line}`" for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0:
        failures.append(f"stubs: the import check itself failed: {done.stderr[-500:]}")
    return failures


# --- 2 and 3. running the suites -------------------------------------------------------------------------------


def run_suites(root: Path, impl: str, suites: list[str], results_path: Path, *, log: Path | None = None):
    """Run pytest on `suites` (paths relative to `root`) against `impl`; (RunResults, finished, output)."""
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", *suites, "--impl", impl,
               "--results-json", str(results_path), "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=_clean_env(),
                          timeout=SUITE_TIMEOUT_S)
    output = done.stdout + done.stderr
    if log:
        log.write_text(output)
    text = results_path.read_text() if results_path.exists() else ""
    read = read_stream(text)
    return read.results, read.finished, output, done.returncode


def suite_paths(root: Path, modules: list[str] | None, hidden: bool = True) -> list[str]:
    """Test files of both suites, all of them or only those of `modules`."""
    paths = []
    for folder in ("tests_public",) + (("tests_hidden",) if hidden else ()):
        for path in sorted((root / folder).glob("test_*.py")):
            module = path.stem.removeprefix("test_").removesuffix("_hidden")
            if modules is None or module in modules:
                paths.append(f"{folder}/{path.name}")
    return paths


def solutions_score_full(root: Path, modules: list[str] | None = None, workdir: Path | None = None) -> list[str]:
    """Against solutions/, every test of `modules` (default: all) that runs here passes, and every check
    of their points files is carried by at least one test (a check nobody tests cannot be earned)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="handout-solutions-"))
    paths = suite_paths(root, modules)
    if not paths:
        return [f"no test files for modules {modules}"]
    results, finished, output, rc = run_suites(root, "solutions", paths, workdir / "solutions.jsonl",
                                               log=workdir / "solutions.log")
    if results is None or not finished:
        return [f"solutions: the test run did not finish (exit {rc}): {output[-1500:]}"]
    points = load_points(root / "grader" / "points", root / "grader" / "calibration.json")
    wanted = set(modules) if modules is not None else {p.id for p in points.problems}
    failures = [f"solutions: {t.nodeid} is {t.outcome}: {t.message[:300]}" for t in results.tests
                if t.outcome not in (PASSED, NOT_RUN_HERE)]
    carried = {t.check for t in results.tests}
    for check in points.checks.values():
        if check.problem in wanted and check.id not in carried:
            failures.append(f"solutions: check {check.id} ({check.suite}) has no test carrying it")
    earned = {p.problem_id: p for p in score_checks(points, results.tests)}
    for problem_id in sorted(wanted & set(earned)):
        print(f"verify:   {solutions_line(problem_id, earned[problem_id])}")
    return failures


def solutions_line(problem_id: str, problem) -> str:
    """What the solutions earned of the points this machine can run, and what it cannot run apart, so
    the line never reads as less than full marks when it is."""
    not_here = sum(c.check.points for c in problem.not_run_here)
    line = f"solutions {problem_id}: {problem.earned:g} / {problem.possible:g} of the points that run on this machine"
    if not_here:
        line += f"; {not_here:g} more in GPU-only checks, not run here ({problem.total:g} in all)"
    return line


def stubs_score_zero(root: Path, handout: Path, workdir: Path | None = None) -> list[str]:
    """The handout's stubs, run under both suites, earn 0 and every graded test is "not implemented"."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="handout-stubs-"))
    results, finished, output, rc = run_suites(root, str(handout / "assignment"), suite_paths(root, None),
                                               workdir / "stubs.jsonl", log=workdir / "stubs.log")
    if results is None or not finished:
        return [f"stubs: the test run did not finish (exit {rc}): {output[-1500:]}"]
    failures = []
    for record in results.tests:
        if record.outcome not in (NOT_IMPLEMENTED, NOT_RUN_HERE):
            failures.append(f"stubs: {record.nodeid} is {record.outcome}, not 'not implemented'"
                            + (f": {record.message[:200]}" if record.message else ""))
    points = load_points(root / "grader" / "points", root / "grader" / "calibration.json")
    earned = sum(problem.earned for problem in score_checks(points, results.tests))
    if earned:
        failures.append(f"stubs: earn {earned:g} points, not 0")
    return failures


def solutions_pass_inside_handout(root: Path, handout: Path, workdir: Path | None = None) -> list[str]:
    """The handout's own grader (only what was shipped) passes the solutions on every public test."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="handout-inside-"))
    results, finished, output, rc = run_suites(handout, str(root / "solutions"), ["tests_public"],
                                               workdir / "inside.jsonl", log=workdir / "inside.log")
    if results is None or not finished:
        return [f"inside: the public suite did not finish in the handout (exit {rc}): {output[-1500:]}"]
    failures = [f"inside: {t.nodeid} is {t.outcome} with the handout's grader: {t.message[:300]}"
                for t in results.tests if t.outcome not in (PASSED, NOT_RUN_HERE)]
    if not results.tests:
        failures.append("inside: the handout's public suite collected no tests")
    return failures


# --- 4. leaks -------------------------------------------------------------------------------------------------


def solution_secrets(root: Path) -> dict[str, str]:
    """{stripped line: where} for solution-region lines that appear nowhere outside a region."""
    inside: dict[str, str] = {}
    outside: set[str] = set()
    for path in sorted((root / "solutions").glob("*.py")):
        lines = path.read_text().splitlines()
        region_lines = set()
        for region in find_regions(lines, f"solutions/{path.name}"):
            region_lines.update(range(region.begin, region.end + 1))
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if number in region_lines:
                if len(text) >= MIN_LEAK_CHARS and text not in (BEGIN, END):
                    inside.setdefault(text, f"solutions/{path.name}:{number}")
            else:
                outside.add(text)
    return {text: where for text, where in inside.items() if text not in outside}


def hidden_secrets(root: Path) -> dict[str, str]:
    """{token: what} for hidden test function names, hidden file names and hidden-only checks."""
    secrets = {}
    for path in sorted((root / "tests_hidden").glob("*.py")):
        secrets[path.stem] = f"hidden test file {path.name}"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                secrets[node.name] = f"hidden test {path.name}::{node.name}"
    points = load_points(root / "grader" / "points", root / "grader" / "calibration.json")
    for check in points.checks.values():
        if check.suite == "hidden" and not check.perf:
            secrets[check.id] = f"hidden check id {check.id}"
            if len(check.description) >= MIN_LEAK_CHARS:
                secrets[check.description] = f"description of hidden check {check.id}"
    # A public test may share a name with a hidden one only if it is a public test itself.
    public_names = set()
    for path in sorted((root / "tests_public").glob("*.py")):
        public_names |= {n.name for n in ast.walk(ast.parse(path.read_text()))
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return {token: what for token, what in secrets.items() if token not in public_names}


def nothing_leaks(root: Path, handout: Path) -> list[str]:
    code_secrets = solution_secrets(root)
    name_secrets = hidden_secrets(root)
    names = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(name_secrets, key=len, reverse=True)))
                       + r")(?![\w])") if name_secrets else None
    failures = []
    for path in sorted(p for p in handout.rglob("*") if p.is_file()):
        relative = path.relative_to(handout)
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if stripped in (BEGIN, END):
                failures.append(f"leak: {relative}:{number} carries a solution marker")
            elif stripped in code_secrets:
                failures.append(f"leak: {relative}:{number} repeats {code_secrets[stripped]}: {stripped[:80]!r}")
            if names:
                for match in names.finditer(line):
                    failures.append(f"leak: {relative}:{number} names {name_secrets[match.group(1)]}")
    for folder in ("solutions", "tests_hidden"):
        if (handout / folder).exists():
            failures.append(f"leak: the handout contains {folder}/")
    return failures


# --- 5. the unpacked handout installs and tests itself -----------------------------------------------------------


def handout_installs_and_tests(tarball: Path, workdir: Path | None = None) -> tuple[list[str], str]:
    """Unpack, make a venv reusing this Python's packages, `make install` offline, `make test`."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="handout-install-"))
    with tarfile.open(tarball) as archive:
        try:
            archive.extractall(workdir, filter="data")
        except TypeError:   # Python without extraction filters (before 3.10.12 / 3.11.4)
            archive.extractall(workdir)
    folders = [p for p in workdir.iterdir() if p.is_dir()]
    if len(folders) != 1:
        return [f"install: the tarball should hold one folder, found {[p.name for p in folders]}"], ""
    folder = folders[0]
    venv = workdir / "venv"
    # --without-pip: the venv then uses this Python's pip and setuptools (a bundled old setuptools would
    # shadow them and cannot build an editable wheel offline).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    see_running_environment(python)
    env = _clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1")
    make = ["make", "-C", str(folder), f"PYTHON={python}", "PIP_FLAGS=--no-index --no-build-isolation --no-deps"]
    install = subprocess.run(make + ["install"], capture_output=True, text=True, env=env, timeout=600)
    if install.returncode != 0:
        return [f"install: `make install` failed (exit {install.returncode}): "
                f"{(install.stdout + install.stderr)[-1500:]}"], install.stdout + install.stderr
    install_lines = [line for line in (install.stdout + install.stderr).splitlines() if line.strip()]
    if len(install_lines) > INSTALL_LINES:
        return [f"install: `make install` printed {len(install_lines)} lines (at most {INSTALL_LINES}: pip stays "
                f"quiet unless it fails): {install_lines[:8]}"], install.stdout + install.stderr
    where = subprocess.run([str(python), "-c", "import grader, assignment; print(grader.__file__); "
                            "print(assignment.__file__)"], cwd=workdir, capture_output=True, text=True, env=env)
    failures = []
    if str(folder) not in where.stdout:
        failures.append(f"install: the venv imports grader/assignment from elsewhere: {where.stdout or where.stderr}")
    test = subprocess.run(make + ["test"], capture_output=True, text=True, env=env, timeout=SUITE_TIMEOUT_S)
    output = test.stdout + test.stderr
    # Stubs fail their tests (pytest exit 1, which make reports as "Error 1"); pytest's other non-zero
    # codes (interrupted, internal error, usage error, nothing collected) mean the handout is broken.
    pytest_code = re.search(r"\] Error (\d+)", output)
    if test.returncode != 0 and (pytest_code is None or pytest_code.group(1) != "1"):
        failures.append(f"test: `make test` failed with pytest exit {pytest_code.group(1) if pytest_code else '?'}: "
                        f"{output[-1500:]}")
    if "rror collecting" in output or "INTERNALERROR" in output or "UsageError" in output:
        failures.append(f"test: `make test` hit a collection/usage error: {output[-1500:]}")
    if not re.search(rf"^{SUMMARY_MARKER}\s", output, re.MULTILINE):
        failures.append(f"test: `make test` printed no points summary: {output[-1500:]}")
    if "not implemented" not in output:
        failures.append("test: `make test` on the stubs reported no 'not implemented' tests")
    return failures, output


def default_package_index(handout: Path) -> list[str]:
    """The student Makefile leaves the package index to pip (its default, pip.conf, PIP_INDEX_URL): an
    index of its own, unreachable on some networks, cost a retry loop per package there."""
    failures = []
    for number, line in enumerate((handout / "Makefile").read_text().splitlines(), start=1):
        code = line.split("#", 1)[0]
        if re.search(r"--(extra-)?index-url|--find-links|https?://", code):
            failures.append(f"Makefile:{number} names a package index of its own: {line.strip()[:100]}")
    return failures


def see_running_environment(python: Path) -> None:
    """A venv made by `python -m venv --system-site-packages` from inside a venv sees the BASE
    interpreter's packages, not this one's: a staff venv's torch, setuptools and wheel would be
    missing and the offline `pip install --no-build-isolation -e .` fails with `invalid command
    'bdist_wheel'` on the base's old setuptools. A .pth file puts this environment's site folders
    on the new venv's path, ahead of the base's."""
    if sys.prefix == sys.base_prefix:
        return                      # not a venv: --system-site-packages already shows its packages
    own = [folder for folder in site.getsitepackages() if Path(folder).is_dir()]
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(purelib).mkdir(parents=True, exist_ok=True)
    (Path(purelib) / "_staff_environment.pth").write_text("".join(f"{folder}\n" for folder in own))


# --- all together -----------------------------------------------------------------------------------------------


STAFF_DOCUMENTS = ("DESIGN.md", "shared/reference", "seeds-digest")   # exist beside the staff repo only
# A path of the repo written in a text: a top-level name, then path characters (placeholders included).
_REPO_PATH = r"(?<![\w./-])({names})/([\w.<>*{{}}-]+/?)*"
# Authoring shorthand students cannot decode: lecture-note section labels ("S3 §7.8") and talk of seeds.
SHORTHAND = re.compile(r"§|\bone seed\b|\bseeds? (says?|notes)\b|\bS\d+(-[A-Z])? (Ex\.|L)\d+")


def staff_paths_named(root: Path, handout: Path) -> list[str]:
    """Every place a shipped text file names a path of the repo that the handout does not hold (a
    staff-only file or folder: solutions/, tests_hidden/, tests/, scripts/ ...)."""
    names = sorted((p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=len,
                   reverse=True)
    pattern = re.compile(_REPO_PATH.format(names="|".join(map(re.escape, names))))
    failures = []
    for path, text in _shipped_texts(handout):
        for number, line in enumerate(text.splitlines(), start=1):
            for match in pattern.finditer(line):
                named = _fixed_part(match.group(0))
                if any(part in SKIP_NAMES for part in Path(named).parts):
                    continue              # caches Python and pytest write, never shipped and never needed
                if (root / named).exists() and not (handout / named).exists():
                    failures.append(f"{path}:{number} names {match.group(0).rstrip('.,:;')}, which students "
                                    "do not have")
    return failures


def _fixed_part(named: str) -> str:
    """The path up to its first placeholder (`solutions/<module>.py` -> `solutions`)."""
    parts = []
    for part in named.rstrip(".,:;").split("/"):
        if not part or any(char in part for char in "<>*{}"):
            break
        parts.append(part)
    return "/".join(parts)


def authoring_shorthand(handout: Path) -> list[str]:
    """Places where shipped text uses the authors' shorthand for the lecture notes (say what is meant)."""
    return [f"{path}:{number}: {match.group(0)!r} in {line.strip()[:80]!r}"
            for path, text in _shipped_texts(handout) for number, line in enumerate(text.splitlines(), start=1)
            for match in SHORTHAND.finditer(line)]


def _shipped_texts(handout: Path):
    for path in sorted(p for p in handout.rglob("*") if p.is_file()):
        try:
            yield path.relative_to(handout), path.read_text()
        except UnicodeDecodeError:
            continue


def self_contained(handout: Path) -> list[str]:
    """No shipped file cites a staff document; every `docs/*.md` cited is shipped."""
    failures = []
    for path in sorted(p for p in handout.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml")):
        text, relative = path.read_text(errors="replace"), path.relative_to(handout)
        failures += [f"{relative} cites {doc}, which students do not have" for doc in STAFF_DOCUMENTS if doc in text]
        failures += [f"{relative} cites {doc}, which is not in the handout"
                     for doc in set(re.findall(r"\bdocs/[\w.-]+\.md\b", text)) if not (handout / doc).is_file()]
    return failures


def verify_handout(root: Path, handout: Path, tarball: Path, *, solution_modules: list[str] | None = None,
                   workdir: Path | None = None) -> list[str]:
    """Every proof; prints progress and timings. `solution_modules` limits the (slow) solutions run."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="handout-verify-"))
    failures: list[str] = []
    steps = [
        ("repo assignment/ up to date", lambda: repo_stubs_current(root)),
        ("nothing from solutions/ or tests_hidden/ leaks", lambda: nothing_leaks(root, handout)),
        ("everything students read is in the handout", lambda: self_contained(handout)),
        ("no shipped text names a staff-only file", lambda: staff_paths_named(root, handout)),
        ("no authoring shorthand in what students read", lambda: authoring_shorthand(handout)),
        ("the student Makefile uses pip's own package index", lambda: default_package_index(handout)),
        ("every stub imports cleanly", lambda: stubs_import_cleanly(handout)),
        ("stubs score 0, every graded test not implemented", lambda: stubs_score_zero(root, handout, workdir)),
        ("the handout's own grader passes the solutions on the public suite",
         lambda: solutions_pass_inside_handout(root, handout, workdir)),
        ("solutions score full marks" + (f" ({', '.join(solution_modules)})" if solution_modules else ""),
         lambda: solutions_score_full(root, solution_modules, workdir)),
        ("the tarball installs in a fresh venv and `make test` runs", lambda: handout_installs_and_tests(
            tarball, workdir / "install")[0]),
    ]
    (workdir / "install").mkdir(exist_ok=True)
    for title, step in steps:
        started = time.perf_counter()
        found = step()
        status = "ok" if not found else f"FAILED ({len(found)})"
        print(f"verify: {title}: {status} [{time.perf_counter() - started:.0f} s]", flush=True)
        failures += found
    print(f"verify: logs in {workdir}")
    return failures
