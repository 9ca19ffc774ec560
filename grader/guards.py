"""Rules a kernel call must obey, enforced where the student's code runs.

`forbid_ops` makes the PyTorch reference operations raise inside the call (a TorchFunctionMode sees
every torch function and tensor method), so a "Triton kernel" that calls torch.matmul or SDPA fails.
`count_triton_launches` counts kernel launches, so a function that launches nothing fails. Both run in
the worker in isolated mode, so they are claims: `grader.scan` backs them with a static scan.
"""

from __future__ import annotations

import contextlib

from torch.overrides import TorchFunctionMode

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
        name = getattr(func, "__name__", "").split(".")[0]  # aten overloads are named "mm.default"
        if name in self.names:
            self.hits.append(name)
            raise ForbiddenOpError(f"torch.{name} is not allowed inside this function")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def forbid_ops(names: tuple[str, ...]):
    """Yield a list that collects each forbidden op the code tried to call."""
    hits: list[str] = []
    if not names:
        yield hits
        return
    with _ForbidMode(tuple(names), hits):
        yield hits


class _LaunchCounter:
    def __init__(self):
        self.count = 0


_active_counters: list[_LaunchCounter] = []
_hooked = False


def _hook_triton_launches() -> None:
    """Wrap the launch entry points of compiled and interpreted kernels, once per process."""
    global _hooked
    if _hooked:
        return
    try:
        from triton.runtime import interpreter, jit
    except ImportError:
        _hooked = True
        return
    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        original = cls.run

        def counted_run(self, *args, _original=original, warmup=False, **kwargs):
            if not warmup:
                for counter in _active_counters:
                    counter.count += 1
            return _original(self, *args, warmup=warmup, **kwargs)

        cls.run = counted_run
    _hooked = True


@contextlib.contextmanager
def count_triton_launches():
    _hook_triton_launches()
    counter = _LaunchCounter()
    _active_counters.append(counter)
    try:
        yield counter
    finally:
        _active_counters.remove(counter)


