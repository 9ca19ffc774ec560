"""Where an implementation's modules are and how they are imported: `resolve` finds them (the
`assignment` or `solutions` package of this repo, or a submission folder, flat or under
`assignment/`), `Modules` imports only the allow-listed names. For student code (the `assignment`
package) an import of `assignment.<name>` that is not a module or helper that counts
(grader.submission_files) fails with one message in every mode, so what runs locally is what is
graded. Used by the worker, by the in-process mode and by `grader bench`; it imports nothing of the
checker."""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from grader import submission_files

MODULES = submission_files.MODULES
REPO_ROOT = Path(__file__).resolve().parents[2]
SUBMISSION_PACKAGE = submission_files.PACKAGE   # a submission folder is imported under the name students use


class ModuleMissing(NotImplementedError):
    """The submission has no file for this module: counts as not implemented."""


@dataclass(frozen=True)
class ImplSpec:
    label: str            # what the user asked for, for reports
    package: str          # import name: "assignment", "solutions", or SUBMISSION_PACKAGE for a folder
    directory: str        # the folder holding <module>.py files

    @property
    def is_folder(self) -> bool:
        return self.package == SUBMISSION_PACKAGE and Path(self.directory) != REPO_ROOT / "assignment"


def resolve(name_or_path: str) -> ImplSpec:
    """Find the modules for `assignment`, `solutions`, or a submission folder (flat or assignment/)."""
    if name_or_path in ("assignment", "solutions"):
        return ImplSpec(name_or_path, name_or_path, str(REPO_ROOT / name_or_path))
    folder = Path(name_or_path).expanduser().resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"--impl {name_or_path!r}: not 'assignment', 'solutions' or a folder")
    if (folder / "assignment").is_dir():
        folder = folder / "assignment"
    if not any((folder / f"{module}.py").is_file() for module in MODULES):
        raise FileNotFoundError(f"--impl {name_or_path!r}: no module files ({', '.join(MODULES)}) "
                                "flat or under assignment/")
    return ImplSpec(name_or_path, SUBMISSION_PACKAGE, str(folder))


class Modules:
    """Imports the implementation's modules on first use; `modules.softmax` is the module."""

    def __init__(self, spec: ImplSpec):
        self.spec = spec
        self._package = None

    def load(self, name: str) -> types.ModuleType:
        if name not in MODULES:
            raise AttributeError(f"{name!r} is not one of the assignment modules {MODULES}")
        if not (Path(self.spec.directory) / f"{name}.py").is_file():
            raise ModuleMissing(f"{name}.py is missing from the submission")
        self._ensure_package()
        return importlib.import_module(f"{self.spec.package}.{name}")

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "spec":
            raise AttributeError(name)
        return self.load(name)

    def _ensure_package(self) -> None:
        if self._package is not None:
            return
        from grader.worker import allowed_imports

        allowed_imports.install(self.spec.package)   # before the first student line runs
        if self.spec.package == SUBMISSION_PACKAGE:
            OnlyWhatCounts.install(submission_files.importable(Path(self.spec.directory)))
        if self.spec.is_folder:
            # A fresh package object whose path is the submission folder, under the name students use.
            package = types.ModuleType(SUBMISSION_PACKAGE)
            package.__path__ = [self.spec.directory]
            package.__file__ = None
            sys.modules[SUBMISSION_PACKAGE] = package
            self._package = package
        else:
            if str(REPO_ROOT) not in sys.path:
                sys.path.insert(0, str(REPO_ROOT))
            self._package = importlib.import_module(self.spec.package)




class OnlyWhatCounts(importlib.abc.MetaPathFinder):
    """Refuses `assignment.<name>` for every name that is not a module or helper that counts: such a file
    is not staged when grading, so it must not work locally either."""

    def __init__(self, allowed: set[str]):
        self.allowed = set(allowed)

    @classmethod
    def install(cls, allowed: set[str]) -> None:
        sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, cls)]
        sys.meta_path.insert(0, cls(allowed))

    def find_spec(self, fullname, path=None, target=None):
        package, _, rest = fullname.partition(".")
        if package == SUBMISSION_PACKAGE and rest and rest.split(".")[0] not in self.allowed:
            raise ModuleNotFoundError(submission_files.MISSING_IMPORT.format(name=fullname), name=fullname)
        return None
