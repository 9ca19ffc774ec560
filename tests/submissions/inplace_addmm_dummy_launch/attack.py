# target: matmul
"""Cheat: the product is the in-place `out.addmm_(a, b)` (the forbidden lists name addmm, not its
in-place form) into zeros, around one launch of the student's kernel on a 1x1 problem."""

_reference_matmul = matmul  # noqa: F821 - defined by the reference above


def matmul(a, b):
    check_matmul_inputs(a, b)  # noqa: F821
    _reference_matmul(a[:1, :1].contiguous(), b[:1, :1].contiguous())  # the alibi launch
    out = torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)  # noqa: F821
    out.addmm_(a, b)
    return out
