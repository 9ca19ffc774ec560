"""What the student's modules may import: torch, triton, numpy, einops and Python's standard library.

Anything else is refused the same way on a laptop and when graded, and costs only what cannot run
without it:
- an import guarded by `try: ... except ImportError` raises `ImportNotAllowed` (a ModuleNotFoundError),
  so the module's own fallback runs;
- any other import binds a placeholder: annotations that name it (`Float[Tensor, "b n"]`, `X | None`)
  cost nothing, and using it (a call, a base class, a truth test) raises `ImportNotAllowed` naming the
  package and the list. So a module that imports jaxtyping for its annotations is graded in full, and
  one that calls a missing library loses only the functions that call it.
The hook judges only imports made by the student's package (`__import__` sees the importer's globals):
torch's own imports of its dependencies are untouched. `refused_imports` finds the same imports from
the source text, for the summary that names them.
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
from pathlib import Path

ALLOWED_PACKAGES = ("torch", "triton", "numpy", "einops")
ALLOWED_TEXT = "torch, triton, numpy, einops and Python's standard library"
_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_installed: dict[str, object] = {}


class ImportNotAllowed(ModuleNotFoundError):
    """A package outside the allowed list was imported or used."""


def message(package: str, use: str = "") -> str:
    used = f" (your code uses {use})" if use else ""
    return (f"{package} cannot be imported here{used}: the assignment's code may import only {ALLOWED_TEXT}, "
            f"as when it is graded; remove the import or write what you need from it yourself")


def is_allowed(name: str, own_packages=()) -> bool:
    top = name.partition(".")[0]
    return top in ALLOWED_PACKAGES or top in sys.stdlib_module_names or top in own_packages or top == "__future__"


class MissingPackage:
    """Stands for a refused package: fine in annotations, an ImportNotAllowed as soon as it is used."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return MissingPackage(f"{self._name}.{attr}")

    def __getitem__(self, key):
        return self

    def __or__(self, other):
        return self

    __ror__ = __or__

    def _refuse(self, use):
        raise ImportNotAllowed(message(self._name.partition(".")[0], use))

    def __call__(self, *args, **kwargs):
        self._refuse(f"{self._name}(...)")

    def __mro_entries__(self, bases):
        self._refuse(f"class ...({self._name})")

    def __bool__(self):
        self._refuse(f"the truth of {self._name}")

    def __iter__(self):
        self._refuse(f"iteration over {self._name}")

    def __repr__(self) -> str:
        return f"<{self._name}: not importable here>"


def install(package: str) -> None:
    """Judge every import made by the modules of `package` (idempotent)."""
    if package in _installed:
        return
    original = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        importer = (globals or {}).get("__name__") or ""
        if level == 0 and (importer == package or importer.startswith(package + ".")) \
                and not is_allowed(name, _installed):
            caller = sys._getframe(1)
            if caller.f_lineno in _guarded_lines(caller.f_code.co_filename):
                raise ImportNotAllowed(message(name.partition(".")[0]), name=name)
            return MissingPackage(name if fromlist else name.partition(".")[0])
        return original(name, globals, locals, fromlist, level)

    _installed[package] = guarded_import
    builtins.__import__ = guarded_import


@functools.lru_cache(maxsize=32)
def _guarded_lines(path: str) -> frozenset[int]:
    """Lines of import statements inside a `try` whose handlers catch an ImportError."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(handler) for handler in node.handlers):
            for statement in node.body:
                for inner in ast.walk(statement):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return frozenset(lines)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(name).rpartition(".")[2] in _GUARDS for name in names)


def refused_imports(source: str | None, own_packages=()) -> list[str]:
    """The top-level packages `source` imports that are not allowed, in order of first import."""
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
        found += [name.partition(".")[0] for name in names if not is_allowed(name, own_packages)]
    return list(dict.fromkeys(found))
