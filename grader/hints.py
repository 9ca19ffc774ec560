"""Hints added to a failure, only where their cause can apply to this device, dtype and code.

A hint that cannot apply sends a student after the wrong bug: "TF32" on a CPU, where the interpreter
multiplies exactly, or "accumulate in float32" for a kernel that already does. The plugin states the
circumstances of each test (`circumstances`: on a GPU or not, and the facts of the module's kernels,
grader.kernel_facts); the comparisons ask `can_apply` before naming a cause. Outside a test (a
comparison called directly) nothing is known, and every hint the numbers support is given.

The CPU-tensors hint: a Triton path that refuses CPU tensors (`assert q.is_cuda`) can lose two thirds of
its points on a CPU grade, and without a note nothing says that Triton runs on CPU tensors there.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass

from grader.kernel_facts import KernelFacts, kernel_facts

CPU_TENSORS_HINT = (
    "Hint: this run has no GPU, so the inputs are CPU tensors and Triton kernels run on them in Triton's "
    "interpreter (TRITON_INTERPRET=1, set by the grader). Do not assert q.is_cuda or move tensors to "
    "'cuda': launch on the inputs' device as it is.")
_REFUSES_CPU = re.compile(r"is_cuda|\.cuda\(|device\.type\s*[!=]=\s*['\"]cuda|Torch not compiled with CUDA"
                          r"|CUDA tensors?|No CUDA GPUs")

# The causes a comparison may name, and what must hold for each to be possible.
TF32 = "tf32"                    # float32 tl.dot multiplied in TF32: needs a GPU and a tl.dot not asking for IEEE
LOW_PRECISION_SUM = "low_precision_sum"   # a sum kept in fp16/bf16: needs a kernel that never names float32
PADDING_LANES = "padding_lanes"  # masked loads padded with 0 counted in a softmax: needs such a load


@dataclass(frozen=True)
class Circumstances:
    on_gpu: bool
    code: KernelFacts | None     # None: the module's source is not at hand


_current: contextvars.ContextVar[Circumstances | None] = contextvars.ContextVar("hint_circumstances", default=None)


@contextlib.contextmanager
def circumstances(on_gpu: bool, source: str | None):
    """Within the block, hints judge by this device and by the kernels of `source` (the module under test)."""
    token = _current.set(Circumstances(on_gpu, kernel_facts(source)))
    try:
        yield
    finally:
        _current.reset(token)


def can_apply(cause: str) -> bool:
    """Whether `cause` is possible for the call being judged (True when nothing is known)."""
    now = _current.get()
    if now is None:
        return True
    if cause == TF32:
        return now.on_gpu and (now.code is None or now.code.may_multiply_in_tf32)
    if now.code is None:
        return True
    if cause == LOW_PRECISION_SUM:
        return not now.code.mentions_float32
    if cause == PADDING_LANES:
        return now.code.loads_padded_not_neg_inf > 0
    raise ValueError(f"unknown hint cause {cause!r}")


def device_hint(message: str, on_gpu: bool) -> str:
    """CPU_TENSORS_HINT when a failure without a GPU reads like code that refused CPU tensors, else ""."""
    return CPU_TENSORS_HINT if not on_gpu and _REFUSES_CPU.search(message or "") else ""
