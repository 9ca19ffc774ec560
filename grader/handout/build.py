"""Build the student handout: `dist/handout/` and `dist/handout.tar.gz`, then prove it consistent.

The handout holds exactly what a student needs to work and to run the public suite:
- `assignment/`: the stubs generated from solutions/ (the same text as the repo's assignment/);
- `tests_public/`: the public suite, as is;
- `grader/`: only the modules the public suite imports (the import closure of the pytest plugin and of
  the tests' own `grader` imports), plus points files filtered to public checks (see `public_points_toml`);
- `grader/bench/`: the student bench (`make bench`) and what it imports, with the perf checks' points and
  ladders (`grader/bench/perf_points/`, `grader/bench/calibration.json`): the targets students are timed on;
- `pyproject.toml`, `Makefile`, `README.md`: rendered from `handout/` templates;
- `WRITEUP.md` and `WRITEUP.html`: the problems, points and ladders.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import shutil
import sys
import tarfile
import time
from pathlib import Path

import jinja2

from grader import layout
from grader.errors import HandoutError
from grader.handout import is_cache
from grader.handout.stubs import REPO_ROOT, expected_stubs
from grader.handout.writeup import environment, write_writeup
from grader.perf.cases import KERNELS
from grader.points import load_points

# Student tools beyond the public suite: `make bench` runs `python -m grader.bench`.
# The bench imports each kernel's cases by name (importlib), which the import scan cannot see. The
# training step's baseline is the bf16 mixed-precision step itself, an answer: it stays with staff.
BENCH_KERNELS_KEPT = ("training",)
STUDENT_TOOLS = ("grader.bench.__main__", "grader.bench.student",
                 *(f"grader.perf.cases.{kernel}" for kernel in KERNELS if kernel not in BENCH_KERNELS_KEPT))
# Always shipped: the scoring core the plugin reads (also reached by the closure; listed for clarity).
ALWAYS = ("grader", "grader.errors", "grader.points", "grader.results", "grader.scoring",
          "grader.layout")   # grader.layout: the AUDIENCE comments of the shipped packages cite it


# --- which grader modules the public suite needs ---------------------------------------------------------


def grader_imports(path: Path, package_dir: Path) -> set[str]:
    """Modules of the `grader` package that the file at `path` imports (at any depth of its code)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "grader")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "grader":
                continue
            found.add(node.module)
            # `from grader import devices` imports a submodule when one of that name exists.
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if _module_path(candidate, package_dir.parent) is not None:
                    found.add(candidate)
    return found


def _module_path(module: str, root: Path) -> Path | None:
    parts = module.split(".")
    as_file = root.joinpath(*parts).with_suffix(".py")
    as_package = root.joinpath(*parts, "__init__.py")
    return as_file if as_file.is_file() else as_package if as_package.is_file() else None


def grader_closure(root: Path = REPO_ROOT) -> list[str]:
    """The grader modules reached from the plugin and from every public test file, transitively."""
    package_dir = root / "grader"
    todo = {"grader.plugin", *ALWAYS, *STUDENT_TOOLS}
    for test_file in sorted((root / "tests_public").rglob("*.py")):
        todo |= grader_imports(test_file, package_dir)
    done: set[str] = set()
    while todo:
        module = todo.pop()
        if module in done:
            continue
        done.add(module)
        # Importing grader.x.y runs every parent package's __init__ first.
        parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        todo |= parents - done
        path = _module_path(module, root)
        if path is None:
            continue          # a name imported from a module (`from grader.points import load_points`)
        todo |= grader_imports(path, package_dir) - done
    staff = sorted(m for m in done if not layout.is_shipped_module(m, package_dir))
    if staff:
        raise HandoutError(f"the public suite imports modules that are not shipped {staff} (grader/layout.py); "
                           "move what students need out of them")
    return sorted(m for m in done if _module_path(m, root) is not None)


# --- points files students get -----------------------------------------------------------------------------


