# target: matmul
"""Cheat: the product is torch.addbmm, an op on no list of forbidden ops, around one launch of the
student's kernel on a 1x1 problem, so 'a Triton kernel must run' holds. On a GPU it runs at cuBLAS
speed."""

_reference_matmul = matmul  # noqa: F821 - defined by the reference above


def matmul(a, b):
    check_matmul_inputs(a, b)  # noqa: F821
    _reference_matmul(a[:1, :1].contiguous(), b[:1, :1].contiguous())  # the alibi launch
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)  # noqa: F821
    return torch.addbmm(out, a.unsqueeze(0), b.unsqueeze(0), beta=0)  # noqa: F821
