"""What both attention suites compare against: fp64 and naive references, and the worker-side scenario.

`reference_attention` materialises the scores in fp64 (fine at test sizes); `naive_attention` is the
same computation done plainly at the inputs' dtype, the yardstick of the error rule in docs/numerics.md (2x for
outputs, 3x for gradients). `attention_forward_backward` runs where the student's code lives.

One root cause, one charge: a Triton kernel's float32 checks set TF32 products aside (`allow_tf32`: the
bound a TF32 product allows, from `tf32_attention`), since `flash_attention.triton.fp32_ieee` judges
them; and values are compared after casting to the dtypes the contract names (o in the inputs' dtype,
lse float32), since the output_dtype checks judge the dtypes (`assert_output_dtype`).
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
    truncate_to_tf32,
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


def _tf32(t):
    """t cut to TF32 as a tensor core reads it, in fp64 for the exact products that follow."""
    return truncate_to_tf32(t).double()


def tf32_attention(q, k, v, grad_o, is_causal):
    """(o, lse, dq, dk, dv) in fp64 from float32 inputs, every product's operands cut to TF32 as in a
    kernel whose tl.dot multiplies in TF32 (QK^T, PV; dO V^T, P^T dO, dS K, dS^T Q): the yardstick of
    the bound TF32 products allow. grad_o may be None (forward only: the gradients are then None)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = _tf32(q) @ _tf32(k).transpose(-1, -2) * scale
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.exp(scores - lse[..., None])
    o = _tf32(p) @ _tf32(v)
    if grad_o is None:
        return o, lse, None, None, None
    do = _tf32(grad_o)
    dv = _tf32(p).transpose(-1, -2) @ do
    ds = p * (do @ _tf32(v).transpose(-1, -2) - (grad_o.double() * o).sum(-1, keepdim=True))
    dq = _tf32(ds) @ _tf32(k) * scale
    dk = _tf32(ds).transpose(-1, -2) @ _tf32(q) * scale
    return o, lse, dq, dk, dv


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


def forward_comparisons(o, lse, q, k, v, is_causal, allow_tf32=False):
    """[(what, actual, fp64 reference, naive yardstick, factor, TF32 yardstick or None)] for o and (unless
    None) lse; actual is cast to the contract's dtype (o like q, lse float32).

    o's yardstick is attention at the inputs' dtype. lse is float32 by contract (the running max and
    sum are kept in float32), so its yardstick is attention computed in float32 from the same inputs:
    an lse accumulated in float16 or bfloat16 fails on every draw instead of now and then.
    `allow_tf32` (float32 inputs): also allow the error TF32 products make.
    """
    ref_o, ref_lse = reference_attention(q, k, v, is_causal)
    tf32 = tf32_attention(q, k, v, None, is_causal) if allow_tf32 and q.dtype == torch.float32 else None
    comparisons = [("o", _as(o, q.dtype), ref_o, naive_attention(q, k, v, is_causal)[0], OUTPUT_FACTOR,
                    tf32[0] if tf32 else None)]
    if lse is not None:
        naive_lse = naive_attention(q.float(), k.float(), v.float(), is_causal)[1]
        comparisons.append(("lse", _as(lse, torch.float32), ref_lse, naive_lse, OUTPUT_FACTOR,
                            tf32[1] if tf32 else None))
    return comparisons


def backward_comparisons(grads, q, k, v, grad_o, is_causal, allow_tf32=False):
    """[(what, actual, fp64 autograd, autograd at the inputs' dtype, factor, TF32 yardstick or None)] for
    dq, dk, dv, each cast to its input's dtype."""
    refs = reference_grads(q.double(), k.double(), v.double(), grad_o, is_causal, reference_attention)
    naives = reference_grads(q, k, v, grad_o, is_causal, naive_attention)
    tf32 = tf32_attention(q, k, v, grad_o, is_causal)[2:] if allow_tf32 and q.dtype == torch.float32 \
        else (None, None, None)
    return [(name, _as(got, q.dtype), ref, naive, GRADIENT_FACTOR, tf32_grad)
            for name, got, ref, naive, tf32_grad in zip(("dq", "dk", "dv"), grads, refs, naives, tf32)]


def _as(actual, dtype):
    """actual in `dtype` for the value comparison (its own dtype is judged by assert_output_dtype)."""
    return actual.to(dtype) if isinstance(actual, torch.Tensor) and actual.is_floating_point() else actual


def error_ratios(comparisons, input_dtype):
    """{what: max error / allowed error}: 1.0 is the edge of the bound (the seed sweep wants <= 0.5)."""
    ratios = {}
    for what, actual, reference, naive, factor, tf32 in comparisons:
        allowed, _ = lowp_allowed(actual.dtype, reference, naive, factor=factor, ulps=_ulps(factor),
                                  tf32_naive=tf32)
        ratios[what] = max_abs_error(actual, reference) / allowed
    return ratios


def assert_output_dtype(o, q, is_causal, what="o"):
    """o has the inputs' dtype: the one check that judges it (the value checks compare after a cast)."""
    context = describe(q, q, is_causal)
    assert isinstance(o, torch.Tensor), f"[{context}] {what}: expected a tensor, got {type(o).__name__}"
    assert o.dtype == q.dtype, (f"[{context}] {what} has dtype {o.dtype}, expected {q.dtype} (the inputs' dtype: "
                                "accumulate in float32, then round once to the inputs' dtype when storing)")


def assert_forward_matches(o, lse, q, k, v, is_causal, allow_tf32=False):
    """o within 2x the naive error at the inputs' dtype, lse (unless None) within 2x float32's; both
    vs fp64, plus a floor of ULP_FLOOR ulps of the result (grader.numerics). Values are compared in the
    contract's dtypes; `allow_tf32` sets TF32 products aside for float32 inputs."""
    context = describe(q, k, is_causal)
    assert isinstance(o, torch.Tensor), f"[{context}] o: expected a tensor, got {type(o).__name__}"
    assert tuple(o.shape) == tuple(q.shape), f"[{context}] o has shape {tuple(o.shape)}, expected q's"
    _assert_all(forward_comparisons(o, lse, q, k, v, is_causal, allow_tf32), q.dtype, context)


def assert_backward_matches(grads, q, k, v, grad_o, is_causal, allow_tf32=False):
    """dq, dk, dv within 3x the naive autograd error at the inputs' dtype (both vs fp64 autograd)."""
    context = describe(q, k, is_causal)
    for name, got in zip(("dq", "dk", "dv"), grads):
        assert isinstance(got, torch.Tensor), f"[{context}] {name} is {got!r}: no gradient reached the input"
    _assert_all(backward_comparisons(grads, q, k, v, grad_o, is_causal, allow_tf32), q.dtype, context)


def _assert_all(comparisons, input_dtype, context):
    for what, actual, reference, naive, factor, tf32 in comparisons:
        assert_close_lowp(actual, reference, naive, factor=factor, ulps=_ulps(factor), input_dtype=input_dtype,
                          what=what, context=context, tf32_naive=tf32)


def _ulps(factor):
    """Outputs round once (ULP_FLOOR); a gradient chains three rounded products, so twice that."""
    return ULP_FLOOR if factor == OUTPUT_FACTOR else 2 * ULP_FLOOR
