"""Who each part of `grader/` serves, read off the tree rather than from lists kept by hand.

Every subpackage says whom it serves in its `__init__.py`, as `AUDIENCE = "<name>"` with a name from
`AUDIENCES`; modules and data files directly in `grader/` (the pytest plugin and the test plumbing) serve
students. Two questions are answered from that alone:
- `shipped`: may the handout carry it? (it ships only what the public suite and the student tools reach);
- `graded`: does the checking run use it? Editing such a file regrades the class (the resume key covers
  it); editing anything else (a report template, the handout builder) keeps every existing grade.
Moving a file into another folder is therefore all it takes to change who it serves.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Audience:
    shipped: bool   # the handout may carry it
    graded: bool    # the checking run uses it, so a change to it regrades


AUDIENCES = {
    "students": Audience(shipped=True, graded=True),    # plugin, test plumbing, references
    "checker": Audience(shipped=False, graded=True),    # used only when grading: the hidden scenarios
    "tools": Audience(shipped=True, graded=False),      # student-side tools the checking run never uses
    "staff": Audience(shipped=False, graded=False),     # runner, reports, handout builder
}
TOP_LEVEL = "students"


def declared_audience(package_dir: Path) -> str:
    """The `AUDIENCE` a subpackage's `__init__.py` assigns (read, not imported: no side effects)."""
    init = package_dir / "__init__.py"
    if not init.is_file():
        raise LookupError(f"{package_dir} is not a package: data folders belong to the package holding them")
    for node in ast.parse(init.read_text(), filename=str(init)).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["AUDIENCE"]:
            name = ast.literal_eval(node.value)
            if name not in AUDIENCES:
                raise LookupError(f"{init}: AUDIENCE = {name!r} is not one of {sorted(AUDIENCES)}")
            return name
    raise LookupError(f"{init} does not say whom it serves: add AUDIENCE = one of {sorted(AUDIENCES)}")


def audience_of(relative: str | Path, package_dir: Path = PACKAGE_DIR) -> str:
    """Audience of a file given relative to `grader/` (`grade/runner.py`, `points/softmax.toml`).

    The first folder under `grader/` decides; folders that are not packages (`points/`) are data of the
    top level, and a package's data (`report/templates/`) is its package's.
    """
    parts = Path(relative).parts
    if len(parts) > 1 and (package_dir / parts[0] / "__init__.py").is_file():
        return declared_audience(package_dir / parts[0])
    return TOP_LEVEL


def module_audience(module: str, package_dir: Path = PACKAGE_DIR) -> str:
    """Audience of a dotted module name under `grader` (`grader.grade.runner`)."""
    parts = module.split(".")[1:]
    return audience_of(Path(*parts, "x.py") if parts else "x.py", package_dir)


def is_graded(relative: str | Path, package_dir: Path = PACKAGE_DIR) -> bool:
    return AUDIENCES[audience_of(relative, package_dir)].graded


def is_shipped_module(module: str, package_dir: Path = PACKAGE_DIR) -> bool:
    return AUDIENCES[module_audience(module, package_dir)].shipped
