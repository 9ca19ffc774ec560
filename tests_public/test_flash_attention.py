"""Public tests for the `flash_attention` problem: the tiled PyTorch forward, the Triton kernels, backward.

The lecture's worked example (S3 §7.8) as attention: one query q = [1] (d = 1, so the softmax scale
1/sqrt(d) is 1), keys [0, ln2, ln3], values [1, 2, 4]. The scores are [0, ln2, ln3], the softmax is
[1/6, 2/6, 3/6], so o = (1 + 4 + 12) / 6 = 17/6 and lse = ln(1 + 2 + 3) = ln 6.

Every other comparison is against attention computed in fp64 (`reference_attention`), allowing 2x (outputs)
or 3x (gradients) the error of the same attention computed plainly in PyTorch at the dtype under test
(`naive_attention`).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from grader.testing import GRADIENT_FACTOR, OUTPUT_FACTOR, assert_close, assert_close_lowp, randn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


# ------------------------------------------------------------------ references and scenarios


def causal_mask(n_q, n_k, device):
    """True where query i may see key j (j <= i)."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril()


def reference_attention(q, k, v, is_causal):
    """(o, lse) in fp64: softmax(q k^T / sqrt(d)) v, materialising the scores (fine at test sizes)."""
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


def attention_forward_backward(modules, function_name, q, k, v, grad_o, is_causal):
    """Worker side: o = <function_name>(q, k, v, is_causal); o.backward(grad_o); return o and the grads.

    `function_name` is an autograd Function class (called through .apply) or a plain function.
    """
    attention = getattr(modules.flash_attention, function_name)
    attention = getattr(attention, "apply", attention)
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = attention(q, k, v, is_causal)
    o.backward(grad_o)
    return o.detach(), q.grad, k.grad, v.grad


def random_qkv(shape_q, n_k, dtype, device, gen):
    """q of shape_q = (..., n_q, d); k and v with n_k keys."""
    shape_kv = (*shape_q[:-2], n_k, shape_q[-1])
    return tuple(randn(shape, dtype=dtype, device=device, gen=gen) for shape in (shape_q, shape_kv, shape_kv))


def describe(q, k, is_causal):
    return f"q {tuple(q.shape)} k {tuple(k.shape)} {str(q.dtype).removeprefix('torch.')} causal={is_causal}"


def assert_forward_matches(o, lse, q, k, v, is_causal):
    """o and lse (unless None) within 2x the naive low-precision error (both vs fp64)."""
    context = describe(q, k, is_causal)
    assert o.dtype == q.dtype, f"[{context}] o has dtype {o.dtype}, expected {q.dtype}"
    ref_o, ref_lse = reference_attention(q, k, v, is_causal)
    naive_o, naive_lse = naive_attention(q, k, v, is_causal)
    assert_close_lowp(o, ref_o, naive_o, factor=OUTPUT_FACTOR, what="o", context=context)
    if lse is not None:
        assert lse.dtype == torch.float32, f"[{context}] lse has dtype {lse.dtype}, expected torch.float32"
        assert_close_lowp(lse, ref_lse, naive_lse, factor=OUTPUT_FACTOR, what="lse", context=context)


def assert_backward_matches(grads, q, k, v, grad_o, is_causal):
    """dq, dk, dv within 3x of the naive low-precision autograd error (both vs fp64 autograd)."""
    context = describe(q, k, is_causal)
    refs = reference_grads(q.double(), k.double(), v.double(), grad_o, is_causal, reference_attention)
    naives = reference_grads(q, k, v, grad_o, is_causal, naive_attention)
    for name, got, ref, naive in zip(("dq", "dk", "dv"), grads, refs, naives):
        assert got.dtype == q.dtype, f"[{context}] {name} has dtype {got.dtype}, expected {q.dtype}"
        assert_close_lowp(got, ref, naive, factor=GRADIENT_FACTOR, what=name, context=context)


def worked_example(d=1):
    """The lecture's example as (q, k, v) of shape [1, 1, n, d]; d > 1 pads with zeros and scales q by
    sqrt(d), so the scores q.k / sqrt(d) stay [0, ln2, ln3]."""
    q = torch.tensor([[1.0]])
    k = torch.tensor([[0.0], [math.log(2.0)], [math.log(3.0)]])
    v = torch.tensor([[1.0], [2.0], [4.0]])
    q, k, v = (F.pad(t, (0, d - 1)).reshape(1, 1, -1, d) for t in (q * math.sqrt(d), k, v))
    return q, k, v


# ------------------------------------------------------------------ the worked example


@pytest.mark.check("flash_attention.pytorch.worked_example")
@pytest.mark.parametrize("k_tile", [1, 2, 3], ids=lambda t: f"k_tile{t}")
def test_pytorch_forward_worked_example_gives_17_over_6(impl, k_tile):
    q, k, v = worked_example()
    o, lse = impl.flash_attention.flash_attention_forward_pytorch(q, k, v, False, 1, k_tile)
    # 17/6 = 2.8333; forgetting to rescale the old terms when the max grows gives 6.5 / 2.5 = 2.6
    assert_close(o, torch.tensor([[[[17.0 / 6.0]]]]), atol=1e-5, what="o", context=f"k_tile={k_tile}")
    assert_close(lse, torch.tensor([[[math.log(6.0)]]]), atol=1e-5, what="lse = ln 6", context=f"k_tile={k_tile}")


