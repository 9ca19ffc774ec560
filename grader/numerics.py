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

from grader import hints

OUTPUT_FACTOR = 2.0
GRADIENT_FACTOR = 3.0
# The floor of the low-precision rule in units of the result dtype's eps times the result's largest
# magnitude: a correct kernel rounds its output once (half an ulp), so it stays under a quarter of the
# bound, while the naive yardstick alone can land within an ulp of it (a verdict left to the draw).
ULP_FLOOR = 2.0
# Relative errors (error / largest |reference|) that name their cause: a float32 result off by about
# TF32's eps (2^-10) was multiplied in TF32; off by about the inputs' eps it was accumulated in them.
TF32_EPS = 2.0 ** -10
# TF32 keeps 10 of float32's 23 mantissa bits: the tensor cores drop the low 13 of each operand.
TF32_DROPPED_BITS = 13


def max_abs_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """Largest |actual - reference| over finite and non-finite entries alike (NaN counts as inf)."""
    diff = (actual.double() - reference.double()).abs()
    same_inf = torch.isinf(actual) & torch.isinf(reference) & (actual == reference)
    diff = torch.where(same_inf, torch.zeros_like(diff), diff)
    if diff.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf")).max())


def assert_close_lowp(actual, reference, naive, *, factor: float = OUTPUT_FACTOR, floor: float = 1e-5,
                      ulps: float = 0.0, input_dtype=None, what: str = "output", context: str = "",
                      signatures=(), tf32_naive=None) -> None:
    """Pass when |actual - reference| <= factor * |naive - reference| + floor + ulps * eps * max|reference|
    (max over elements; eps is that of `actual`'s dtype, so `ulps` sets a floor in units of the result's ulp).

    `reference` is the computation in fp32 or fp64; `naive` is the same computation done plainly in
    PyTorch at the low precision under test. `input_dtype` (the inputs' dtype, when it differs from the
    result's) lets a failure say when its size matches a known cause (see `error_signature`);
    `signatures` (grader.diagnose_tensors) name known mistakes by their fingerprints.
    `tf32_naive` (float32 inputs only): the computation with every product's operands cut to TF32. The
    bound is then the larger of the float32 one and the one TF32 products allow (the same rule, with
    TF32's eps in the floor): TF32 has a check of its own, so the other checks set it aside.
    """
    _check_shapes(actual, reference, what, context)
    allowed, scale = lowp_allowed(actual.dtype, reference, naive, factor=factor, floor=floor, ulps=ulps,
                                  what=what, context=context, tf32_naive=tf32_naive)
    rule = f"{factor:g} x naive low-precision error + {floor:g}"
    if ulps:
        rule += f" + {ulps:g} ulp of {_dtype_name(actual.dtype)} at |{what}| = {scale:.3g}"
    if tf32_naive is not None:
        rule += ", or the same with TF32 products (they are judged by the fp32 precision check)"
    _fail_if_above(actual, reference, allowed, rule, what, context,
                   note=lambda error: error_signature(error, scale, actual.dtype, input_dtype or actual.dtype),
                   signatures=signatures)


def lowp_allowed(result_dtype, reference, naive, *, factor: float = OUTPUT_FACTOR, floor: float = 1e-5,
                 ulps: float = 0.0, what: str = "output", context: str = "",
                 tf32_naive=None) -> tuple[float, float]:
    """(the largest error `assert_close_lowp` allows, max |reference|): the rule in one place, so a
    seed sweep can measure how far inside the bound a correct implementation stays."""
    scale = _largest_finite(reference)
    allowed = factor * _yardstick_error(naive, reference, what, context) + floor + ulps * _eps(result_dtype) * scale
    if tf32_naive is not None:
        tf32_error = _yardstick_error(tf32_naive, reference, what, context)
        allowed = max(allowed, factor * tf32_error + floor + ulps * TF32_EPS * scale)
    return allowed, scale


def _yardstick_error(naive, reference, what, context) -> float:
    error = max_abs_error(naive.to(reference.dtype), reference)
    if not math.isfinite(error):
        # An overflowing yardstick would allow anything, NaN included: refuse to judge with it.
        raise ValueError(f"{_where(context)}{what}: the naive low-precision result is not finite, so it "
                         "cannot set a tolerance; choose inputs the naive computation survives")
    return error


def truncate_to_tf32(tensor: torch.Tensor) -> torch.Tensor:
    """float32 values with the low 13 mantissa bits cleared: what a tensor core multiplies in TF32 (the
    hardware truncates or rounds; truncation is the larger error, so a yardstick built on it covers both)."""
    bits = tensor.detach().float().contiguous().view(torch.int32)
    return (bits & -(1 << TF32_DROPPED_BITS)).view(torch.float32)


