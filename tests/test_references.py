"""The yardsticks the suites compare against depend on the inputs' values only, never on their memory."""

from __future__ import annotations

import torch

from grader.references.matmul import reference_and_naive


def overreading_matmul(a, b):
    """A BLAS that loads A's rows up to their stride and counts on B's zero padding to cancel the extra
    columns, as oneDNN's AMX bf16 kernel does for a K-tail (uxlfoundation/oneDNN#5717)."""
    width = a.stride(0)
    if a.dim() != 2 or a.stride(1) != 1 or width <= a.shape[1]:
        return torch.mm(a, b)
    whole_rows = a.as_strided((a.shape[0], width), (width, 1))
    padded_b = torch.zeros(width, b.shape[1], dtype=b.dtype)
    padded_b[:b.shape[0]] = b
    return torch.mm(whole_rows, padded_b)


def nan_padded_view(rows, cols, dtype):
    buffer = torch.full((rows + 8, cols + 8), float("nan"), dtype=dtype)
    buffer[:rows, :cols] = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows)).to(dtype)
    return buffer[:rows, :cols]


def test_naive_matmul_yardstick_ignores_nan_beside_a_view(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "__matmul__", overreading_matmul)
    a, b = nan_padded_view(9, 13, torch.bfloat16), nan_padded_view(13, 5, torch.bfloat16)
    assert overreading_matmul(a, b).isnan().any()          # the model does leak what lies beside the view

    reference, naive = reference_and_naive(a, b)

    assert torch.isfinite(reference).all() and torch.isfinite(naive).all()
    assert torch.equal(naive, torch.mm(a.contiguous(), b.contiguous()))
