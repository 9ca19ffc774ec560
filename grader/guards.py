"""Rules a kernel call must obey, enforced where the student's code runs.

`forbid_ops` makes the PyTorch reference operations raise inside the call (a TorchFunctionMode sees
every torch function and tensor method), so a "Triton kernel" that calls torch.matmul or SDPA fails.
Where a Triton kernel is required, `wrapper_ops_only` also refuses every op outside the wrapper
allow-list (grader.wrapper_ops) that the student's code calls; the harness's own code in the same call
(a timing loop, its input copies) and Triton's handling of a launch's arguments are not the student's,
and the code a module runs at import cannot see the inputs. `count_triton_launches` counts
kernel launches, so a function that launches nothing fails. All run in the worker in isolated mode, so
they are claims: `grader.scan` backs them with a static scan.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import sysconfig
import threading
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from grader import wrapper_ops

MATMUL_OPS = ("matmul", "mm", "bmm", "einsum", "addmm", "baddbmm", "linear", "tensordot", "dot", "inner",
              "__matmul__", "__rmatmul__", "mv", "chain_matmul")
SOFTMAX_OPS = ("softmax", "log_softmax", "_softmax", "logsumexp", "softmin")
ATTENTION_OPS = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "multi_head_attention_forward") + MATMUL_OPS + SOFTMAX_OPS
OP_SETS = {"matmul": MATMUL_OPS, "softmax": SOFTMAX_OPS, "attention": ATTENTION_OPS}
# Tensor math a "Triton" function could compute its answer with around a dummy launch; forbidden
# whenever a Triton launch is required (wrappers only allocate, reshape and launch).
TENSOR_MATH_OPS = ("exp", "exp2", "expm1", "log", "log2", "sum", "amax", "amin", "max", "min", "mean",
                   "cumsum", "prod", "mul", "__mul__", "__rmul__", "div", "__truediv__", "__rtruediv__",
                   "where", "sigmoid", "tanh", "outer", "kron")


def runtime_forbidden(ops: tuple[str, ...], require_triton: bool) -> tuple[str, ...]:
    """What the run-time guard refuses: the named ops, plus tensor math when Triton must do the work."""
    return tuple(ops) + (TENSOR_MATH_OPS if require_triton and ops else ())


class ForbiddenOpError(RuntimeError):
    """Raised inside the student's call when it uses a forbidden PyTorch operation."""


class _ForbidMode(TorchFunctionMode):
    def __init__(self, names: tuple[str, ...], hits: list[str]):
        super().__init__()
        self.names = set(names)
        self.hits = hits

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.refuse_named(func)
        return func(*args, **(kwargs or {}))

    def refuse_named(self, func) -> None:
        name = getattr(func, "__name__", "").split(".")[0]  # aten overloads are named "mm.default"
        if name in self.names:
            self.hits.append(name)
            raise ForbiddenOpError(f"torch.{name} is not allowed inside this function")


@contextlib.contextmanager
def forbid_ops(names: tuple[str, ...]):
    """Yield a list that collects each forbidden op the code tried to call."""
    hits: list[str] = []
    if not names:
        yield hits
        return
    with _ForbidMode(tuple(names), hits):
        yield hits


class _WrapperOpsMode(_ForbidMode):
    """`forbid_ops`, and the ops outside the wrapper allow-list that student code calls (see `_caller`)."""

    def __init__(self, names: tuple[str, ...]):
        super().__init__(names, [])
        self._base = None   # the frame that entered the guard: frames below it are the harness's

    def __enter__(self) -> list[str]:
        self._base = sys._getframe(1)
        super().__enter__()
        return self.hits

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.refuse_named(func)
        if id(_op_object(func)) not in _wrapper_op_ids() and _caller(sys._getframe(1), self._base) == "student":
            name = _op_name(func)
            self.hits.append(name)
            raise ForbiddenOpError(f"torch.{name} is not allowed inside this function: around a Triton "
                                   "kernel only allocation, layout, queries and launches are allowed")
        return func(*args, **(kwargs or {}))


def wrapper_ops_only(names: tuple[str, ...]) -> _WrapperOpsMode:
    """`forbid_ops(names)` where a Triton kernel is required: every op outside the wrapper allow-list
    that the student's code calls is refused too. Enter it (`with ... as hits`) in the frame that calls
    the student's code: the frames below it are the harness's."""
    _hook_triton_launches()
    return _WrapperOpsMode(tuple(names))


def _op_object(func):
    """The object naming an op: a property's descriptor for `x.shape` (seen as its `__get__`)."""
    if getattr(func, "__name__", None) in ("__get__", "__set__") and hasattr(func, "__self__"):
        return func.__self__
    return func