def public_points_toml(problem) -> str:
    """A problem's points file with only its public checks; hidden and perf checks appear as totals.

    Hidden test names, descriptions and ids stay with staff. The write-up publishes perf checks (what is
    timed and its ladder) because students need those targets; the shipped file need not list them.
    """
    lines = ["# Public checks of this problem (the full file, with hidden and performance checks, stays with",
             "# the course staff; their totals are below and in WRITEUP.md).",
             "[problem]",
             f"id = {_toml_str(problem.id)}",
             f"title = {_toml_str(problem.title)}",
             f"order = {problem.order}",
             f"hidden_points = {_num(sum(c.points for c in problem.checks if c.suite == 'hidden' and not c.perf))}",
             f"perf_points = {_num(sum(c.points for c in problem.checks if c.perf and c.suite == 'hidden'))}",
             ""]
    for check in problem.checks:
        if check.suite != "public":
            continue
        table = "perf" if check.perf else "checks"
        lines += [f"[{table}.{_toml_str(check.id)}]",
                  f"points = {_num(check.points)}",
                  'suite = "public"',
                  f"description = {_toml_str(check.description)}"]
        lines += [f"{key} = {_toml_str(value)}" for key, value in (("tier", check.tier), ("kernel", check.kernel))
                  if value]
        if check.perf:
            ladder = check.ladder
            lines += [f"baseline = {_toml_str(check.baseline)}",
                      f"ladder = {{ pass = {ladder.passing}, good = {ladder.good}, excellent = {ladder.excellent} }}"]
        lines.append("")
    return "\n".join(lines)


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)   # a JSON string is a valid TOML basic string


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# --- assembling the tree -------------------------------------------------------------------------------------


def _copy_tree(source: Path, target: Path) -> None:
    for path in sorted(source.rglob("*")):
        if is_cache(path.relative_to(source)):
            continue
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)


def _render(env: jinja2.Environment, name: str, **context) -> str:
    return env.get_template(name).render(**context)


def _project_metadata(root: Path) -> dict:
    from grader.points import tomllib

    return tomllib.loads((root / "pyproject.toml").read_text())


def assemble(root: Path, out: Path) -> dict:
    """Write the handout tree into `out` (which must not exist); returns facts for the README."""
    stubs = expected_stubs(root)
    (out / "assignment").mkdir(parents=True)
    for name, text in stubs.items():
        (out / "assignment" / name).write_text(text)
    _copy_tree(root / "tests_public", out / "tests_public")

    modules = grader_closure(root)
    for module in modules:
        source = _module_path(module, root)
        destination = out / source.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
    points = load_points(root / "grader" / "points", root / "grader" / "calibration.json")
    (out / "grader" / "points").mkdir(parents=True, exist_ok=True)
    for problem in points.problems:
        (out / "grader" / "points" / f"{problem.id}.toml").write_text(public_points_toml(problem))
    _write_calibration(root, out, {c.id for c in points.checks.values() if c.suite == "public" and c.perf})
    _write_bench_targets(root, out, points)

    project = _project_metadata(root)["project"]
    env = environment(root)
    module_names = sorted(name[:-3] for name in stubs if name != "__init__.py")
    facts = {"modules": module_names, "dependencies": project.get("dependencies", []),
             "requires_python": project.get("requires-python", ">=3.10"),
             "version": project.get("version", "0.1.0"), "grader_modules": modules,
             "problems": points.problems}
    (out / "pyproject.toml").write_text(_render(env, "pyproject.toml.j2", **facts))
    shutil.copy2(root / "handout" / "Makefile", out / "Makefile")
    (out / "README.md").write_text(_render(env, "README.md.j2", **facts))
    write_writeup(root, out)
    _ship_cited_docs(root, out)
    return facts


CITED_DOC = re.compile(r"\bdocs/[\w.-]+\.md\b")
STAFF_PART = re.compile(r"<!-- staff -->.*?<!-- /staff -->\n?", re.DOTALL)   # in a doc: names staff-only files


def student_version(text: str) -> str:
    """A doc as students get it: the parts between `staff` comments left out."""
    return re.sub(r"\n{3,}", "\n\n", STAFF_PART.sub("", text))


def _ship_cited_docs(root: Path, out: Path) -> None:
    """Copy each `docs/*.md` that a shipped file cites, so what students read is self-contained."""
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml")):
        for cited in CITED_DOC.findall(path.read_text(errors="replace")):
            source, target = root / cited, out / cited
            if not source.is_file():
                raise HandoutError(f"{path.relative_to(out)} cites {cited}, which does not exist")
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(student_version(source.read_text()))


