"""Static scan: does the code an entry point runs use a forbidden PyTorch op?

The worker's guards (grader.guards) see what student code does at run time, but they run where the
student's code runs, so they are claims; autograd's backward may even run on a thread the guard does
not watch. This scan reads the submitted source in the checker (reading is not executing) and backs
them: a forbidden op reachable from the entry point fails the check with its line number. The source
is the checker's own copy, taken before any student code ran (grader.sources), never the file the
worker can rewrite.

Reachable, per function: the entry, every module-level function, assignment or import its body names,
and so on. A class named bare counts whole; `Cls.method` (and `self.method` inside it) counts only that
method, and `Cls.apply` only `forward` (autograd runs `backward` later: a test of the backward names
the class itself). Definitions nested in `if`/`try`/`with`/loops count like top-level ones, and module
code that runs at import (calls, attribute stores, loop and `with` headers) is always read.

Dynamic lookups (`eval`, `getattr(torch, name)`, `operator.attrgetter`, `globals()[...]`, ...) cannot be
followed, so one anywhere in the module is a finding of its own. Inside `@triton.jit` kernels only `@`
and PyTorch names count (Triton's own `tl.dot`, `tl.sum` are the point of the exercise).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

SAFE_ROOTS = {"tl", "triton", "math"}   # attributes of these are not PyTorch ops
TORCH_MODULES = ("torch", "numpy")
CODE_RUNNERS = {"eval", "exec", "compile", "__import__", "globals", "locals", "__builtins__", "breakpoint"}
DYNAMIC_MODULES = {"importlib", "builtins"}   # (ctypes reaches no Python name: left to the guards)
NAME_GETTERS = {"attrgetter", "methodcaller", "import_module", "__getattribute__", "__getattr__"}
AUTOGRAD_APPLY = ("forward", "setup_context")
SUBMISSION_PACKAGE = "assignment"       # what a module imports its siblings as (grader.impl)


@dataclass(frozen=True)
class Finding:
    line: int
    function: str
    what: str

    def __str__(self) -> str:
        return f"line {self.line} in {self.function}: {self.what}"


def forbidden_calls(source: str, entries: list[str], ops: tuple[str, ...], method_ops: tuple[str, ...] = (),
                    siblings: dict[str, str] | None = None, module: str = "") -> list[Finding]:
    """Findings for every forbidden op reachable from `entries`, plus every dynamic lookup.

    Entries are module-level names (a function, or a class: all of it) or `Class.method`. `ops` are
    refused however they are named (`torch.matmul`, `x.matmul`, `from torch import matmul`, the string
    "matmul"); `method_ops` only as attributes (`torch.exp`, `x.sum()`), since the same names are
    Python builtins too (`max`, `sum`). `siblings` (module name -> source) are the submission's other
    modules: what the entry imports from them (`from .matmul import helper`) is followed there.
    """
    sources = {**(siblings or {}), module: source}
    rules = (set(ops), {op for op in method_ops if not op.startswith("__")})
    findings: set[Finding] = set()
    indexes: dict[str, _Index] = {}
    todo = [(module, list(entries))]
    while todo:
        name, wanted = todo.pop()
        if name not in indexes:
            try:
                tree = ast.parse(sources[name])
            except SyntaxError:
                if name == module:
                    raise
                continue                       # a sibling that does not parse fails on import anyway
            indexes[name] = _Index(tree)
            prefix = f"{name}.py " if name != module else ""
            findings |= {replace(f, function=prefix + f.function) for f in dynamic_lookups(tree, ops)}
            for label, nodes in indexes[name].import_time:
                findings |= _findings_in(nodes, prefix + label, *rules, in_kernel=False)
        index, prefix = indexes[name], (f"{name}.py " if name != module else "")
        for label, nodes, in_kernel in index.reachable(wanted):
            findings |= _findings_in(nodes, prefix + label, *rules, in_kernel=in_kernel)
        for sibling, member in index.take_sibling_imports():
            if sibling in sources:
                todo.append((sibling, [member] if member else _top_level_names(sources[sibling])))
    return sorted(findings, key=lambda f: (f.function.partition(" ")[0].endswith(".py"), f.line, f.what))


def _top_level_names(source: str) -> list[str]:
    try:
        index = _Index(ast.parse(source))
    except SyntaxError:
        return []
    return [*index.functions, *index.classes, *index.bindings]


# --- what is defined where ---------------------------------------------------------------------------


@dataclass
class _Class:
    node: ast.ClassDef
    methods: dict[str, list[ast.AST]] = field(default_factory=dict)
    shell: list[ast.AST] = field(default_factory=list)   # decorators, bases, class-level statements


class _Index:
    """Module-level definitions, found through every compound statement, and the code run at import."""

    def __init__(self, tree: ast.Module):
        self.functions: dict[str, list[ast.AST]] = {}
        self.classes: dict[str, list[_Class]] = {}
        self.bindings: dict[str, list[ast.AST]] = {}
        self.import_time: list[tuple[str, list[ast.AST]]] = []
        self._sibling_imports: list[tuple[str, str | None]] = []
        self._collect(tree.body)

    def take_sibling_imports(self) -> list[tuple[str, str | None]]:
        """(module, name or None for all of it) imported from the submission's other modules by the
        bindings reached since the last call."""
        taken, self._sibling_imports = self._sibling_imports, []
        return taken

    def _collect(self, statements) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, []).append(_class_of(node))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    self.bindings.setdefault((alias.asname or alias.name).split(".")[0], []).append(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                unpacked = [n.id for t in targets if isinstance(t, (ast.Tuple, ast.List))
                            for n in ast.walk(t) if isinstance(n, ast.Name)]
                for name in names + unpacked:
                    self.bindings.setdefault(name, []).append(node)
                # Stores into attributes or items, and calls, run at import whoever names the result.
                if len(names) + len(unpacked) < len(targets) or _has_call(node.value):
                    self.import_time.append(("module level", [node]))
            else:
                headers, bodies = _split_compound(node)
                if headers:
                    self.import_time.append(("module level", headers))
                    for header in headers:   # `for f in ...`, `with ... as f`, `except E as f` bind names
                        for name in ast.walk(header):
                            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                                self.bindings.setdefault(name.id, []).append(header)
                for body in bodies:
                    self._collect(body)

    def reachable(self, entries):
        """(label, nodes, in_kernel) for every unit of code the entries reach."""
        todo: list[tuple[str, str | None]] = []
        for entry in entries:
            owner, _, member = entry.partition(".")
            todo.append((owner, member or None))
        seen: set[tuple[str, str | None]] = set()
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            name, member = key
            for label, nodes, in_kernel, self_name, owner in self._units(name, member):
                yield label, nodes, in_kernel
                todo += _references(nodes, self, self_name, owner)

    def _units(self, name, member):
        for node in self.functions.get(name, []) if member is None else []:
            yield name, [node], _is_triton_jit(node), None, None
        for node in self.bindings.get(name, []) if member is None else []:
            self._sibling_imports += _sibling_import(node, name)
            yield name, [node], False, None, None
        for cls in self.classes.get(name, []):
            yield name, cls.shell, False, None, name
            wanted = _wanted_methods(cls, member, self)
            for method in wanted:
                for node in cls.methods.get(method, []):
                    yield f"{name}.{method}", [node], _is_triton_jit(node), _self_name(node), name


def _sibling_import(node, name: str) -> list[tuple[str, str | None]]:
    """What `name`, bound by this import, takes from another module of the submission."""
    found = []
    if isinstance(node, ast.ImportFrom):
        package = node.level > 0 or (node.module or "").split(".")[0] == SUBMISSION_PACKAGE
        parts = (node.module or "").split(".")
        inner = parts[1:] if not node.level and parts[0] == SUBMISSION_PACKAGE else [p for p in parts if p]
        for alias in node.names if package else []:
            if (alias.asname or alias.name) == name:
                found.append((inner[0], alias.name) if inner else (alias.name, None))
    elif isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == SUBMISSION_PACKAGE and len(parts) > 1 and (alias.asname or parts[0]) == name:
                found.append((parts[1], None))
    return found


def _class_of(node: ast.ClassDef) -> _Class:
    cls = _Class(node, shell=[*node.decorator_list, *node.bases, *node.keywords])

    def collect(statements):
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                cls.methods.setdefault(statement.name, []).append(statement)
            else:
                headers, bodies = _split_compound(statement)
                if bodies:
                    cls.shell.extend(headers)
                    for body in bodies:
                        collect(body)
                else:
                    cls.shell.append(statement)

    collect(node.body)
    return cls


def _wanted_methods(cls: _Class, member: str | None, index: _Index) -> list[str]:
    """The methods `Cls.member` can run; all of them for the bare class or an attribute we cannot tell."""
    if member is None:
        return list(cls.methods)
    if member == "apply":
        return [m for m in AUTOGRAD_APPLY if m in cls.methods] + (["apply"] if "apply" in cls.methods else [])
    if member in cls.methods:
        return [member]
    if _assigned_in(cls, member) or _inherits_from_module(cls, index):
        return []       # a class attribute (read in the shell) or a method of a base (the shell names it)
    return list(cls.methods)


def _assigned_in(cls: _Class, member: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == member and isinstance(n.ctx, ast.Store)
               for node in cls.shell for n in ast.walk(node))


def _inherits_from_module(cls: _Class, index: _Index) -> bool:
    return any(isinstance(base, ast.Name) and base.id in index.classes for base in cls.node.bases)


def _self_name(node) -> str | None:
    """The first parameter of a method that receives the instance or class (not a staticmethod's)."""
    if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list):
        return None
    params = node.args.posonlyargs + node.args.args
    return params[0].arg if params else None


