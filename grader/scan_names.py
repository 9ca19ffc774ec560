"""What the names of a submitted module are bound to, read from its source, so that the scan judges
what a name is and not what it is called (grader.scan).

- `graded_tree` drops the code that never runs when the module is graded: the body of
  `if __name__ == "__main__":` (the worker imports the module under its package name; a module that
  rebinds `__name__`, or imports what can run a source as `__main__` (runpy, pdb, ...), keeps the
  block), and the `except ImportError:` fallback of a `try` that only imports what the grading
  environment has.
- `Names` collects every binding of every name, in every scope: `torch_paths("F")` is what a PyTorch,
  NumPy or einops import bound it to (`torch.nn.functional`); `is_safe_root("tl")` holds only when every
  binding of `tl` is an import of Triton (or `math` of math), so `tl = torch` or `import torch as math`
  does not make a safe root; `defined_here` names bound by the submission's own code.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass, field

JUDGED_MODULES = ("torch", "numpy", "einops")   # their functions compute on tensors
ENVIRONMENT = ("torch", "triton", "numpy", "einops")  # besides the standard library
# What can run a source file or string under a chosen __name__ (`runpy.run_path(__file__, run_name=...)`).
MAIN_RUNNERS = {"runpy", "pdb", "bdb", "code", "codeop", "doctest", "timeit", "profile", "cProfile", "trace",
                "imp", "pkgutil", "zipimport", "importlib"}


def graded_tree(tree: ast.Module) -> ast.Module:
    """The module without the code that cannot run when it is graded."""
    live = list(_outside_main_blocks(tree))
    return _DeadCode(keep_main=_rebinds_dunder_name(live) or _imports_a_main_runner(live)).visit(tree)


def _outside_main_blocks(tree):
    """Every node but those of `if __name__ == "__main__":` branches."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        branch = _main_guard(node.test) if isinstance(node, ast.If) else None
        if branch is None:
            stack.extend(ast.iter_child_nodes(node))
        else:
            stack.extend([node.test, *(node.orelse if branch == "body" else node.body)])


def _imports_a_main_runner(nodes) -> bool:
    for node in nodes:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in MAIN_RUNNERS for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in MAIN_RUNNERS:
            return True
    return False


class _DeadCode(ast.NodeTransformer):
    def __init__(self, keep_main: bool):
        self.keep_main = keep_main

    def visit_If(self, node: ast.If):
        branch = None if self.keep_main else _main_guard(node.test)
        if branch is None:
            return self.generic_visit(node)
        live = node.orelse if branch == "body" else node.body   # the branch that runs on import
        return [self.visit(statement) for statement in live] or ast.Pass()

    def visit_Try(self, node: ast.Try):
        if node.handlers and _cannot_raise(node.body):
            return [self.visit(statement) for statement in [*node.body, *node.orelse, *node.finalbody]]
        return self.generic_visit(node)


def _main_guard(test) -> str | None:
    """"body" for `__name__ == "__main__"`, "orelse" for `!=`, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    if not (names and mains):
        return None
    return "body" if isinstance(test.ops[0], ast.Eq) else "orelse"


def _rebinds_dunder_name(nodes) -> bool:
    return "__name__" in _binding_names(nodes)


def _binding_names(nodes) -> set[str]:
    names = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _cannot_raise(statements) -> bool:
    """Only imports of what the grading environment has, and constants: the handlers are dead code."""
    for statement in statements:
        if isinstance(statement, ast.Import):
            if not all(_importable(alias.name) for alias in statement.names):
                return False
        elif isinstance(statement, ast.ImportFrom):
            if statement.level or not all(_importable_from(statement.module or "", a.name) for a in statement.names):
                return False
        elif isinstance(statement, ast.Assign):
            constant = isinstance(statement.value, ast.Constant)
            if not (constant and all(isinstance(t, ast.Name) for t in statement.targets)):
                return False
        elif not isinstance(statement, ast.Pass) and not (isinstance(statement, ast.Expr)
                                                            and isinstance(statement.value, ast.Constant)):
            return False
    return True


def _importable(module: str) -> bool:
    if module.split(".")[0] not in (*ENVIRONMENT, *sys.stdlib_module_names):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:  # noqa: BLE001 - whatever the import does, the fallback may run
        return False


def _importable_from(module: str, name: str) -> bool:
    """`from module import name` works: only judged for the environment's packages, which the checker has."""
    if module.split(".")[0] not in ENVIRONMENT or name == "*":
        return False
    try:
        return hasattr(importlib.import_module(module), name) or \
            importlib.util.find_spec(f"{module}.{name}") is not None
    except Exception:  # noqa: BLE001 - whatever the import does, the fallback may run
        return False