def _write_calibration(root: Path, out: Path, public_perf_ids: set[str]) -> None:
    """grader/calibration.json with the ladders of public perf checks only (often none): the points
    loader reads it, and the shipped code and docs name it."""
    source = root / "grader" / "calibration.json"
    data = json.loads(source.read_text()) if source.exists() else {}
    kept = {gpu: {cid: ladder for cid, ladder in checks.items() if cid in public_perf_ids}
            for gpu, checks in data.items()}
    (out / "grader" / "calibration.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


def perf_points_toml(source: Path) -> str:
    """A points file's [problem] and perf checks only (all suites, default ladders as written): what
    `make bench` needs to print levels and points. Tests' check ids and descriptions stay out."""
    from grader.points import tomllib

    data = tomllib.loads(source.read_text())
    meta = data["problem"]
    lines = ["# Performance checks of this problem, for `make bench` (the write-up lists them too).",
             "[problem]", f"id = {_toml_str(meta['id'])}", f"title = {_toml_str(meta['title'])}",
             f"order = {meta.get('order', 99)}", ""]
    for check_id, spec in data.get("perf", {}).items():
        ladder = spec["ladder"]
        lines += [f"[perf.{_toml_str(check_id)}]", f"points = {_num(spec['points'])}",
                  f"suite = {_toml_str(spec.get('suite', 'hidden'))}",
                  f"description = {_toml_str(spec.get('description', ''))}",
                  f"baseline = {_toml_str(spec.get('baseline', ''))}",
                  f"ladder = {{ pass = {ladder['pass']}, good = {ladder['good']}, excellent = {ladder['excellent']} }}",
                  ""]
    return "\n".join(lines)


def _write_bench_targets(root: Path, out: Path, points) -> None:
    """grader/bench/perf_points/*.toml (default ladders) and calibration.json (per-GPU ladders)."""
    folder = out / "grader" / "bench" / "perf_points"
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted((root / "grader" / "points").glob("*.toml")):
        (folder / source.name).write_text(perf_points_toml(source))
    source = root / "grader" / "calibration.json"
    perf_ids = {c.id for c in points.checks.values() if c.perf}
    data = json.loads(source.read_text()) if source.exists() else {}
    kept = {gpu: {cid: ladder for cid, ladder in checks.items() if cid in perf_ids} for gpu, checks in data.items()}
    (out / "grader" / "bench" / "calibration.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")


def build_time() -> int:
    """The time every file of the tarball carries: SOURCE_DATE_EPOCH when set (the same inputs then give
    the same bytes), else now. Never 1970: Python's zipfile refuses dates before 1980."""
    return int(os.environ.get("SOURCE_DATE_EPOCH") or time.time())


def make_tarball(out: Path, mtime: int | None = None) -> Path:
    """`<out>.tar.gz` holding the folder under its own name, in name order, owners cleared and every
    file dated `mtime` (default `build_time()`), the gzip header too."""
    tarball = out.parent / f"{out.name}.tar.gz"
    mtime = build_time() if mtime is None else mtime

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = mtime
        return info

    with open(tarball, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=mtime, filename="") as packed, \
            tarfile.open(fileobj=packed, mode="w") as archive:
        for path in sorted(out.rglob("*")):
            archive.add(path, arcname=f"{out.name}/{path.relative_to(out)}", recursive=False,
                        filter=normalise)
    return tarball


def _safe_to_replace(out: Path, root: Path) -> bool:
    """Only a previous handout (or an empty folder) may be deleted; never the repo or a folder above it."""
    if out == root or out in root.parents or (out / ".git").exists():
        return False
    return not any(out.iterdir()) or (out / "WRITEUP.md").exists()


def build_handout(out: str = "dist/handout", verify: bool = True, root: Path | str | None = None,
                  solution_modules: list[str] | None = None) -> int:
    """Build the handout folder and tarball; with `verify`, run every proof. Returns the exit status."""
    root = Path(root).resolve() if root is not None else REPO_ROOT
    out_path = Path(out)
    out_path = (out_path if out_path.is_absolute() else Path.cwd() / out_path).resolve()
    if out_path.exists():
        if not _safe_to_replace(out_path, root):
            raise HandoutError(f"{out_path} exists and does not look like a handout; not deleting it")
        shutil.rmtree(out_path)
    started = time.perf_counter()
    facts = assemble(root, out_path)
    tarball = make_tarball(out_path)
    built = time.perf_counter() - started
    files = [p for p in out_path.rglob("*") if p.is_file()]
    print(f"handout: {out_path} ({len(files)} files, {sum(p.stat().st_size for p in files) / 1024:.0f} KiB)")
    print(f"tarball: {tarball} ({tarball.stat().st_size / 1024:.0f} KiB); built in {built:.1f} s")
    print(f"modules: {', '.join(facts['modules'])}; grader modules shipped: {len(facts['grader_modules'])}")
    if not verify:
        return 0
    from grader.handout.verify import verify_handout

    failures = verify_handout(root, out_path, tarball, solution_modules=solution_modules)
    total = time.perf_counter() - started
    if failures:
        print(f"\nhandout NOT verified ({len(failures)} problems, {total:.0f} s):", file=sys.stderr)
        for failure in failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    print(f"handout verified in {total:.0f} s")
    return 0