def error_signature(error: float, scale: float, result_dtype, input_dtype) -> str:
    """A sentence naming the likely cause when an error's size matches a known signature and the cause
    can apply here (grader.hints: TF32 only on a GPU for a kernel with tl.dot), else ""."""
    if not math.isfinite(error) or scale <= 0 or error <= 0:
        return ""
    relative = error / scale
    if result_dtype == torch.float32 and input_dtype == torch.float32 and TF32_EPS / 8 <= relative <= TF32_EPS * 8:
        if not hints.can_apply(hints.TF32):
            return ""
        return ("This error is TF32-sized (about 1e-3 relative): on a GPU, tl.dot on float32 inputs multiplies "
                "in TF32 unless you pass input_precision=\"ieee\"; fp32 checks require IEEE fp32 products")
    if input_dtype in (torch.float16, torch.bfloat16):
        eps = _eps(input_dtype)
        name = _dtype_name(input_dtype)
        if result_dtype == torch.float32 and eps / 8 <= relative <= eps * 64:
            return (f"This error is the size of {name} rounding: keep the running max, the running sum and "
                    f"lse in float32 (compute in float32, not in the inputs' {name})")
        if result_dtype == input_dtype and eps <= relative <= eps * 64 and hints.can_apply(hints.LOW_PRECISION_SUM):
            return (f"This error is several {name} ulps: accumulate in float32 and round to {name} once, "
                    "when storing the result")
    return ""


def _eps(dtype) -> float:
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _largest_finite(reference) -> float:
    finite = reference.double()[torch.isfinite(reference.double())]
    return float(finite.abs().max()) if finite.numel() else 0.0


def assert_close(actual, expected, *, atol: float, rtol: float = 0.0, what: str = "output",
                 context: str = "", signatures=()) -> None:
    """Elementwise |actual - expected| <= atol + rtol * |expected|, with a readable failure; `signatures`
    (grader.diagnose_tensors) name the likely cause when a known mistake's fingerprint matches."""
    _check_shapes(actual, expected, what, context)
    actual_d, expected_d = actual.double(), expected.double()
    # Where expected is not finite, rtol * |expected| is inf or NaN: those entries are judged apart.
    bound = atol + rtol * torch.nan_to_num(expected_d.abs(), nan=0.0, posinf=0.0)
    diff = torch.nan_to_num((actual_d - expected_d).abs(), nan=float("inf"), posinf=float("inf"))
    bad = _off(actual_d, expected_d, diff, bound)
    if bool(bad.any()):
        _fail(actual, expected, diff, bad, f"atol={atol:g}, rtol={rtol:g}", what, context, signatures)


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


def _fail_if_above(actual, reference, allowed, rule, what, context, note=None, signatures=()):
    diff = torch.nan_to_num((actual.double() - reference.double()).abs(), nan=float("inf"), posinf=float("inf"))
    bad = _off(actual.double(), reference.double(), diff, allowed)
    if bool(bad.any()):
        hint = note(float(torch.where(bad, diff, 0.0).max())) if note else ""
        _fail(actual, reference, diff, bad, f"allowed {allowed:.3g} ({rule})" + (f". {hint}" if hint else ""),
              what, context, signatures)


def _off(actual, expected, diff, bound):
    """Elements out of bound. A non-finite expected value must be matched exactly (an infinity by the
    same infinity, NaN by NaN); NaN in actual passes nowhere else. Comparisons with NaN are False, so
    `diff > bound` alone would let them through."""
    exact = ~torch.isfinite(expected)
    matched = (actual == expected) | (torch.isnan(actual) & torch.isnan(expected))
    within = (diff <= bound) & ~torch.isnan(actual)
    return torch.where(exact, ~matched, ~within)


def _fail(actual, expected, diff, bad, rule, what, context, signatures=()):
    from grader.diagnose_tensors import explain

    masked = torch.where(bad, diff, torch.zeros_like(diff))
    worst = tuple(int(i) for i in torch.unravel_index(masked.argmax(), diff.shape)) if diff.dim() else ()
    message = (
        f"{_where(context)}{what} mismatch: {int(bad.sum())} of {bad.numel()} elements off "
        f"(shape {tuple(actual.shape)}, {str(actual.dtype).replace('torch.', '')}); "
        f"max abs error {float(diff.max()):.3g} at index {list(worst)} "
        f"(got {float(actual.double()[worst]):.6g}, expected {float(expected.double()[worst]):.6g}); {rule}"
    )
    non_finite = int((~torch.isfinite(actual.double()) & torch.isfinite(expected.double())).sum())
    if non_finite:
        message += f"; {non_finite} of them inf/NaN where the expected value is finite"
    cause = explain(actual, expected, signatures)
    if cause:
        message += f"\nLikely cause: {cause}"
    pytest.fail(message, pytrace=False)


def _where(context):
    return f"[{context}] " if context else ""
