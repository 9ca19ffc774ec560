"""Static scan: does a function, or anything it calls in its module, use a forbidden PyTorch op?

The worker's guards (grader.guards) see what student code does at run time, but they run where the
student's code runs, so they are claims; autograd's backward may even run on a thread the guard does
not watch. This scan reads the submitted source in the checker (reading is not executing) and backs
them: a forbidden call reachable from the entry point fails the check with its line number.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

TRITON_NAMES = {"tl", "triton"}   # `tl.dot`, `tl.softmax` are Triton ops, not PyTorch ones
DYNAMIC = {"eval", "exec", "__import__", "import_module"}  # getattr(torch, "matmul") is caught by its string


@dataclass(frozen=True)
class Finding:
    line: int
    function: str
    what: str

    def __str__(self) -> str:
        return f"line {self.line} in {self.function}: {self.what}"


def forbidden_calls(source: str, entries: list[str], ops: tuple[str, ...]) -> list[Finding]:
    """Findings for every forbidden op reachable from `entries` (function or class names)."""
    tree = ast.parse(source)
    definitions = _module_definitions(tree)
    findings, seen, todo = [], set(), list(entries)
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        node = definitions[name]
        findings += _findings_in(node, name, set(ops))
        todo += [called for called in _called_names(node) if called in definitions]
    return sorted(findings, key=lambda f: f.line)


def _module_definitions(tree) -> dict[str, ast.AST]:
    return {node.name: node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _called_names(node) -> set[str]:
    """Names a definition refers to (calls, `X.apply`, passing a function along)."""
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def _findings_in(node, name, ops) -> list[Finding]:
    findings = []
    is_kernel = _is_triton_jit(node)
    for child in ast.walk(node):
        if isinstance(child, ast.BinOp) and isinstance(child.op, ast.MatMult) and not is_kernel \
                and "matmul" in ops:
            findings.append(Finding(child.lineno, name, "the @ operator (a PyTorch matmul)"))
        elif isinstance(child, ast.Call):
            what = _forbidden_callee(child.func, ops)
            if what:
                findings.append(Finding(child.lineno, name, what))
        elif isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value in ops:
            findings.append(Finding(child.lineno, name, f"the string {child.value!r} (a dynamic lookup?)"))
    return findings


def _forbidden_callee(func, ops) -> str | None:
    if isinstance(func, ast.Attribute):
        if _root_name(func) in TRITON_NAMES:
            return None
        if func.attr in ops:
            return f"a call to .{func.attr}()"
        if func.attr in DYNAMIC:
            return f"a dynamic call to {func.attr}()"
    elif isinstance(func, ast.Name) and (func.id in ops or func.id in DYNAMIC):
        return f"a call to {func.id}()"
    return None


def _root_name(node) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_triton_jit(node) -> bool:
    for decorator in getattr(node, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _root_name(target) in TRITON_NAMES or getattr(target, "id", None) == "_jit":
            return True
    return False
