"""What the static scan (grader.scan) counts as a forbidden op in one unit of code it reaches.

Two rules, by what the check asks for:
- the named ops (`ops`: softmax, matmul, ...) are refused however they are named, and `method_ops` as
  attributes outside kernels;
- where a Triton kernel is required (`wrapper_only`), the Python around it may use only what
  grader.wrapper_ops allows: a PyTorch, NumPy or einops name outside that list (`torch.addbmm`,
  `torch.linalg.multi_dot`, `torch.ops.aten.mm`), a tensor method outside it (`out.addmm_`, `x.sum`),
  the `@` operator, or the torch module itself passed around as a value, is a finding.

Names are resolved first (grader.scan_names): `math.softmax` is torch's when `math` is `import torch as
math`, a student's own `softmax` function is theirs, attributes of a real `import triton.language as tl`
are Triton's. A receiver the scan cannot type (`x.addmm_`) is judged by the attribute's name: one that
only PyTorch tensors have. Code run at import cannot see the inputs, so what it calls there is judged
by the named ops only; what it keeps (stores, passes, binds) is judged as the entry's own code, since an
entry may call it later. Kernels (`@triton.jit`) are Triton's: there only PyTorch names count.
"""

from __future__ import annotations

import ast
import importlib
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch

from grader import wrapper_ops
from grader.scan_names import Names

TENSOR_ATTRIBUTES = frozenset(dir(torch.Tensor)) - frozenset(dir(object))
# Tensor method names that Python's containers have too (`seen.add(k)`, `d.values()`): the run-time
# guard judges these on tensors; the scan cannot tell the receiver.
PYTHON_METHODS = frozenset({"add", "index", "sort", "values"})
WRAPPER_HINT = "around a required Triton kernel only allocation, layout, queries and launches are allowed"


@dataclass(frozen=True)
class Rules:
    ops: frozenset[str]
    method_ops: frozenset[str]
    wrapper_only: bool


@dataclass(frozen=True)
class Place:
    """Where a unit of code sits: its module's names, its classes' members, its class if any, and how
    to tell a kernel (`@triton.jit`, also nested in a function)."""
    names: Names
    members: dict[str, set[str]]      # module-level class -> its methods and class attributes
    self_name: str | None = None
    owner: str | None = None
    is_kernel: Callable[[ast.AST], bool] = lambda node: False


def findings_in(nodes, rules: Rules, place: Place, *, in_kernel: bool, import_time: bool = False):
    """(line, what) for every forbidden use in `nodes`."""
    found = set()
    for node in nodes:
        parents = {id(child): parent for parent in ast.walk(node) for child in ast.iter_child_nodes(parent)}
        skipped = _annotation_nodes(node)
        if isinstance(node, ast.ImportFrom):
            found |= _imports(node, rules, in_kernel, import_time)
        for child, kernel in _walk(node, in_kernel, place):
            if id(child) in skipped:
                continue
            what = _judge_node(child, parents, rules, place, kernel, import_time)
            if what:
                found.add((child.lineno, what))
    return found


def _walk(node, in_kernel: bool, place: Place):
    """(node, inside a kernel?) for `node` and everything in it: a kernel defined inside a function is one."""
    stack = [(node, in_kernel)]
    while stack:
        child, kernel = stack.pop()
        yield child, kernel
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child is not node:
            kernel = kernel or place.is_kernel(child)
        stack.extend((grandchild, kernel) for grandchild in ast.iter_child_nodes(child))


def _judge_node(child, parents, rules: Rules, place: Place, in_kernel: bool, import_time: bool) -> str | None:
    matmul = isinstance(child, (ast.BinOp, ast.AugAssign)) and isinstance(child.op, ast.MatMult)
    if matmul and not in_kernel and ("matmul" in rules.ops or (rules.wrapper_only and not import_time)):
        return "the @ operator (a PyTorch matmul)"
    if isinstance(child, ast.Attribute):
        return _judge_attribute(child, parents, rules, place, in_kernel, import_time)
    if _literal_getattr(child, place.names):
        return _judge_member(child.args[1].value, rules, in_kernel, kept=True)
    if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
        return _judge_name(child, parents, rules, place, in_kernel, import_time)
    if isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value in rules.ops:
        return f"the string {child.value!r} (a dynamic lookup?)"
    return None


def _imports(node: ast.ImportFrom, rules: Rules, in_kernel: bool, import_time: bool):
    module = node.module or ""
    if node.level or module.split(".")[0] not in ("torch", "numpy", "einops"):
        return set()
    return {(node.lineno, f"imports {alias.name} from {module}") for alias in node.names
            if alias.name != "*" and not _is_module(module, alias.name)
            and _judge_path(f"{module}.{alias.name}", rules, in_kernel, kept=True)}