@dataclass
class _Bindings:
    imports: list[str] = field(default_factory=list)   # dotted module (or module.member) each import bound
    others: int = 0                                     # definitions, assignments, parameters, loop targets...


class Names:
    """Every binding of every name of one module (all scopes: a parameter named `tl` counts)."""

    def __init__(self, tree: ast.Module):
        self._bindings: dict[str, _Bindings] = {}
        self.star_imports: list[str] = []     # modules imported with `from m import *`
        for node in ast.walk(tree):
            self._collect(node)

    def _collect(self, node) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                self._binding(bound).imports.append(alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    self.star_imports.append(module)
                else:
                    self._binding(alias.asname or alias.name).imports.append(f"{module}.{alias.name}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            self._binding(node.id).others += 1
        elif isinstance(node, ast.arg):
            self._binding(node.arg).others += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._binding(node.name).others += 1
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._binding(node.name).others += 1
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            self._binding(node.name).others += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._binding(node.rest).others += 1

    def _binding(self, name: str) -> _Bindings:
        return self._bindings.setdefault(name, _Bindings())

    def torch_paths(self, name: str) -> list[str]:
        """What PyTorch, NumPy or einops imports bound `name` to; with a star import of one, an unbound
        name is that module's own (`from torch import *` then `addbmm(...)`)."""
        bindings = self._bindings.get(name)
        paths = [path for path in (bindings.imports if bindings else []) if _judged(path)]
        if bindings is None:
            paths += [f"{module}.{name}" for module in self.star_imports if _judged(module) and _exports(module, name)]
        return paths

    def import_paths(self, name: str) -> list[str]:
        """What imports bound `name` to, when nothing else binds it."""
        bindings = self._bindings.get(name)
        return list(bindings.imports) if bindings and not bindings.others else []

    def is_safe_root(self, name: str, family: str | None = None) -> bool:
        """Every binding of `name` is an import of triton (or math): attributes of it run no PyTorch."""
        bindings = self._bindings.get(name)
        if bindings is None or bindings.others or not bindings.imports:
            return False
        families = {_family(path) for path in bindings.imports}
        return len(families) == 1 and None not in families and (family is None or families == {family})

    def defined_here(self, name: str) -> bool:
        """Bound by the submission's own code or imports, and by nothing PyTorch's."""
        bindings = self._bindings.get(name)
        return bindings is not None and not any(_judged(path) for path in bindings.imports)

    def sibling_module(self, name: str) -> bool:
        """Bound only by imports of the submission's own modules (`from . import matmul as mm`)."""
        bindings = self._bindings.get(name)
        return (bindings is not None and not bindings.others and bool(bindings.imports)
                and all(path.startswith(".") or path.split(".")[0] == "assignment" for path in bindings.imports))


def _exports(module: str, name: str) -> bool:
    """Does `from module import *` bind `name`?"""
    try:
        imported = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - the import fails in the worker too
        return False
    public = getattr(imported, "__all__", None)
    return name in public if public is not None else hasattr(imported, name) and not name.startswith("_")


def _judged(path: str) -> bool:
    return path.split(".")[0] in JUDGED_MODULES


def _family(path: str) -> str | None:
    top = path.split(".")[0]
    if top == "math":
        return "math" if path == "math" else None        # `from math import tau` binds a float, fine
    return "triton" if top == "triton" else None
