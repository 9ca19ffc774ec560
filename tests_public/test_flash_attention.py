"""Public tests for the `flash_attention` problem: the tiled PyTorch forward, the Triton kernels, backward.

The lecture's online-softmax worked example as attention: one query q = [1] (d = 1, so the softmax scale
1/sqrt(d) is 1), keys [0, ln2, ln3], values [1, 2, 4]. The scores are [0, ln2, ln3], the softmax is
[1/6, 2/6, 3/6], so o = (1 + 4 + 12) / 6 = 17/6 and lse = ln(1 + 2 + 3) = ln 6.

Every other comparison is against attention computed in fp64 (`grader.references.attention`), allowing 2x (outputs)
or 3x (gradients) the error of the same attention computed plainly in PyTorch at the dtype under test
(`naive_attention`), plus a floor of a few ulps of the result; lse must be as accurate as float32 attention.

Core checks use tile-aligned lengths (multiples of 64), n_q = n_k and the lecture's dtypes (float32,
bfloat16); the *_shapes checks add ragged lengths, n_q != n_k and float16. Each case is its own test,
so a crash on one shape costs that case only.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from grader.diagnose_tensors import equals
from grader.references.attention import (
    assert_backward_matches,
    assert_forward_matches,
    attention_forward_backward,
    random_qkv,
)
from grader.references.softmax import (
    LSE_WITHOUT_MAX_CAUSE,
    NO_RESCALE_CAUSE,
    WORKED_EXAMPLE_WRONG_LSE,
    WORKED_EXAMPLE_WRONG_OUTPUTS,
)
from grader.testing import assert_close, randn

NO_RESCALE = equals(WORKED_EXAMPLE_WRONG_OUTPUTS, NO_RESCALE_CAUSE, first_only=True)
LSE_WITHOUT_MAX = equals(WORKED_EXAMPLE_WRONG_LSE, LSE_WITHOUT_MAX_CAUSE)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
CORE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
CAUSAL = {"full": False, "causal": True}


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
    assert_close(o, torch.tensor([[[[17.0 / 6.0]]]]), atol=1e-5, what="o", context=f"k_tile={k_tile}",
                 signatures=(NO_RESCALE,))
    assert_close(lse, torch.tensor([[[math.log(6.0)]]]), atol=1e-5, what="lse = ln 6", context=f"k_tile={k_tile}",
                 signatures=(LSE_WITHOUT_MAX,))


@pytest.mark.check("flash_attention.triton.worked_example")
@pytest.mark.triton
def test_triton_forward_worked_example_gives_17_over_6(impl, device):
    # one query and three keys: shorter than any tile, so this needs the boundary masks
    q, k, v = (t.to(device) for t in worked_example(d=16))
    o, lse = impl.flash_attention.flash_attention_forward(q, k, v, False)
    expected = torch.zeros(1, 1, 1, 16)
    expected[..., 0] = 17.0 / 6.0
    assert_close(o.float().cpu(), expected, atol=1e-5, what="o", context="worked example padded to d=16",
                 signatures=(NO_RESCALE,))
    assert_close(lse.cpu(), torch.tensor([[[math.log(6.0)]]]), atol=1e-5, what="lse = ln 6",
                 context="worked example padded to d=16", signatures=(LSE_WITHOUT_MAX,))


# ------------------------------------------------------------------ cases


def core_shape(on_gpu, backward=False):
    """q shape of the core cases: n a multiple of 64, n_q = n_k; small in the interpreter."""
    if backward:
        return (2, 2, 256, 64) if on_gpu else (1, 2, 64, 16)
    return (2, 4, 256, 64) if on_gpu else (1, 2, 64, 32)


# name -> (q shape and n_k on CPU, the same on a GPU, dtype, causal)
FORWARD_SHAPES = {
    "ragged_causal_fp32": (((2, 1, 40, 32), 40), ((2, 4, 300, 64), 300), torch.float32, True),
    "rectangular_bf16": (((1, 1, 24, 32), 50), ((1, 3, 200, 128), 333), torch.bfloat16, False),
    "aligned_fp16": (((1, 2, 64, 32), 64), ((2, 4, 256, 64), 256), torch.float16, True),
    "ragged_fp16": (((1, 1, 48, 16), 33), ((2, 2, 300, 64), 129), torch.float16, False),
}
BACKWARD_SHAPES = {
    "ragged_causal_fp32": (((1, 2, 40, 16), 40), ((2, 2, 300, 64), 300), torch.float32, True),
    "rectangular_bf16": (((2, 1, 24, 32), 36), ((1, 3, 190, 128), 260), torch.bfloat16, False),
    "aligned_fp16": (((1, 2, 64, 16), 64), ((2, 2, 256, 64), 256), torch.float16, True),
}


def shape_case(table, name, on_gpu):
    cpu, gpu, dtype, is_causal = table[name]
    shape_q, n_k = gpu if on_gpu else cpu
    return shape_q, n_k, dtype, is_causal


# ------------------------------------------------------------------ forward on random inputs


def check_forward(impl, function, shape_q, n_k, dtype, is_causal, device, gen):
    q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
    args = (q, k, v, is_causal, 16, 16) if function == "flash_attention_forward_pytorch" else (q, k, v, is_causal)
    o, lse = getattr(impl.flash_attention, function)(*args)
    assert_forward_matches(o, lse, q, k, v, is_causal)


@pytest.mark.check("flash_attention.pytorch.forward")
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
@pytest.mark.parametrize("dtype", CORE_DTYPES.values(), ids=CORE_DTYPES.keys())
def test_pytorch_forward_matches_fp64_reference(impl, device, on_gpu, gen, dtype, is_causal):
    shape_q = core_shape(on_gpu)
    check_forward(impl, "flash_attention_forward_pytorch", shape_q, shape_q[-2], dtype, is_causal, device, gen)


@pytest.mark.check("flash_attention.pytorch.forward_shapes")
@pytest.mark.parametrize("case", FORWARD_SHAPES)
def test_pytorch_forward_handles_ragged_rectangular_and_fp16(impl, device, on_gpu, gen, case):
    check_forward(impl, "flash_attention_forward_pytorch", *shape_case(FORWARD_SHAPES, case, on_gpu), device, gen)


@pytest.mark.check("flash_attention.triton.forward")
@pytest.mark.triton
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
@pytest.mark.parametrize("dtype", CORE_DTYPES.values(), ids=CORE_DTYPES.keys())
def test_triton_forward_matches_fp64_reference(impl, device, on_gpu, gen, dtype, is_causal):
    shape_q = core_shape(on_gpu)
    check_forward(impl, "flash_attention_forward", shape_q, shape_q[-2], dtype, is_causal, device, gen)


@pytest.mark.check("flash_attention.triton.forward_shapes")
@pytest.mark.triton
@pytest.mark.parametrize("case", FORWARD_SHAPES)
def test_triton_forward_handles_ragged_rectangular_and_fp16(impl, device, on_gpu, gen, case):
    check_forward(impl, "flash_attention_forward", *shape_case(FORWARD_SHAPES, case, on_gpu), device, gen)


# ------------------------------------------------------------------ causal masking


def check_row0_sees_only_key0(impl, function, device, gen):
    q, k, v = random_qkv((2, 1, 64, 16), 64, torch.float32, device, gen)
    o_causal, lse_causal = getattr(impl.flash_attention, function)(q, k, v, True)
    # row 0 has one visible key: softmax weight 1, so o[0] = v[0] and lse[0] = q0.k0 / sqrt(d)
    assert_close(o_causal[..., 0, :], v[..., 0, :], atol=1e-6, what="o[..., 0, :] vs v[..., 0, :]",
                 context=function)
    score00 = (q[..., 0, :] * k[..., 0, :]).sum(-1) / math.sqrt(16)
    assert_close(lse_causal[..., 0], score00, atol=1e-5, what="lse[..., 0]", context=function)
    o_full, _ = getattr(impl.flash_attention, function)(q, k, v, False)
    gap = (o_causal[..., :-1, :] - o_full[..., :-1, :]).abs().max().item()
    assert gap > 1e-3, f"[{function}] causal and non-causal outputs agree (gap {gap:.2g}): is the mask applied?"


@pytest.mark.check("flash_attention.pytorch.causal")
def test_pytorch_causal_row0_sees_only_key0(impl, device, gen):
    check_row0_sees_only_key0(impl, "flash_attention_forward_pytorch", device, gen)


@pytest.mark.check("flash_attention.triton.causal")
@pytest.mark.triton
def test_triton_causal_row0_sees_only_key0(impl, device, gen):
    check_row0_sees_only_key0(impl, "flash_attention_forward", device, gen)


# ------------------------------------------------------------------ backward


def check_backward(impl, function_name, shape_q, n_k, dtype, is_causal, device, gen):
    q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
    grad_o = randn(shape_q, dtype=dtype, device=device, gen=gen)
    o, *grads = impl.run(attention_forward_backward, function_name, q, k, v, grad_o, is_causal)
    assert_forward_matches(o, None, q, k, v, is_causal)
    assert_backward_matches(grads, q, k, v, grad_o, is_causal)


@pytest.mark.check("flash_attention.pytorch.backward")
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
@pytest.mark.parametrize("dtype", CORE_DTYPES.values(), ids=CORE_DTYPES.keys())
def test_pytorch_backward_matches_autograd_reference(impl, device, on_gpu, gen, dtype, is_causal):
    shape_q = core_shape(on_gpu, backward=True)
    check_backward(impl, "FlashAttentionPyTorch", shape_q, shape_q[-2], dtype, is_causal, device, gen)


@pytest.mark.check("flash_attention.pytorch.backward_shapes")
@pytest.mark.parametrize("case", BACKWARD_SHAPES)
def test_pytorch_backward_handles_ragged_rectangular_and_fp16(impl, device, on_gpu, gen, case):
    check_backward(impl, "FlashAttentionPyTorch", *shape_case(BACKWARD_SHAPES, case, on_gpu), device, gen)


@pytest.mark.check("flash_attention.triton.backward")
@pytest.mark.triton
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
@pytest.mark.parametrize("dtype", CORE_DTYPES.values(), ids=CORE_DTYPES.keys())
def test_triton_backward_matches_autograd_reference(impl, device, on_gpu, gen, dtype, is_causal):
    shape_q = core_shape(on_gpu, backward=True)
    check_backward(impl, "flash_attention", shape_q, shape_q[-2], dtype, is_causal, device, gen)


@pytest.mark.check("flash_attention.triton.backward_shapes")
@pytest.mark.triton
@pytest.mark.parametrize("case", BACKWARD_SHAPES)
def test_triton_backward_handles_ragged_rectangular_and_fp16(impl, device, on_gpu, gen, case):
    check_backward(impl, "flash_attention", *shape_case(BACKWARD_SHAPES, case, on_gpu), device, gen)