def _is_module(module: str, name: str) -> bool:
    """`from torch.nn import functional`: a module, judged where its functions are used."""
    try:
        return isinstance(getattr(importlib.import_module(module), name, None), types.ModuleType)
    except Exception:  # noqa: BLE001 - not importable here: judged as a name
        return False


def _judge_name(node: ast.Name, parents, rules, place: Place, in_kernel, import_time) -> str | None:
    """A bare name: a PyTorch function imported under it, called (`addbmm(...)`) or kept (`f = torch`)."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return None                                   # the root of a chain: judged with the chain
    called = isinstance(parent, ast.Call) and parent.func is node
    for path in place.names.torch_paths(node.id):
        what = _judge_path(path, rules, in_kernel, kept=not (called and import_time))
        if what and called:
            return f"a call to {node.id}() ({path}): {what}"
        if what:
            module = "." not in path or _is_module(*path.rsplit(".", 1))
            return f"passes the module {path} around ({WRAPPER_HINT})" if module else what
    return None


def _judge_attribute(node: ast.Attribute, parents, rules, place: Place, in_kernel, import_time) -> str | None:
    parent = parents.get(id(node))
    kept = not (import_time and isinstance(parent, ast.Call) and parent.func is node)
    chain = _dotted(node)
    if chain is None:
        if _non_tensor_result(node.value, place.names):
            return None
        return _judge_member(node.attr, rules, in_kernel, kept)
    root, parts = chain[0], chain[1:]
    paths = place.names.torch_paths(root)
    if paths:
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return None                               # judged whole, at the chain's last attribute
        for path in paths:
            full = ".".join([path, *parts])
            stored = isinstance(node.ctx, (ast.Store, ast.Del))   # what it stores is followed instead
            what = _judge_path(full, Rules(rules.ops, rules.method_ops, False) if stored else rules, in_kernel, kept)
            if what:
                return what
        return None
    if place.names.is_safe_root(root) or _student_member(root, parts[0], place) and len(parts) == 1:
        return None
    return _judge_member(node.attr, rules, in_kernel, kept)


def _judge_path(path: str, rules: Rules, in_kernel: bool, kept: bool) -> str | None:
    """A dotted PyTorch/NumPy/einops name (`torch.linalg.multi_dot`)."""
    parts = path.split(".")
    if parts[:2] == ["torch", "backends"]:
        return None                                   # settings (torch.backends.cuda.matmul.allow_tf32)
    named = [part for part in parts[1:] if part in rules.ops or (part in rules.method_ops and not in_kernel)]
    if named:
        return f"uses .{named[-1]}"
    if rules.wrapper_only and kept and not wrapper_ops.torch_path_allowed(path):
        return f"uses {path} ({WRAPPER_HINT})"
    return None


def _judge_member(attr: str, rules: Rules, in_kernel: bool, kept: bool) -> str | None:
    """An attribute of a receiver the scan cannot type, judged by its name."""
    if attr in rules.ops or (attr in rules.method_ops and not in_kernel):
        return f"uses .{attr}"
    if rules.wrapper_only and kept and not in_kernel and attr in TENSOR_ATTRIBUTES \
            and attr not in wrapper_ops.TENSOR_OPS and attr not in PYTHON_METHODS:
        return f"uses .{attr} (a PyTorch tensor op; {WRAPPER_HINT})"
    return None


def _literal_getattr(node, names: Names) -> bool:
    """`getattr(x, "addmm_")`: an attribute by another spelling."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and not names.defined_here("getattr") and len(node.args) >= 2 \
        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)


def _student_member(root: str, attr: str, place: Place) -> bool:
    """`Cls.method`, `self.method` or `sibling_module.name`: the submission's own code, followed by the scan."""
    if root in place.members and attr in place.members[root]:
        return True
    if place.owner and root == place.self_name and attr in place.members.get(place.owner, ()):
        return True
    return place.names.sibling_module(root)


def _non_tensor_result(node, names: Names) -> bool:
    """A call of a PyTorch function that returns no tensor: `torch.finfo(dtype).max` is a float."""
    if not isinstance(node, ast.Call):
        return False
    chain = _dotted(node.func)
    if chain is None:
        return False
    paths = [".".join([path, *chain[1:]]) for path in names.torch_paths(chain[0])]
    return bool(paths) and all(p in wrapper_ops.NON_TENSOR_RESULTS or p.startswith("torch.cuda.") for p in paths)


def _dotted(node) -> list[str] | None:
    """["torch", "linalg", "multi_dot"] for a chain of attributes down to a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _annotation_nodes(node) -> set[int]:
    """Annotations name types (`torch.Tensor`) and are never called: left out."""
    skipped = set()
    for child in ast.walk(node):
        annotations = []
        if isinstance(child, ast.arg):
            annotations.append(child.annotation)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations.append(child.returns)
        elif isinstance(child, ast.AnnAssign):
            annotations.append(child.annotation)
        for annotation in annotations:
            if annotation is not None:
                skipped |= {id(n) for n in ast.walk(annotation)}
    return skipped
