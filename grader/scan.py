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

Code that runs at import (module statements, class bodies, decorators, default arguments) can store
anything anywhere (`helpers.f = helper`, `torch.Tensor.rows = helper`, a registry filled by a
decorator), so every name it mentions is followed from every entry point too. Names are resolved
before they are judged (grader.scan_names): a submission's own `softmax` is not torch.softmax, and
`tl` or `math` is a safe root only when bound by the real import. The code of an
`if __name__ == "__main__":` block never runs when graded and is not read.

What counts as forbidden is grader.scan_rules: the named ops, and where a Triton kernel is required
(`wrapper_only`) anything outside the wrapper allow-list (grader.wrapper_ops). Dynamic lookups (`eval`,
`getattr(torch, name)`, `operator.attrgetter`, `globals()[...]`, ...) cannot be followed, and switching
off PyTorch's function overrides (`torch._C.DisableTorchFunction`, `torch.overrides`) blinds the
run-time guard, so one anywhere in the module is a finding of its own. Inside `@triton.jit` kernels only
PyTorch names count (Triton's own `tl.dot`, `tl.sum` are the point of the exercise).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from grader.scan_names import Names, graded_tree
from grader.scan_rules import Place, Rules, findings_in

TORCH_MODULES = ("torch", "numpy")
CODE_RUNNERS = {"eval", "exec", "compile", "__import__", "globals", "locals", "__builtins__", "breakpoint"}
DYNAMIC_MODULES = {"importlib", "builtins"}   # (ctypes reaches no Python name: left to the guards)
BUILTIN_DECORATORS = {"staticmethod", "classmethod", "property"}
WRAPPING_MODULES = {"functools", "dataclasses", "contextlib", "typing", "abc"}   # decorators that keep nothing
PURE_BUILDERS = {"dict", "list", "tuple", "set", "frozenset", "SimpleNamespace", "float", "int", "str", "range"}
NAME_GETTERS = {"attrgetter", "methodcaller", "import_module", "__getattribute__", "__getattr__"}
# Namespaces and code objects reached at run time: a module's globals, a frame's, a function's code.
NAMESPACE_ATTRIBUTES = {"__globals__", "f_globals", "f_locals", "f_builtins", "__code__"}
# What switches PyTorch's function overrides off (and with them the run-time guard, a TorchFunctionMode).
OVERRIDE_SWITCHES = {"DisableTorchFunction", "DisableTorchFunctionSubclass", "_disabled_torch_function_impl",
                     "_pop_torch_function_stack", "_push_on_torch_function_stack", "_len_torch_function_stack",
                     "_get_function_stack_at", "_set_torch_function_mode", "_pop_mode", "_pop_mode_temporarily",
                     "_push_mode", "TorchFunctionMode", "_is_torch_function_mode_enabled",
                     "_get_current_function_mode", "_get_current_function_mode_stack"}
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
                    siblings: dict[str, str] | None = None, module: str = "", *,
                    wrapper_only: bool = False) -> list[Finding]:
    """Findings for every forbidden op reachable from `entries`, plus every dynamic lookup.

    Entries are module-level names (a function, or a class: all of it) or `Class.method`. `ops` are
    refused however they are named (`torch.matmul`, `x.matmul`, `from torch import matmul`, the string
    "matmul"); `method_ops` only as attributes (`torch.exp`, `x.sum()`), since the same names are
    Python builtins too (`max`, `sum`). With `wrapper_only` (a Triton kernel is required) the code
    outside kernels may use only the wrapper allow-list. `siblings` (module name -> source) are the
    submission's other modules: what the entry imports from them (`from .matmul import helper`) is
    followed there.
    """
    sources = {**(siblings or {}), module: source}
    rules = Rules(frozenset(ops), frozenset(op for op in method_ops if not op.startswith("__")), wrapper_only)
    findings: set[Finding] = set()
    indexes: dict[str, _Index] = {}
    todo = [(module, list(entries))]
    while todo:
        name, wanted = todo.pop()
        prefix = f"{name}.py " if name != module else ""
        if name not in indexes:
            try:
                index = indexes[name] = _Index(ast.parse(sources[name]))
            except SyntaxError:
                if name == module:
                    raise
                continue                       # a sibling that does not parse fails on import anyway
            findings |= {replace(f, function=prefix + f.function)
                         for f in dynamic_lookups(index.tree, ops, index.names)}
            for label, nodes in index.import_time:
                findings |= _findings(nodes, prefix + label, rules, index.place(), in_kernel=False, import_time=True)
            wanted = wanted + index.import_roots   # whatever import-time code stored may be called later
        index = indexes[name]
        for label, nodes, in_kernel, place in index.reachable(wanted):
            findings |= _findings(nodes, prefix + label, rules, place, in_kernel=in_kernel)
        for sibling, member in index.take_sibling_imports():
            if sibling in sources:
                todo.append((sibling, [member] if member else _top_level_names(sources[sibling])))
    return sorted(findings, key=lambda f: (f.function.partition(" ")[0].endswith(".py"), f.line, f.what))