def _op_name(func) -> str:
    target = _op_object(func)
    try:
        name = resolve_name(target) if target is func else f"Tensor.{target.__name__}"
    except Exception:  # noqa: BLE001 - a name for the message only
        name = None
    return (name or getattr(target, "__name__", repr(target))).removeprefix("torch.")


_allowed_ids: set[int] = set()
_allowed_objects: list = []       # kept alive, so their ids stay theirs


def _wrapper_op_ids() -> set[int]:
    if not _allowed_ids:
        for name in wrapper_ops.TORCH_FUNCTIONS:
            _allowed_objects.append(getattr(torch, name, None))
        for name in wrapper_ops.TENSOR_OPS:
            _allowed_objects.extend((getattr(torch.Tensor, name, None),
                                     inspect.getattr_static(torch.Tensor, name, None)))
        _allowed_objects.append(torch.nn.functional.pad)
        _allowed_ids.update(id(obj) for obj in _allowed_objects if obj is not None)
    return _allowed_ids


def _caller(frame, base) -> str:
    """Whose call an op is: "launch" (Triton handling a launch's arguments), "student", "import" (a
    submitted module's top-level code, run by the harness's import) or "harness" (no student frame).

    The frames from the op out to the guard's own frame decide: any frame of code that is not PyTorch,
    Triton, the grader or the standard library makes the op the student's, so a harness function that a
    student callback calls is still the student's call."""
    innermost, outermost_student = True, None
    while frame is not None and frame is not base:
        kind = _code_kind(frame.f_code.co_filename)
        if innermost and kind != "torch":
            if kind == "triton" and _launch_depth() > 0:
                return "launch"
            innermost = False
        if kind == "student":
            outermost_student = frame
        frame = frame.f_back
    if outermost_student is None:
        return "harness"
    return "import" if outermost_student.f_code.co_name == "<module>" else "student"


_kinds: dict[str, str] = {}


def _code_kind(filename: str) -> str:
    kind = _kinds.get(filename)
    if kind is None:
        kind = _kinds[filename] = _kind_of_file(filename)
    return kind


def _kind_of_file(filename: str) -> str:
    if filename.startswith("<frozen "):
        return "trusted"                  # importlib's own frames
    path = Path(filename)
    roots = _trusted_roots()
    for kind in ("torch", "triton", "trusted"):
        if any(path.is_relative_to(root) for root in roots[kind]):
            return kind
    stdlib = [Path(p) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}]
    if any(path.is_relative_to(root) for root in stdlib) and not {"site-packages", "dist-packages"} & set(path.parts):
        return "trusted"
    return "student"


_roots: dict[str, list[Path]] = {}


def _trusted_roots() -> dict[str, list[Path]]:
    if not _roots:
        try:
            import triton
            triton_files = [triton.__file__]
        except ImportError:
            triton_files = []
        for kind, files in (("torch", [torch.__file__]), ("triton", triton_files), ("trusted", [__file__])):
            folders = [Path(file).parent for file in files]    # `trusted`: the grader package
            _roots[kind] = folders + [folder.resolve() for folder in folders]
    return _roots


class _LaunchCounter:
    def __init__(self):
        self.count = 0


_active_counters: list[_LaunchCounter] = []
_hooked = False
_launching = threading.local()   # .depth: how many launch entry points this thread is inside


def _launch_depth() -> int:
    return getattr(_launching, "depth", 0)


def _hook_triton_launches() -> None:
    """Wrap the launch entry points of compiled and interpreted kernels, once per process: launches
    are counted, and the autotuner's and heuristics' entry points are marked as inside a launch too."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    try:
        from triton.runtime import autotuner, interpreter, jit
    except ImportError:
        return
    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        original = cls.run

        def counted_run(self, *args, _original=original, warmup=False, **kwargs):
            if not warmup:
                for counter in _active_counters:
                    counter.count += 1
            with _inside_launch():
                return _original(self, *args, warmup=warmup, **kwargs)

        cls.run = counted_run
    for cls in (autotuner.Autotuner, autotuner.Heuristics):
        original = cls.run

        def marked_run(self, *args, _original=original, **kwargs):
            with _inside_launch():
                return _original(self, *args, **kwargs)

        cls.run = marked_run


@contextlib.contextmanager
def _inside_launch():
    _launching.depth = _launch_depth() + 1
    try:
        yield
    finally:
        _launching.depth -= 1


@contextlib.contextmanager
def count_triton_launches():
    _hook_triton_launches()
    counter = _LaunchCounter()
    _active_counters.append(counter)
    try:
        yield counter
    finally:
        _active_counters.remove(counter)


