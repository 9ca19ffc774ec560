"""Which files of a submission count: the one rule that intake, the local checks and `make submission` share.

What counts, in a folder of code (`assignment/` locally, the staged tree when grading):
- the five module files, `<module>.py`;
- helper modules: any other `<name>.py` beside them, `name` a Python identifier that is not a module
  Python or the harness imports itself (`utils.py`, `attention_common.py`), imported from the modules
  as `from .utils import f` or `from assignment.utils import f`. The static scan follows such imports
  like those between the five modules (grader/scan.py); at most MAX_HELPERS of them.
Anything else (subfolders, `__init__.py`, test files, data files) is left out, with its reason, and an
import of it fails with MISSING_IMPORT wherever the code runs (grader.worker.modules).

Intake (`count(..., anywhere=True)`) also rescues what students hand in: the five files are found at
any depth of a submission. A name found once is taken wherever it is; found more than once, the copy in
the usual place wins (`assignment/`, then the top, then under one wrapper folder); copies that tie are
all refused and named as candidates. Helpers are the other `.py` files in the folders the module files
came from. A near-miss name (`Matmul.py`, `softmax.py.txt`, `flash-attention.py`) gets "did you mean".

This module only reads names (and `count_folder` lists a folder); nothing here imports or runs code.
"""

from __future__ import annotations

import io
import re
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MODULES = ("accounting", "mixed_precision", "softmax", "matmul", "flash_attention")
PACKAGE = "assignment"          # what the modules import each other and their helpers as
MAX_HELPERS = 16
# Names a helper may not take: what Python, the tests or the harness import under that name, and files
# with a meaning of their own to Python or pytest.
RESERVED = {*getattr(sys, "stdlib_module_names", ()), "torch", "triton", "numpy", "pytest", "grader", "einops",
            "jinja2", "click", "assignment", "solutions", "conftest", "sitecustomize", "usercustomize", "setup",
            "tests_public", "tests_hidden", *MODULES}
# Where a duplicated module file is looked for first (None: any one wrapper folder).
USUAL_PLACES = ((PACKAGE,), (), (None, PACKAGE), (None,))
MISSING_IMPORT = ("No module named {name!r}: it is not part of the submission. Only the five module files and "
                  "helper modules beside them (.py files directly in assignment/, such as utils.py) are graded; "
                  "a subfolder is not (WRITEUP.md, Handing in)")
_NOT_MINE = ("__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints")


@dataclass
class Counted:
    """What counts in one submission: module -> relative path, helper -> relative path; the rest left out."""

    modules: dict[str, str] = field(default_factory=dict)
    helpers: dict[str, str] = field(default_factory=dict)
    left_out: list[tuple[str, str]] = field(default_factory=list)     # (relative path, reason)
    candidates: dict[str, list[str]] = field(default_factory=dict)    # module -> tied copies (none taken)
    near_misses: dict[str, list[str]] = field(default_factory=dict)   # module -> files probably meant as it

    @property
    def missing(self) -> list[str]:
        return [module for module in MODULES if module not in self.modules]

    def missing_reasons(self) -> dict[str, str]:
        """module -> why it was not found, for the modules that have a reason beyond "not submitted"."""
        reasons = {}
        for module in self.missing:
            if module in self.candidates:
                reasons[module] = (f"{module}.py is there {len(self.candidates[module])} times "
                                   f"({', '.join(self.candidates[module])}): keep exactly one")
            elif module in self.near_misses:
                reasons[module] = f"did you mean {module}.py? found {', '.join(self.near_misses[module])}"
        return reasons

    def folders(self) -> list[str]:
        """The folders the module files came from ("" for the top of the submission)."""
        return sorted({_folder(path) for path in self.modules.values()})

    def counted_paths(self) -> list[str]:
        return sorted([*self.modules.values(), *self.helpers.values()])