def _findings(nodes, label, rules, place, **where) -> set[Finding]:
    return {Finding(line, label, what) for line, what in findings_in(nodes, rules, place, **where)}


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
        self.tree = graded_tree(tree)
        self.names = Names(self.tree)
        self.functions: dict[str, list[ast.AST]] = {}
        self.classes: dict[str, list[_Class]] = {}
        self.bindings: dict[str, list[ast.AST]] = {}
        self.import_time: list[tuple[str, list[ast.AST]]] = []
        self._sibling_imports: list[tuple[str, str | None]] = []
        self._collect(self.tree.body)
        self._import_statements = list(self.import_time)    # module level; headers are added below
        self.members = {name: {member for cls in classes for member in [*cls.methods, *_class_attributes(cls)]}
                        for name, classes in self.classes.items()}
        self._add_definition_headers()
        self.import_roots = self._stored_at_import()

    def place(self, self_name: str | None = None, owner: str | None = None) -> Place:
        return Place(self.names, self.members, self_name, owner, self.is_kernel)

    def _stored_at_import(self) -> list[str]:
        """Entries for what import-time code may have stored anywhere: every name that module and class
        body statements mention (unless one only builds the value of a plain name, which is followed
        through that name), and what a decorator of the submission's own receives or mentions, and the
        classes that a base's `__init_subclass__` or a metaclass sees being defined. (Default arguments
        and PyTorch's or Triton's decorators keep what they hold in the function: followed with it.)"""
        statements = [node for _, nodes in self._import_statements for node in nodes]
        for classes in self.classes.values():
            for cls in classes:
                statements += cls.shell[len(cls.node.decorator_list) + len(cls.node.bases) + len(cls.node.keywords):]
        roots = [f"{name}.{member}" if member else name for node in statements if not self._builds_a_plain_value(node)
                 for name, member in _references([node], self, None, None)]
        for name, nodes in self.functions.items():
            for node in nodes:
                roots += self._handed_to_decorators(name, node)
        for name, classes in self.classes.items():
            for cls in classes:
                roots += self._handed_to_decorators(name, cls.node)
                if cls.node.keywords or self._sees_subclasses(cls):
                    roots.append(name)
                for method, nodes in cls.methods.items():
                    for node in nodes:
                        roots += self._handed_to_decorators(f"{name}.{method}", node)
        return roots

    def _handed_to_decorators(self, name: str, node) -> list[str]:
        storing = [d for d in node.decorator_list if self._may_store([d])]
        if not storing or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.is_kernel(node)):
            return []
        return [name] + [f"{n}.{m}" if m else n for n, m in _references(storing, self, None, None)]

    def _may_store(self, decorators) -> bool:
        """A decorator that could keep the function somewhere: anything but Python's, PyTorch's, Triton's
        and the standard wrappers, or one that mentions the submission's own code."""
        for decorator in decorators:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            root = _root_name(target) or ""
            mentions_own = any(isinstance(n, ast.Name) and n.id != root and self.names.defined_here(n.id)
                               and (n.id in self.functions or n.id in self.classes or n.id in self.bindings)
                               for n in ast.walk(decorator))
            known = (isinstance(target, ast.Name) and target.id in BUILTIN_DECORATORS) \
                or bool(self.names.torch_paths(root)) or self.names.is_safe_root(root, "triton") \
                or any(path.split(".")[0] in WRAPPING_MODULES for path in self.names.import_paths(root))
            if mentions_own or not known:
                return True
        return False

    def _sees_subclasses(self, cls) -> bool:
        bases = [b.id for b in cls.node.bases if isinstance(b, ast.Name) and b.id in self.classes]
        return any("__init_subclass__" in base.methods for name in bases for base in self.classes[name])

    def _builds_a_plain_value(self, node) -> bool:
        """`NAME = dict(a=f)`: containers built by builtins, bound to plain names, store nothing elsewhere."""
        if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None):
            return False
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            return False
        calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call)]
        return all(isinstance(c.func, ast.Name) and c.func.id in PURE_BUILDERS
                   and not self.names.defined_here(c.func.id) for c in calls)

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

    def _add_definition_headers(self) -> None:
        """Decorators and default arguments of functions and methods, and class bodies, run at import."""
        for name, nodes in self.functions.items():
            for node in nodes:
                self.import_time.append((name, _definition_header(node)))
        for name, classes in self.classes.items():
            for cls in classes:
                self.import_time.append((name, cls.shell))
                for method, nodes in cls.methods.items():
                    for node in nodes:
                        self.import_time.append((f"{name}.{method}", _definition_header(node)))

    def reachable(self, entries):
        """(label, nodes, in_kernel, place) for every unit of code the entries reach."""
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
                yield label, nodes, in_kernel, self.place(self_name, owner)
                todo += _references(nodes, self, self_name, owner)

    def _units(self, name, member):
        for node in self.functions.get(name, []) if member is None else []:
            yield name, [node], self.is_kernel(node), None, None
        for node in self.bindings.get(name, []) if member is None else []:
            self._sibling_imports += _sibling_import(node, name)
            yield name, [node], False, None, None
        for cls in self.classes.get(name, []):
            yield name, cls.shell, False, None, name
            wanted = _wanted_methods(cls, member, self)
            for method in wanted:
                for node in cls.methods.get(method, []):
                    yield f"{name}.{method}", [node], self.is_kernel(node), _self_name(node), name

    def is_kernel(self, node) -> bool:
        """Decorated by Triton's jit, autotune or heuristics (through a real `import triton`), or by a
        function of this module that only returns `triton.jit(...)`: Triton compiles the body."""
        for decorator in getattr(node, "decorator_list", []):
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self._is_triton_decorator(target):
                return True
            if isinstance(target, ast.Name) and self.functions.get(target.id) and \
                    all(self._returns_only_jit(f) for f in self.functions[target.id]):
                return True
        return False

    def _is_triton_decorator(self, target) -> bool:
        return isinstance(target, ast.Attribute) and target.attr in ("jit", "autotune", "heuristics") \
            and self.names.is_safe_root(_root_name(target) or "", "triton")

    def _returns_only_jit(self, function) -> bool:
        """Every `return` gives `triton.jit(...)`, or the function unchanged where `triton is None`
        (which only a failed import makes true, and the grading environment has Triton)."""
        returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
        return bool(returns) and all(self._jit_value(r.value, r, function) for r in returns)

    def _jit_value(self, value, statement, function) -> bool:
        if isinstance(value, ast.Call) and self._is_triton_decorator(value.func):
            return True
        if isinstance(value, ast.IfExp) and self._triton_is_none(value.test):
            return self._jit_value(value.orelse, statement, function)
        return isinstance(value, ast.Name) and self._under_triton_is_none(statement, function)

    def _triton_is_none(self, test) -> bool:
        return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) \
            and self.names.is_safe_root(test.left.id, "triton") and len(test.ops) == 1 \
            and isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None

    def _under_triton_is_none(self, statement, function) -> bool:
        return any(isinstance(n, ast.If) and self._triton_is_none(n.test) and
                   any(statement is s for body in n.body for s in ast.walk(body)) for n in ast.walk(function))


