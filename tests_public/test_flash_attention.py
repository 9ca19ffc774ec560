"""Public tests for the `flash_attention` problem: the tiled PyTorch forward, the Triton kernels, backward.

The lecture's worked example (S3 §7.8) as attention: one query q = [1] (d = 1, so the softmax scale
1/sqrt(d) is 1), keys [0, ln2, ln3], values [1, 2, 4]. The scores are [0, ln2, ln3], the softmax is
[1/6, 2/6, 3/6], so o = (1 + 4 + 12) / 6 = 17/6 and lse = ln(1 + 2 + 3) = ln 6.

Every other comparison is against attention computed in fp64 (`grader.references.attention`), allowing 2x (outputs)
or 3x (gradients) the error of the same attention computed plainly in PyTorch at the dtype under test
(`naive_attention`).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from grader.references.attention import (assert_backward_matches, assert_forward_matches,
                                        attention_forward_backward, random_qkv)
from grader.testing import assert_close, randn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


# ------------------------------------------------------------------ references and scenarios


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
