"""What both softmax suites compare against: softmax in fp64, and torch.softmax at the input's precision.

The rule of docs/numerics.md: a kernel's error against fp64 may be at most 2x the error of torch.softmax at the same
precision (plus a floor). A row of all -inf gives zeros, the assignment's convention.
"""

from __future__ import annotations

import torch

from grader import hints
from grader.numerics import assert_close, assert_close_lowp


def reference_softmax(x):
    """fp64 softmax over the last dim; a row of all -inf gives zeros (the assignment's convention)."""
    return torch.softmax(x.double(), dim=-1).nan_to_num(0.0)


OVERFLOW_CAUSE = ("exp overflowed: exp(x) is inf above x ~ 88.7 in fp32 (~ 11.1 in fp16) and inf / inf is NaN. "
                  "Subtract the row's max before exp: softmax(x) = softmax(x - max(x)), and every exponent "
                  "is then <= 0")
MASKED_ROW_CAUSE = ("a row of all -inf gave NaN: its max is -inf and x - max is -inf - (-inf) = NaN. While the "
                    "max is still -inf use 0 as the exponent base, and give such a row zeros")


NO_RESCALE_CAUSE = ("when a block raises the running max from m to m', the old l and acc were not multiplied by "
                    "exp(m - m'): the lecture's example then gives 6.5 / 2.5 = 2.6 (or 7/3 one score at a time) "
                    "instead of 17/6")
LSE_WITHOUT_MAX_CAUSE = ("lse came out as ln l, but l sums exp(s - m): the log-sum-exp is m + ln l (the max "
                         "must be added back)")
WORKED_EXAMPLE_WRONG_OUTPUTS = (2.6, 7.0 / 3.0)   # no rescale with blocks [0, ln2 | ln3] and [0 | ln2 | ln3]
WORKED_EXAMPLE_WRONG_LSE = 0.6931471805599453     # ln 2 = ln l: the max ln 3 not added back to ln 6


PADDING_LANES_CAUSE = ("each row came out scaled by one factor below 1, as if its sum had extra terms: the padding "
                       "lanes past the row's end were counted. A masked tl.load fills them with `other` (0 when "
                       "not given), and exp(0 - max) adds to the sum: load with other=float(\"-inf\"), whose exp is 0")


def padding_lanes_counted(actual, expected) -> bool:
    """Every row off by its own factor below 1 (a scale explains the error, to a tenth of it plus an ulp of
    the result), where the code can cause it: a Triton kernel with a masked tl.load padded with something
    else than -inf (grader.hints)."""
    if not hints.can_apply(hints.PADDING_LANES) or actual.numel() == 0:
        return False
    got, want = actual.double().reshape(-1, actual.shape[-1]), expected.double().reshape(-1, expected.shape[-1])
    live = want.abs().amax(dim=-1) > 0
    if not bool(live.any()) or not bool(torch.isfinite(got).all()):
        return False
    got, want = got[live], want[live]
    scale = (got * want).sum(-1, keepdim=True) / (want * want).sum(-1, keepdim=True)   # least squares, per row
    error, precision = float((got - want).abs().max()), torch.finfo(actual.dtype)
    explained = (got - scale * want).abs() <= 0.1 * error + precision.eps * want.abs() + precision.tiny
    noise = precision.eps / 4   # a row's scale is 1 within this when only rounding differs
    return error > 0 and bool(explained.all()) and bool((scale <= 1 + noise).all()) and bool((scale < 1 - noise).any())


def softmax_signatures(x, kernel=False):
    """The fingerprints of the classic softmax mistakes for input x (grader.diagnose_tensors); `kernel`
    adds those only a Triton kernel makes."""
    row_max = x.double().amax(dim=-1, keepdim=True) if x.numel() else x.double()
    masked_rows = row_max == float("-inf")
    large_rows = row_max > 11.0  # past fp16's exp range; fp32's is passed by the suites' 1000s

    def non_finite_in(rows):
        return lambda actual, expected: bool((~torch.isfinite(actual.double()) & rows).any())

    signatures = ((non_finite_in(masked_rows), MASKED_ROW_CAUSE), (non_finite_in(large_rows), OVERFLOW_CAUSE))
    return signatures + ((padding_lanes_counted, PADDING_LANES_CAUSE),) if kernel else signatures


def assert_softmax_close(actual, x, *, on_gpu, interpreted_kernel=False, context=""):
    """Softmax output vs fp64, allowed 2x the error of torch.softmax at x's precision (+ a floor)."""
    assert actual.dtype == x.dtype, f"[{context}] output dtype {actual.dtype}, expected {x.dtype}"
    assert tuple(actual.shape) == tuple(x.shape), f"[{context}] output shape {tuple(actual.shape)}"
    reference = reference_softmax(x)
    signatures = softmax_signatures(x, kernel=interpreted_kernel)
    if interpreted_kernel and x.dtype == torch.bfloat16 and not on_gpu:
        # Triton's CPU interpreter truncates fp32 -> bf16 (the GPU rounds): allow one bf16 ulp (2^-7 relative)
        assert_close(actual, reference, atol=1e-6, rtol=2.0**-7, what="softmax", context=context,
                     signatures=signatures)
        return
    naive = torch.softmax(x, dim=-1).nan_to_num(0.0)
    assert_close_lowp(actual, reference, naive, factor=2.0, floor=1e-6, what="softmax", context=context,
                      signatures=signatures)
