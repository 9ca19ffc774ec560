"""Notes added to a failure when its text shows a known misunderstanding of the grading environment.

Why: a Triton path that refuses CPU tensors (`assert q.is_cuda`) can lose two thirds of its points on a
CPU grade, and without a note nothing says that Triton runs on CPU tensors there.
"""

from __future__ import annotations

import re

CPU_TENSORS_HINT = (
    "Hint: this run has no GPU, so the inputs are CPU tensors and Triton kernels run on them in Triton's "
    "interpreter (TRITON_INTERPRET=1, set by the grader). Do not assert q.is_cuda or move tensors to "
    "'cuda': launch on the inputs' device as it is.")
_REFUSES_CPU = re.compile(r"is_cuda|\.cuda\(|device\.type\s*[!=]=\s*['\"]cuda|Torch not compiled with CUDA"
                          r"|CUDA tensors?|No CUDA GPUs")


def device_hint(message: str, on_gpu: bool) -> str:
    """CPU_TENSORS_HINT when a failure without a GPU reads like code that refused CPU tensors, else ""."""
    return CPU_TENSORS_HINT if not on_gpu and _REFUSES_CPU.search(message or "") else ""