def _split_compound(node) -> tuple[list[ast.AST], list[list[ast.stmt]]]:
    """(the parts of a compound statement that are not statements, its nested statement lists)."""
    bodies = [getattr(node, name) for name in ("body", "orelse", "finalbody")
              if isinstance(getattr(node, name, None), list)]
    bodies += [handler.body for handler in getattr(node, "handlers", [])]
    bodies += [case.body for case in getattr(node, "cases", [])]
    if not bodies:
        return [node], []
    nested = {id(statement) for body in bodies for statement in body}
    nested |= {id(handler) for handler in getattr(node, "handlers", [])}
    nested |= {id(case) for case in getattr(node, "cases", [])}
    headers = [child for child in ast.iter_child_nodes(node) if id(child) not in nested]
    headers += [part for handler in getattr(node, "handlers", []) for part in (handler.type,) if part]
    headers += [part for case in getattr(node, "cases", []) for part in (case.pattern, case.guard) if part]
    return headers, bodies


def _has_call(node) -> bool:
    return node is not None and any(isinstance(child, ast.Call) for child in ast.walk(node))


# --- what a unit of code refers to ---------------------------------------------------------------


def _references(nodes, index: _Index, self_name: str | None, owner: str | None):
    """(name, member) pairs the code refers to: `Cls.method` narrowed, other module names bare."""
    narrowed: set[int] = set()
    found = []
    for node in nodes:
        for child in ast.walk(node):
            if not isinstance(child, ast.Attribute):
                continue
            base = child.value
            if isinstance(base, ast.Name) and base.id in index.classes:
                found.append((base.id, child.attr))
                narrowed.add(id(base))
            elif owner and isinstance(base, ast.Name) and base.id == self_name:
                if child.attr in _methods_of(index, owner) or child.attr.startswith("__"):
                    found.append((owner, child.attr))   # an unknown dunder (`__class__`) widens to all
            elif owner and isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super":
                found.append((owner, child.attr))
    for node in nodes:
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and id(child) not in narrowed and \
                    (child.id in index.functions or child.id in index.classes or child.id in index.bindings):
                found.append((child.id, None))
    return found