def count(paths, anywhere: bool = True) -> Counted:
    """Which of `paths` (relative POSIX paths of a submission's files) count. `anywhere`: intake's rescue,
    module files at any depth; otherwise (a local `assignment/`) only directly in the folder."""
    paths = sorted(dict.fromkeys(paths))
    counted = Counted()
    by_module: dict[str, list[str]] = {}
    for path in paths:
        name = PurePosixPath(path).name
        if name.endswith(".py") and name[:-3] in MODULES and (anywhere or "/" not in path):
            by_module.setdefault(name[:-3], []).append(path)
    for module, found in by_module.items():
        chosen = _preferred(found)
        if chosen is None:
            counted.candidates[module] = found
        else:
            counted.modules[module] = chosen
    helpers, refused = _helpers(paths, counted)
    reasons = {}
    for path in paths:
        name = PurePosixPath(path).name
        stem = name[:-3] if name.endswith(".py") else ""
        if path in counted.modules.values() or path in helpers.values():
            continue
        if stem in MODULES and path in counted.candidates.get(stem, []):
            reasons[path] = f"one of {len(counted.candidates[stem])} copies of {name}: keep exactly one"
        elif stem in MODULES and stem in counted.modules:
            reasons[path] = f"duplicate of {counted.modules[stem]}"
        elif stem in MODULES:
            reasons[path] = f"module files must sit directly in {PACKAGE}/"
        elif (meant := near_miss(name)) is not None and not _not_mine(path):
            counted.near_misses.setdefault(meant, []).append(path)
            reasons[path] = f"did you mean {meant}.py?"
        else:
            reasons[path] = refused.get(path) or _other_reason(path, counted)
    counted.helpers = helpers
    counted.left_out = [(path, reasons[path]) for path in paths if path in reasons]
    return counted


def count_folder(folder: Path) -> Counted:
    """`count` for a folder on disk, read as the import system sees it: only its own files count."""
    folder = Path(folder)
    paths, links = [], []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if _not_mine(relative) or path.suffix == ".pyc":
            continue
        if path.is_symlink():
            links.append((relative, "a symbolic link: intake never follows one"))
        elif path.is_file():
            paths.append(relative)
    counted = count(paths, anywhere=False)
    counted.left_out += links
    return counted


def near_miss(filename: str) -> str | None:
    """The module a file name was probably meant to be (`Matmul.py`, `softmax.py.txt`, `flash-attention.py`,
    `softmax (1).py`), or None. An exact module file name is not a near miss."""
    if filename.endswith(".py") and filename[:-3] in MODULES:
        return None
    stem = filename.lower()
    while (trimmed := re.sub(r"\.(py|txt|bak|orig|ipynb)$", "", stem)) != stem:
        stem = trimmed
    stem = re.sub(r"\s*\(\d+\)$|[ _-]copy$", "", stem)
    squeezed = re.sub(r"[\s._-]+", "", stem)
    for module in MODULES:
        if squeezed == module.replace("_", ""):
            return module
    return None


def helper_problem(name: str) -> str | None:
    """Why a `.py` file beside the modules is not a helper module, or None when it is one."""
    stem = name[:-3] if name.endswith(".py") else None
    if stem is None:
        return "not a Python file"
    if stem == "__init__":
        return "the package's __init__.py: grading writes an empty one, so keep code in the modules"
    if not stem.isidentifier() or stem.startswith("__"):
        return "not importable as a module name"
    if stem.startswith("test_") or stem.endswith("_test"):
        return "a test file: your own tests are not graded"
    if stem in RESERVED:
        return f"a helper may not be named like the module {stem!r} that Python or the tests import"
    return None


def _preferred(found: list[str]) -> str | None:
    """The one copy to take: the only one, or the single one in the most usual place; None for a tie."""
    if len(found) == 1:
        return found[0]
    ranked = sorted((_place_rank(path), path) for path in found)
    if ranked[0][0] < len(USUAL_PLACES) and ranked[0][0] != ranked[1][0]:
        return ranked[0][1]
    return None


def _place_rank(path: str) -> int:
    folders = PurePosixPath(path).parts[:-1]
    for rank, place in enumerate(USUAL_PLACES):
        if len(place) == len(folders) and all(want in (None, got) for want, got in zip(place, folders)):
            return rank
    return len(USUAL_PLACES)


