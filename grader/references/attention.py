"""What both attention suites compare against: fp64 and naive references, and the worker-side scenario.

`reference_attention` materialises the scores in fp64 (fine at test sizes); `naive_attention` is the
same computation done plainly at the inputs' dtype, the yardstick of the error rule in docs/numerics.md (2x for
outputs, 3x for gradients). `attention_forward_backward` runs where the student's code lives.
"""

from __future__ import annotations

import math

import torch

from grader.numerics import (
    GRADIENT_FACTOR,
    OUTPUT_FACTOR,
    ULP_FLOOR,
    assert_close_lowp,
    lowp_allowed,
    max_abs_error,
    randn,
)


def causal_mask(n_q, n_k, device):
    """True where query i may see key j (j <= i)."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def reference_attention(q, k, v, is_causal):
    """(o, lse) in fp64: softmax(q k^T / sqrt(d)) v, materialising the scores."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


def naive_attention(q, k, v, is_causal):
    """(o, lse) computed plainly at the inputs' dtype: the error budget's yardstick."""
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


def reference_grads(q, k, v, grad_o, is_causal, attention):
    """(dq, dk, dv) from autograd through `attention` at the inputs' dtype (pass fp64 inputs for fp64)."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    attention(q, k, v, is_causal)[0].backward(grad_o.to(q.dtype))
    return q.grad, k.grad, v.grad


def attention_function(modules, function_name):
    """The student's `function_name`: an autograd Function (called through .apply) or a function."""
    attention = getattr(modules.flash_attention, function_name)
    return getattr(attention, "apply", attention)


def attention_forward_backward(modules, function_name, q, k, v, grad_o, is_causal):
    """Worker side: o = <function_name>(q, k, v, is_causal); o.backward(grad_o); return o and the grads."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = attention_function(modules, function_name)(q, k, v, is_causal)
    o.backward(grad_o)
    return o.detach(), q.grad, k.grad, v.grad


def random_qkv(shape_q, n_k, dtype, device, gen, scale=1.0):
    """q of shape_q = (..., n_q, d); k and v with n_k keys."""
    shape_kv = (*shape_q[:-2], n_k, shape_q[-1])
    return tuple(randn(shape, dtype=dtype, device=device, gen=gen, scale=scale)
                 for shape in (shape_q, shape_kv, shape_kv))


def describe(q, k, is_causal):
    return f"q {tuple(q.shape)} k {tuple(k.shape)} {str(q.dtype).removeprefix('torch.')} causal={is_causal}"


def forward_comparisons(o, lse, q, k, v, is_causal):
    """[(what, actual, fp64 reference, naive yardstick, factor)] for o and (unless None) lse.

    o's yardstick is attention at the inputs' dtype. lse is float32 by contract (the running max and
    sum are kept in float32), so its yardstick is attention computed in float32 from the same inputs:
    an lse accumulated in float16 or bfloat16 fails on every draw instead of now and then.
    """
    ref_o, ref_lse = reference_attention(q, k, v, is_causal)
    comparisons = [("o", o, ref_o, naive_attention(q, k, v, is_causal)[0], OUTPUT_FACTOR)]
    if lse is not None:
        naive_lse = naive_attention(q.float(), k.float(), v.float(), is_causal)[1]
        comparisons.append(("lse", lse, ref_lse, naive_lse, OUTPUT_FACTOR))
    return comparisons


def backward_comparisons(grads, q, k, v, grad_o, is_causal):
    """[(what, actual, fp64 autograd, autograd at the inputs' dtype, factor)] for dq, dk, dv."""
    refs = reference_grads(q.double(), k.double(), v.double(), grad_o, is_causal, reference_attention)
    naives = reference_grads(q, k, v, grad_o, is_causal, naive_attention)
    return [(name, got, ref, naive, GRADIENT_FACTOR)
            for name, got, ref, naive in zip(("dq", "dk", "dv"), grads, refs, naives)]


def error_ratios(comparisons, input_dtype):
    """{what: max error / allowed error}: 1.0 is the edge of the bound (the seed sweep wants <= 0.5)."""
    ratios = {}
    for what, actual, reference, naive, factor in comparisons:
        allowed, _ = lowp_allowed(actual.dtype, reference, naive, factor=factor, ulps=_ulps(factor))
        ratios[what] = max_abs_error(actual, reference) / allowed
    return ratios


def assert_forward_matches(o, lse, q, k, v, is_causal):
    """o within 2x the naive error at the inputs' dtype, lse (unless None) within 2x float32's; both
    vs fp64, plus a floor of ULP_FLOOR ulps of the result (grader.numerics)."""
    context = describe(q, k, is_causal)
    assert o.dtype == q.dtype, f"[{context}] o has dtype {o.dtype}, expected {q.dtype}"
    assert tuple(o.shape) == tuple(q.shape), f"[{context}] o has shape {tuple(o.shape)}, expected q's"
    if lse is not None:
        assert lse.dtype == torch.float32, f"[{context}] lse has dtype {lse.dtype}, expected torch.float32"
    _assert_all(forward_comparisons(o, lse, q, k, v, is_causal), q.dtype, context)


def assert_backward_matches(grads, q, k, v, grad_o, is_causal):
    """dq, dk, dv within 3x the naive autograd error at the inputs' dtype (both vs fp64 autograd)."""
    context = describe(q, k, is_causal)
    for name, got in zip(("dq", "dk", "dv"), grads):
        assert got.dtype == q.dtype, f"[{context}] {name} has dtype {got.dtype}, expected {q.dtype}"
    _assert_all(backward_comparisons(grads, q, k, v, grad_o, is_causal), q.dtype, context)


def _assert_all(comparisons, input_dtype, context):
    for what, actual, reference, naive, factor in comparisons:
        assert_close_lowp(actual, reference, naive, factor=factor, ulps=_ulps(factor), input_dtype=input_dtype,
                          what=what, context=context)


def _ulps(factor):
    """Outputs round once (ULP_FLOOR); a gradient chains three rounded products, so twice that."""
    return ULP_FLOOR if factor == OUTPUT_FACTOR else 2 * ULP_FLOOR
