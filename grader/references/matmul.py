"""What both matmul suites compare against: an fp64 product and the plain product at the inputs' precision.

The rule of docs/numerics.md: a kernel's error against fp64 may be at most 2x the error of the same product done
plainly at the low precision (`reference_and_naive`). For fp32 the plain product is the textbook
sequential loop, since cuBLAS's own fp32 error depends on how it splits K.

One root cause, one charge: TF32 products on fp32 inputs are judged by `matmul.fp32.ieee` alone; every
other check allows the error a TF32 product makes (`allow_tf32`), so a kernel whose only fault is the
missing input_precision="ieee" keeps the points of its shapes, layouts and masks.
"""

from __future__ import annotations

import torch

from grader.numerics import ULP_FLOOR, assert_close_lowp, truncate_to_tf32


def sequential_fp32_matmul(a, b):
    """The textbook loop in fp32: one multiply-add per k, in order, as a single FMA chain sums.

    The fp32 baseline: torch.matmul's own fp32 error depends on how cuBLAS splits K (a tree of short
    partial sums rounds 2-5x less than one chain over all of K), so it is no fair yardstick for a tiled
    kernel. TF32 inputs cost 100-300x this loop's error at the K used here; exact fp32 costs about 1x."""
    acc = torch.zeros((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    for k in range(a.shape[1]):
        acc.addcmul_(a[:, k:k + 1], b[k:k + 1, :])
    return acc


class exact_torch_matmul:
    """Hold torch.matmul's baseline to what it promises: no TF32 for fp32, no fp16/bf16 partial sums.

    (cuBLAS is otherwise allowed TF32 when a program enables it, and split-K reductions in fp16/bf16
    by default, which would inflate the error the kernel is compared with.)"""

    FLAGS = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __enter__(self):
        self.saved = {flag: getattr(torch.backends.cuda.matmul, flag) for flag in self.FLAGS}
        for flag in self.FLAGS:
            setattr(torch.backends.cuda.matmul, flag, False)

    def __exit__(self, *exc):
        for flag, value in self.saved.items():
            setattr(torch.backends.cuda.matmul, flag, value)


def reference_and_naive(a, b):
    """fp64 product of the given (already rounded) inputs, and the plain product at their precision.

    Both from packed copies: a CPU BLAS may load past a view's last column and count on zeros to cancel
    what it read (oneDNN's AMX bf16 K-tail, uxlfoundation/oneDNN#5717), so NaN beside a view leaked into
    the yardstick on CI's Intel hosts and made a harness error of a correct kernel."""
    a, b = a.contiguous(), b.contiguous()
    reference = a.double() @ b.double()
    if a.dtype == torch.float32:
        naive = sequential_fp32_matmul(a, b)
    else:
        with exact_torch_matmul():
            naive = a @ b
    return reference, naive


def tf32_product(a, b):
    """a @ b in fp64 from operands cut to TF32: the product a tensor core makes in TF32, exactly summed."""
    return truncate_to_tf32(a).double() @ truncate_to_tf32(b).double()


def assert_matmul_close(out, a, b, context, allow_tf32=True):
    """Shape, dtype and values of `out` as the product a @ b; with `allow_tf32` (every check but
    matmul.fp32.ieee) fp32 results may also be off by what TF32 products allow."""
    M, N = a.shape[0], b.shape[1]
    assert isinstance(out, torch.Tensor), f"[{context}] expected a tensor, got {type(out).__name__}"
    assert tuple(out.shape) == (M, N), f"[{context}] result shape {tuple(out.shape)}, expected {(M, N)}"
    assert out.dtype == a.dtype, f"[{context}] result dtype {out.dtype}, expected the inputs' {a.dtype}"
    reference, naive = reference_and_naive(a, b)
    tf32 = tf32_product(a.contiguous(), b.contiguous()) if allow_tf32 and a.dtype == torch.float32 else None
    assert_close_lowp(out, reference, naive, factor=2.0, floor=1e-5, ulps=ULP_FLOOR if tf32 is not None else 0.0,
                      what="a @ b", context=context, tf32_naive=tf32)


def describe(M, K, N, dtype, layout="row-major"):
    return f"M={M} K={K} N={N} {str(dtype).replace('torch.', '')} {layout}"