def _methods_of(index: _Index, owner: str) -> set[str]:
    return {name for cls in index.classes.get(owner, []) for name in cls.methods}


# --- what counts as a forbidden op ---------------------------------------------------------------


def _findings_in(nodes, name, ops, method_ops, *, in_kernel: bool) -> set[Finding]:
    findings = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and not _is_module(node.module, ("triton",)):
            findings |= {Finding(node.lineno, name, f"imports {alias.name} from {node.module}")
                         for alias in node.names if alias.name in ops}
        for child in ast.walk(node):
            if isinstance(child, ast.BinOp) and isinstance(child.op, ast.MatMult) and not in_kernel \
                    and "matmul" in ops:
                findings.add(Finding(child.lineno, name, "the @ operator (a PyTorch matmul)"))
            elif isinstance(child, ast.Attribute) and _root_name(child) not in SAFE_ROOTS \
                    and not _is_torch_backends(child):
                if child.attr in ops or (child.attr in method_ops and not in_kernel):
                    findings.add(Finding(child.lineno, name, f"uses .{child.attr}"))
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id in ops:
                findings.add(Finding(child.lineno, name, f"a call to {child.func.id}()"))
            elif isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value in ops:
                findings.add(Finding(child.lineno, name, f"the string {child.value!r} (a dynamic lookup?)"))
    return findings


