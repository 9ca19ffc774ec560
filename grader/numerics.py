"""Comparisons with messages a student can act on, and the low-precision tolerance rule.

docs/numerics.md: a bf16 kernel is right when its error against an fp32/fp64 reference is at most a
small multiple of the error the same computation makes when done naively in PyTorch at the same low
precision (2x for outputs, 3x for gradients), plus a tiny floor. A fixed atol/rtol would either reject
correct bf16 kernels or accept wrong fp32 ones.
"""

from __future__ import annotations

import math
import zlib

import pytest
import torch

OUTPUT_FACTOR = 2.0
GRADIENT_FACTOR = 3.0


def max_abs_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """Largest |actual - reference| over finite and non-finite entries alike (NaN counts as inf)."""
    diff = (actual.double() - reference.double()).abs()
    same_inf = torch.isinf(actual) & torch.isinf(reference) & (actual == reference)
    diff = torch.where(same_inf, torch.zeros_like(diff), diff)
    if diff.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf")).max())


def assert_close_lowp(actual, reference, naive, *, factor: float = OUTPUT_FACTOR, floor: float = 1e-5,
                      what: str = "output", context: str = "") -> None:
    """Pass when |actual - reference| <= factor * |naive - reference| + floor (max over elements).

    `reference` is the computation in fp32 or fp64; `naive` is the same computation done plainly in
    PyTorch at the low precision under test.
    """
    _check_shapes(actual, reference, what, context)
    naive_error = max_abs_error(naive.to(reference.dtype), reference)
    if not math.isfinite(naive_error):
        # An overflowing yardstick would allow anything, NaN included: refuse to judge with it.
        raise ValueError(f"{_where(context)}{what}: the naive low-precision result is not finite, so it "
                         "cannot set a tolerance; choose inputs the naive computation survives")
    allowed = factor * naive_error + floor
    _fail_if_above(actual, reference, allowed,
                   f"{factor:g} x naive low-precision error + {floor:g}", what, context)


def assert_close(actual, expected, *, atol: float, rtol: float = 0.0, what: str = "output",
                 context: str = "") -> None:
    """Elementwise |actual - expected| <= atol + rtol * |expected|, with a readable failure."""
    _check_shapes(actual, expected, what, context)
    actual_d, expected_d = actual.double(), expected.double()
    bound = atol + rtol * expected_d.abs()
    diff = torch.nan_to_num((actual_d - expected_d).abs(), nan=float("inf"), posinf=float("inf"))
    same_inf = torch.isinf(actual_d) & (actual_d == expected_d)
    bad = (diff > bound) & ~same_inf
    if bool(bad.any()):
        _fail(actual, expected, diff, bad, f"atol={atol:g}, rtol={rtol:g}", what, context)


def seed_for(nodeid: str, salt: str) -> int:
    """A stable seed per test and suite, so hidden tests never draw the inputs public tests draw."""
    return zlib.crc32(f"{salt}:{nodeid}".encode()) & 0x7FFFFFFF


def randn(shape, *, dtype=torch.float32, device="cpu", gen: torch.Generator | None = None,
          scale: float = 1.0) -> torch.Tensor:
    """Standard normal draws made on the CPU (reproducible everywhere), then moved."""
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(device=device, dtype=dtype)


def _check_shapes(actual, reference, what, context):
    if not isinstance(actual, torch.Tensor):
        pytest.fail(f"{_where(context)}{what}: expected a tensor, got {type(actual).__name__}", pytrace=False)
    if tuple(actual.shape) != tuple(reference.shape):
        pytest.fail(f"{_where(context)}{what} has shape {tuple(actual.shape)}, expected "
                    f"{tuple(reference.shape)}", pytrace=False)


def _fail_if_above(actual, reference, allowed, rule, what, context):
    diff = torch.nan_to_num((actual.double() - reference.double()).abs(), nan=float("inf"), posinf=float("inf"))
    same_inf = torch.isinf(actual.double()) & (actual.double() == reference.double())
    bad = (diff > allowed) & ~same_inf
    if bool(bad.any()):
        _fail(actual, reference, diff, bad, f"allowed {allowed:.3g} ({rule})", what, context)


def _fail(actual, expected, diff, bad, rule, what, context):
    masked = torch.where(bad, diff, torch.zeros_like(diff))
    worst = tuple(int(i) for i in torch.unravel_index(masked.argmax(), diff.shape)) if diff.dim() else ()
    message = (
        f"{_where(context)}{what} mismatch: {int(bad.sum())} of {bad.numel()} elements off; "
        f"max abs error {float(diff.max()):.3g} at index {list(worst)} "
        f"(got {float(actual.double()[worst]):.6g}, expected {float(expected.double()[worst]):.6g}); {rule}"
    )
    pytest.fail(message, pytrace=False)


def _where(context):
    return f"[{context}] " if context else ""