def _definition_header(node) -> list[ast.AST]:
    """Decorators (as the calls they are: applied at import) and default arguments."""
    args = node.args
    applied = [ast.copy_location(ast.Call(func=d, args=[], keywords=[]), d) for d in node.decorator_list]
    return [*applied, *args.defaults, *[d for d in args.kw_defaults if d is not None]]


def _class_attributes(cls) -> set[str]:
    return {n.id for node in cls.shell for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


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


# --- what the scan cannot follow ------------------------------------------------------------------


def dynamic_lookups(tree: ast.Module, ops=(), names: Names | None = None) -> list[Finding]:
    """Every run-time name lookup in the module that could reach a PyTorch or NumPy op unseen, and every
    switch that would blind the run-time guard."""
    names = names or Names(tree)
    torchy = _torch_names(tree)
    findings = []

    def add(node, what):
        findings.append(Finding(node.lineno, "the module", f"{what}: a dynamic lookup the static scan "
                                "cannot follow; name PyTorch functions directly"))

    def blinds(node, what):
        findings.append(Finding(node.lineno, "the module", f"{what}: switches off PyTorch's function "
                                "overrides, which the run-time guard needs to see your ops"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in CODE_RUNNERS:
            add(node, f"{node.id}")
        elif isinstance(node, (ast.Name, ast.Attribute)) and _name_of(node) in OVERRIDE_SWITCHES:
            blinds(node, _name_of(node))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _check_import(node, add, blinds)
        elif isinstance(node, ast.Attribute):
            if node.attr in NAME_GETTERS or node.attr in NAMESPACE_ATTRIBUTES:
                add(node, f".{node.attr}")
            elif node.attr == "modules" and _root_name(node) == "sys":
                add(node, "sys.modules")
            elif node.attr == "__dict__" and _root_name(node) in torchy:
                add(node, f"{_root_name(node)}.__dict__")
            elif node.attr == "overrides" and isinstance(node.value, ast.Name) and \
                    "torch" in names.torch_paths(node.value.id):
                blinds(node, "torch.overrides")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            add_call = _dynamic_call(node, torchy, ops, names)
            if add_call:
                add(node, add_call)
    return findings


def _check_import(node, add, blinds) -> None:
    modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for module in modules if not getattr(node, "level", 0) else []:
        if module.split(".")[0] in DYNAMIC_MODULES:
            add(node, f"imports {module}")
        elif module == "torch.overrides" or module.startswith("torch.overrides."):
            blinds(node, f"imports {module}")
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if alias.name in NAME_GETTERS:
                add(node, f"imports {alias.name} from {node.module}")
            elif alias.name in OVERRIDE_SWITCHES or (node.module == "torch" and alias.name == "overrides"):
                blinds(node, f"imports {alias.name} from {node.module}")


def _name_of(node) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr


def _dynamic_call(node: ast.Call, torchy: set[str], ops, names: Names) -> str | None:
    function = node.func.id
    if function in NAME_GETTERS:
        return f"{function}()"
    if function in ("getattr", "setattr", "delattr") and len(node.args) >= 2:
        target, attribute = node.args[0], node.args[1]
        literal = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
        if literal and attribute.value in ops:
            return f"{function}(..., {attribute.value!r})"
        if not literal and not names.is_safe_root(_root_name(target) or "", "triton"):
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


def _is_module(module: str | None, roots) -> bool:
    return bool(module) and module.split(".")[0] in roots