def _helpers(paths: list[str], counted: Counted) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> path of the helper modules, path -> why a would-be helper is not one): the importable
    `.py` files in the module files' folders, one of each name, at most MAX_HELPERS."""
    homes = set(counted.folders())
    found: dict[str, list[str]] = {}
    refused: dict[str, str] = {}
    for path in paths:
        name = PurePosixPath(path).name
        if _folder(path) not in homes or name[:-3] in MODULES or near_miss(name) is not None:
            continue
        problem = helper_problem(name)
        if problem is None:
            found.setdefault(name[:-3], []).append(path)
        elif problem != "not a Python file":
            refused[path] = f"not graded: {problem}"
    helpers = {}
    for name, places in sorted(found.items()):
        if len(places) > 1:
            refused.update({path: f"not graded: helper modules named {name}.py in {len(places)} folders"
                            for path in places})
        elif len(helpers) == MAX_HELPERS:
            refused[places[0]] = f"not graded: more than {MAX_HELPERS} helper modules"
        else:
            helpers[name] = places[0]
    return helpers, refused


def _other_reason(path: str, counted: Counted) -> str:
    below = any(_folder(path).startswith(f"{home}/" if home else "") for home in counted.folders())
    if path.endswith(".py") and below and not _not_mine(path):
        return "not graded: in a subfolder; helper modules sit directly beside the module files"
    return "not an assignment module file"


def _folder(path: str) -> str:
    parent = PurePosixPath(path).parent.as_posix()
    return "" if parent == "." else parent


def _not_mine(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return any(part in _NOT_MINE for part in parts) or PurePosixPath(path).name.startswith("._")


def copy_counted(folder: Path, dest: Path) -> Counted:
    """Copy what counts of the code folder `folder` to `dest/assignment/`, beside an empty `__init__.py`,
    as intake stages a submission: what a graded run (and `--isolate`) imports, and nothing else."""
    counted = count_folder(folder)
    target = Path(dest) / PACKAGE
    target.mkdir(parents=True, exist_ok=True)
    (target / "__init__.py").write_text("")
    for name, path in [*counted.modules.items(), *counted.helpers.items()]:
        (target / f"{name}.py").write_bytes((Path(folder) / path).read_bytes())
    return counted


def importable(folder: Path) -> set[str]:
    """The names `assignment.<name>` may import from the code folder `folder`: modules and helpers."""
    counted = count_folder(folder)
    return {*counted.modules, *counted.helpers}


def is_staged(folder: Path) -> bool:
    """True when `folder` holds only what counts (and an empty `__init__.py`): staging it again would copy
    it unchanged, as for the tree intake staged for a graded run."""
    counted = count_folder(folder)
    init = Path(folder) / "__init__.py"
    left = [path for path, _ in counted.left_out if not (path == "__init__.py" and init.stat().st_size == 0)]
    return not left


def pack(folder: Path, archive: Path) -> Counted:
    """`make submission`: a .tar.gz of what counts in the code folder `folder`, as `assignment/<file>`."""
    counted = count_folder(folder)
    now = int(time.time())
    with tarfile.open(archive, "w:gz") as tar:
        for path in counted.counted_paths():
            data = (Path(folder) / path).read_bytes()
            info = tarfile.TarInfo(f"{PACKAGE}/{path}")
            info.size, info.mtime, info.mode = len(data), now, 0o644
            tar.addfile(info, io.BytesIO(data))
    return counted


def main(argv: list[str] | None = None) -> int:
    """`python -m grader.submission_files [FOLDER [ARCHIVE]]`: pack, then say what is in it and what is not."""
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0] if argv else PACKAGE)
    archive = Path(argv[1] if len(argv) > 1 else "submission.tar.gz")
    if not folder.is_dir():
        print(f"{folder}/ is not a folder: run this next to your assignment/", file=sys.stderr)
        return 2
    counted = pack(folder, archive)
    print(f"wrote {archive}:")
    for name, path in [*counted.modules.items(), *counted.helpers.items()]:
        print(f"  {PACKAGE}/{path}" + ("" if name in MODULES else "   (helper module)"))
    if counted.missing:
        print("missing (their checks score zero): " + ", ".join(f"{module}.py" for module in counted.missing))
    skipped = [(path, reason) for path, reason in counted.left_out if path.endswith(".py") and path != "__init__.py"]
    if skipped:
        print("left out, NOT graded:")
        for path, reason in skipped:
            print(f"  {PACKAGE}/{path}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
