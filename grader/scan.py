"""Static scan: does a function, or anything it reaches in its module, use a forbidden PyTorch op?

The worker's guards (grader.guards) see what student code does at run time, but they run where the
student's code runs, so they are claims; autograd's backward may even run on a thread the guard does
not watch. This scan reads the submitted source in the checker (reading is not executing) and backs
them: a forbidden op reachable from the entry point fails the check with its line number.

Reachable means: the entry functions and classes, every module-level function, class, assignment or
import their bodies name, and so on. Inside `@triton.jit` kernels only `@` and PyTorch names count
(Triton's own `tl.dot`, `tl.sum` are the point of the exercise).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

TRITON_NAMES = {"tl", "triton"}
DYNAMIC = {"eval", "exec", "__import__", "import_module"}  # getattr(torch, "matmul") is caught by its string


@dataclass(frozen=True)
class Finding:
    line: int
    function: str
    what: str

    def __str__(self) -> str:
        return f"line {self.line} in {self.function}: {self.what}"


def forbidden_calls(source: str, entries: list[str], ops: tuple[str, ...],
                    method_ops: tuple[str, ...] = ()) -> list[Finding]:
    """Findings for every forbidden op reachable from `entries` (function or class names).

    `ops` are refused however they are named (`torch.matmul`, `x.matmul`, `from torch import matmul`,
    the string "matmul"); `method_ops` only as attributes (`torch.exp`, `x.sum()`), since the same
    names are Python builtins too (`max`, `sum`).
    """
    definitions = _module_definitions(ast.parse(source))
    rules = (set(ops), {op for op in method_ops if not op.startswith("__")})
    findings, seen, todo = set(), set(), list(entries)
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        node = definitions[name]
        findings |= _findings_in(node, name, *rules)
        todo += [used for used in _names_used(node) if used in definitions]
    return sorted(findings, key=lambda f: (f.line, f.what))


def _module_definitions(tree) -> dict[str, ast.AST]:
    """Module-level names and what binds them: defs, classes, assignments, imports."""
    definitions = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        definitions[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                definitions[(alias.asname or alias.name).split(".")[0]] = node
    return definitions


def _names_used(node) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def _findings_in(node, name, ops, method_ops) -> set[Finding]:
    findings = set()
    in_kernel = _is_triton_jit(node)
    if isinstance(node, ast.ImportFrom) and not _is_triton_module(node.module):
        findings |= {Finding(node.lineno, name, f"imports {alias.name} from {node.module}")
                     for alias in node.names if alias.name in ops}
    for child in ast.walk(node):
        if isinstance(child, ast.BinOp) and isinstance(child.op, ast.MatMult) and not in_kernel \
                and "matmul" in ops:
            findings.add(Finding(child.lineno, name, "the @ operator (a PyTorch matmul)"))
        elif isinstance(child, ast.Attribute) and _root_name(child) not in TRITON_NAMES:
            if child.attr in ops or (child.attr in method_ops and not in_kernel):
                findings.add(Finding(child.lineno, name, f"uses .{child.attr}"))
        elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) \
                and (child.func.id in ops or child.func.id in DYNAMIC):
            findings.add(Finding(child.lineno, name, f"a call to {child.func.id}()"))
        elif isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value in ops:
            findings.add(Finding(child.lineno, name, f"the string {child.value!r} (a dynamic lookup?)"))
    return findings


def _root_name(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_triton_module(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] == "triton"


def _is_triton_jit(node) -> bool:
    for decorator in getattr(node, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _root_name(target) in TRITON_NAMES or getattr(target, "id", None) == "_jit":
            return True
    return False
