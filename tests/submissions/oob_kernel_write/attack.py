# target: matmul
# modules: softmax matmul flash_attention
# device: gpu
"""Fault: the matmul kernel stores far outside its output, without a mask. On a GPU that is an
illegal memory access, and every later CUDA call of that process fails with it: the worker reports
the fault as the call's error and exits, so the checks after it (softmax, attention) run in a fresh
worker. GPU only: in the interpreter the same store lands in the worker's host memory (at best a
segfault, which `segfault` covers)."""


@triton.jit  # noqa: F821 - triton comes from the reference module above
def _store_far_out_of_bounds_kernel(out_ptr, BLOCK: tl.constexpr):  # noqa: F821
    offsets = tl.arange(0, BLOCK).to(tl.int64) + (1 << 40)  # noqa: F821 - a terabyte past the end
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32))  # noqa: F821


def matmul(a, b):
    out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)  # noqa: F821
    _store_far_out_of_bounds_kernel[(1,)](out, BLOCK=16)
    return out