def dynamic_lookups(tree: ast.Module, ops=()) -> list[Finding]:
    """Every run-time name lookup in the module that could reach a PyTorch or NumPy op unseen."""
    torchy = _torch_names(tree)
    findings = []

    def add(node, what):
        findings.append(Finding(node.lineno, "the module", f"{what}: a dynamic lookup the static scan "
                                "cannot follow; name PyTorch functions directly"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in CODE_RUNNERS:
            add(node, f"{node.id}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in DYNAMIC_MODULES:
                    add(node, f"imports {module}")
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in NAME_GETTERS:
                        add(node, f"imports {alias.name} from {node.module}")
        elif isinstance(node, ast.Attribute):
            if node.attr in NAME_GETTERS:
                add(node, f".{node.attr}")
            elif node.attr == "modules" and _root_name(node) == "sys":
                add(node, "sys.modules")
            elif node.attr == "__dict__" and _root_name(node) in torchy:
                add(node, f"{_root_name(node)}.__dict__")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            add_call = _dynamic_call(node, torchy, ops)
            if add_call:
                add(node, add_call)
    return findings


def _dynamic_call(node: ast.Call, torchy: set[str], ops) -> str | None:
    function = node.func.id
    if function in NAME_GETTERS:
        return f"{function}()"
    if function in ("getattr", "setattr", "delattr") and len(node.args) >= 2:
        target, attribute = node.args[0], node.args[1]
        literal = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
        if literal and attribute.value in ops:
            return f"{function}(..., {attribute.value!r})"
        if not literal and _root_name(target) not in SAFE_ROOTS - {"math"}:
            return f"{function}() with a computed name"
        if function in ("setattr", "delattr") and _root_name(target) in torchy:
            return f"{function}() on {_root_name(target)}"
    if function == "vars" and (not node.args or _root_name(node.args[0]) in torchy):
        return "vars()"
    return None


def _torch_names(tree) -> set[str]:
    """Names bound to PyTorch or NumPy (modules or their members) by the module's imports."""
    names = {"torch", "numpy", "np", "F"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if _is_module(a.name, TORCH_MODULES)}
        elif isinstance(node, ast.ImportFrom) and _is_module(node.module, TORCH_MODULES):
            names |= {a.asname or a.name for a in node.names}
    return names


def _root_name(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_torch_backends(node: ast.Attribute) -> bool:
    """`torch.backends.cuda.matmul.allow_tf32` is a setting, not an op."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return isinstance(node, ast.Name) and node.id == "torch" and parts[-1:] == ["backends"]


def _is_module(module: str | None, roots) -> bool:
    return bool(module) and module.split(".")[0] in roots


def _is_triton_jit(node) -> bool:
    for decorator in getattr(node, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _root_name(target) in ("tl", "triton") or getattr(target, "id", None) == "_jit":
            return True
    return False