@pytest.mark.check("flash_attention.triton.worked_example")
@pytest.mark.triton
def test_triton_forward_worked_example_gives_17_over_6(impl, device):
    q, k, v = (t.to(device) for t in worked_example(d=16))
    o, lse = impl.flash_attention.flash_attention_forward(q, k, v, False)
    expected = torch.zeros(1, 1, 1, 16)
    expected[..., 0] = 17.0 / 6.0
    assert_close(o.float().cpu(), expected, atol=1e-5, what="o", context="worked example padded to d=16")
    assert_close(lse.cpu(), torch.tensor([[[math.log(6.0)]]]), atol=1e-5, what="lse = ln 6",
                 context="worked example padded to d=16")


# ------------------------------------------------------------------ forward on random inputs


def forward_cases(on_gpu):
    """(q shape, n_k, causal): small in the interpreter, larger on a GPU; includes ragged lengths."""
    if on_gpu:
        return [((2, 4, 256, 64), 256, False), ((2, 4, 300, 64), 300, True), ((1, 3, 200, 128), 333, False)]
    return [((1, 2, 48, 16), 48, False), ((2, 1, 40, 32), 40, True), ((1, 1, 24, 32), 50, False)]


@pytest.mark.check("flash_attention.pytorch.forward")
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_pytorch_forward_matches_fp64_reference(impl, device, on_gpu, gen, dtype):
    for shape_q, n_k, is_causal in forward_cases(on_gpu):
        q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
        o, lse = impl.flash_attention.flash_attention_forward_pytorch(q, k, v, is_causal, 16, 16)
        assert_forward_matches(o, lse, q, k, v, is_causal)


@pytest.mark.check("flash_attention.triton.forward")
@pytest.mark.triton
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_triton_forward_matches_fp64_reference(impl, device, on_gpu, gen, dtype):
    for shape_q, n_k, is_causal in forward_cases(on_gpu):
        q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
        o, lse = impl.flash_attention.flash_attention_forward(q, k, v, is_causal)
        assert_forward_matches(o, lse, q, k, v, is_causal)


# ------------------------------------------------------------------ causal masking


@pytest.mark.check("flash_attention.causal")
@pytest.mark.parametrize("function", ["flash_attention_forward_pytorch",
                                      pytest.param("flash_attention_forward", marks=pytest.mark.triton)])
def test_causal_row0_sees_only_key0(impl, device, gen, function):
    q, k, v = random_qkv((2, 1, 40, 16), 40, torch.float32, device, gen)
    o_causal, lse_causal = getattr(impl.flash_attention, function)(q, k, v, True)
    # row 0 has one visible key: softmax weight 1, so o[0] = v[0] and lse[0] = q0.k0 / sqrt(d)
    assert_close(o_causal[..., 0, :], v[..., 0, :], atol=1e-6, what="o[..., 0, :] vs v[..., 0, :]",
                 context=function)
    score00 = (q[..., 0, :] * k[..., 0, :]).sum(-1) / math.sqrt(16)
    assert_close(lse_causal[..., 0], score00, atol=1e-5, what="lse[..., 0]", context=function)
    o_full, _ = getattr(impl.flash_attention, function)(q, k, v, False)
    gap = (o_causal[..., :-1, :] - o_full[..., :-1, :]).abs().max().item()
    assert gap > 1e-3, f"[{function}] causal and non-causal outputs agree (gap {gap:.2g}): is the mask applied?"


# ------------------------------------------------------------------ backward


def backward_cases(on_gpu):
    if on_gpu:
        return [((2, 2, 256, 64), 256, True), ((1, 3, 190, 128), 260, False)]
    return [((1, 2, 40, 16), 40, True), ((2, 1, 24, 32), 36, False)]


@pytest.mark.check("flash_attention.pytorch.backward")
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_pytorch_backward_matches_autograd_reference(impl, device, on_gpu, gen, dtype):
    for shape_q, n_k, is_causal in backward_cases(on_gpu):
        q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
        grad_o = randn(shape_q, dtype=dtype, device=device, gen=gen)
        o, *grads = impl.run(attention_forward_backward, "FlashAttentionPyTorch", q, k, v, grad_o, is_causal)
        assert_forward_matches(o, None, q, k, v, is_causal)
        assert_backward_matches(grads, q, k, v, grad_o, is_causal)


@pytest.mark.check("flash_attention.triton.backward")
@pytest.mark.triton
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_triton_backward_matches_autograd_reference(impl, device, on_gpu, gen, dtype):
    for shape_q, n_k, is_causal in backward_cases(on_gpu):
        q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
        grad_o = randn(shape_q, dtype=dtype, device=device, gen=gen)
        o, *grads = impl.run(attention_forward_backward, "flash_attention", q, k, v, grad_o, is_causal)
        assert_forward_matches(o, None, q, k, v, is_causal)
        assert_backward_matches(grads, q, k, v, grad_o, is_causal)
