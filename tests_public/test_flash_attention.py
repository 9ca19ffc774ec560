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

One root cause, one charge: each of these causes has its own check, and the other checks set it aside.
- TF32 products on float32 inputs: `flash_attention.triton.fp32_ieee`; the other Triton checks allow the
  error a TF32 product makes (and still fail a wrong algorithm, whose error is far larger).
- The output's dtype: the `output_dtype` checks; the others compare values after casting o to q's dtype.
- The device of the PyTorch version's allocations: `flash_attention.pytorch.device` (CUDA inputs); its
  other checks run on CPU inputs, as CS336's tests of that version do.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from grader.diagnose_tensors import equals
from grader.numerics import OUTPUT_FACTOR, TF32_EPS, ULP_FLOOR, max_abs_error
from grader.references.attention import (
    assert_backward_matches,
    assert_forward_matches,
    assert_output_dtype,
    attention_forward_backward,
    random_qkv,
    reference_attention,
    tf32_attention,
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
PYTORCH_DEVICE = "cpu"   # the PyTorch version's value checks: CPU inputs on every machine (CS336 does the same)


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


def tf32_slack(q, k, v, is_causal):
    """(for o, for lse): how far TF32 products may move them, by the rule of grader.numerics."""
    exact, tf32 = reference_attention(q.cpu(), k.cpu(), v.cpu(), is_causal), tf32_attention(q.cpu(), k.cpu(), v.cpu(),
                                                                                             None, is_causal)
    return tuple(OUTPUT_FACTOR * max_abs_error(approx, ref) + ULP_FLOOR * TF32_EPS * float(ref.abs().max())
                 for approx, ref in zip(tf32[:2], exact))


@pytest.mark.check("flash_attention.triton.worked_example")
@pytest.mark.triton
def test_triton_forward_worked_example_gives_17_over_6(impl, device):
    # one query and three keys: shorter than any tile, so this needs the boundary masks
    q, k, v = (t.to(device) for t in worked_example(d=16))
    o, lse = impl.flash_attention.flash_attention_forward(q, k, v, False)
    expected = torch.zeros(1, 1, 1, 16)
    expected[..., 0] = 17.0 / 6.0
    slack_o, slack_lse = tf32_slack(q, k, v, False)   # TF32 products are judged by fp32_ieee alone
    assert_close(o.float().cpu(), expected, atol=1e-5 + slack_o, what="o", context="worked example padded to d=16",
                 signatures=(NO_RESCALE,))
    assert_close(lse.float().cpu(), torch.tensor([[[math.log(6.0)]]]), atol=1e-5 + slack_lse, what="lse = ln 6",
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


def check_forward(impl, function, shape_q, n_k, dtype, is_causal, device, gen, allow_tf32=None):
    """The forward vs fp64; a Triton forward's float32 checks set TF32 aside unless `allow_tf32` says no."""
    pytorch = function == "flash_attention_forward_pytorch"
    q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
    args = (q, k, v, is_causal, 16, 16) if pytorch else (q, k, v, is_causal)
    o, lse = getattr(impl.flash_attention, function)(*args)
    assert_forward_matches(o, lse, q, k, v, is_causal, allow_tf32=not pytorch if allow_tf32 is None else allow_tf32)


@pytest.mark.check("flash_attention.pytorch.forward")
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
@pytest.mark.parametrize("dtype", CORE_DTYPES.values(), ids=CORE_DTYPES.keys())
def test_pytorch_forward_matches_fp64_reference(impl, on_gpu, gen, dtype, is_causal):
    shape_q = core_shape(on_gpu)
    check_forward(impl, "flash_attention_forward_pytorch", shape_q, shape_q[-2], dtype, is_causal, PYTORCH_DEVICE, gen)


@pytest.mark.check("flash_attention.pytorch.forward_shapes")
@pytest.mark.parametrize("case", FORWARD_SHAPES)
def test_pytorch_forward_handles_ragged_rectangular_and_fp16(impl, on_gpu, gen, case):
    check_forward(impl, "flash_attention_forward_pytorch", *shape_case(FORWARD_SHAPES, case, on_gpu), PYTORCH_DEVICE,
                  gen)


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


# ------------------------------------------------------------------ the causes with a check of their own


@pytest.mark.check("flash_attention.triton.fp32_ieee")
@pytest.mark.triton
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
def test_triton_forward_multiplies_fp32_in_ieee(impl, device, on_gpu, gen, is_causal):
    """float32 inputs at the float32 bound: TF32 products (about 1e-3 relative) fail here, and only here."""
    shape_q = core_shape(on_gpu)
    check_forward(impl, "flash_attention_forward", shape_q, shape_q[-2], torch.float32, is_causal, device, gen,
                  allow_tf32=False)


@pytest.mark.check("flash_attention.triton.fp32_ieee")
@pytest.mark.triton
def test_triton_backward_multiplies_fp32_in_ieee(impl, device, on_gpu, gen):
    shape_q = core_shape(on_gpu, backward=True)
    check_backward(impl, "flash_attention", shape_q, shape_q[-2], torch.float32, True, device, gen, allow_tf32=False)


def check_output_dtype(impl, forward, function, dtype, device, gen):
    """o (from the forward and from the autograd Function) in q's dtype: the one check of the dtype, the
    value checks compare after a cast."""
    q, k, v = random_qkv((1, 2, 64, 16), 64, dtype, device, gen)
    o, _ = getattr(impl.flash_attention, forward)(q, k, v, False)
    assert_output_dtype(o, q, False, what=f"{forward}: o")
    o, *_ = impl.run(attention_forward_backward, function, q, k, v, torch.ones_like(q), False)
    assert_output_dtype(o, q, False, what=f"{function}.apply: o")


@pytest.mark.check("flash_attention.pytorch.output_dtype")
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_pytorch_output_has_the_inputs_dtype(impl, gen, dtype):
    check_output_dtype(impl, "flash_attention_forward_pytorch", "FlashAttentionPyTorch", dtype, PYTORCH_DEVICE, gen)


@pytest.mark.check("flash_attention.triton.output_dtype")
@pytest.mark.triton
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_triton_output_has_the_inputs_dtype(impl, device, gen, dtype):
    check_output_dtype(impl, "flash_attention_forward", "FlashAttentionTriton", dtype, device, gen)


@pytest.mark.check("flash_attention.pytorch.device")
@pytest.mark.gpu_only
def test_pytorch_version_runs_on_cuda_inputs(impl, gen):
    """On CUDA inputs every tensor the PyTorch version makes must be on q's device (torch.empty(...,
    device=q.device)): the one check of the device, the value checks run on CPU inputs."""
    q, k, v = random_qkv((1, 2, 128, 32), 128, torch.float32, "cuda", gen)
    o, lse = impl.flash_attention.flash_attention_forward_pytorch(q, k, v, True, 64, 64)
    assert o.device == q.device and lse.device == q.device, f"o on {o.device}, lse on {lse.device}: expected {q.device}"
    assert_forward_matches(o, lse, q, k, v, True)
    grad_o = randn(q.shape, device="cuda", gen=gen)
    o, *grads = impl.run(attention_forward_backward, "FlashAttentionPyTorch", q, k, v, grad_o, True)
    assert_backward_matches(grads, q, k, v, grad_o, True)


# ------------------------------------------------------------------ causal masking


def check_row0_sees_only_key0(impl, function, device, gen):
    q, k, v = random_qkv((2, 1, 64, 16), 64, torch.float32, device, gen)
    o_causal, lse_causal = getattr(impl.flash_attention, function)(q, k, v, True)
    # row 0 has one visible key: softmax weight 1, so o[0] = v[0] and lse[0] = q0.k0 / sqrt(d)
    products = (q[..., 0, :] * k[..., 0, :]) / math.sqrt(16)
    # a Triton kernel's TF32 products cut v and q, k to 10 bits: judged by fp32_ieee alone
    tf32 = ULP_FLOOR * TF32_EPS if function == "flash_attention_forward" else 0.0
    assert_close(o_causal[..., 0, :].float(), v[..., 0, :], atol=1e-6, rtol=tf32, what="o[..., 0, :] vs v[..., 0, :]",
                 context=function)
    assert_close(lse_causal[..., 0].float(), products.sum(-1), atol=1e-5 + tf32 * float(products.abs().sum(-1).max()),
                 what="lse[..., 0]", context=function)
    o_full, _ = getattr(impl.flash_attention, function)(q, k, v, False)
    gap = (o_causal[..., :-1, :] - o_full[..., :-1, :]).abs().max().item()
    assert gap > 1e-3, f"[{function}] causal and non-causal outputs agree (gap {gap:.2g}): is the mask applied?"


@pytest.mark.check("flash_attention.pytorch.causal")
def test_pytorch_causal_row0_sees_only_key0(impl, gen):
    check_row0_sees_only_key0(impl, "flash_attention_forward_pytorch", PYTORCH_DEVICE, gen)


@pytest.mark.check("flash_attention.triton.causal")
@pytest.mark.triton
def test_triton_causal_row0_sees_only_key0(impl, device, gen):
    check_row0_sees_only_key0(impl, "flash_attention_forward", device, gen)


# ------------------------------------------------------------------ backward


def check_backward(impl, function_name, shape_q, n_k, dtype, is_causal, device, gen, allow_tf32=None):
    """o and the gradients vs fp64 autograd. The o it judges is the forward's: at the TF32 bound even in
    the fp32_ieee check, which judges the backward's own products."""
    triton = function_name != "FlashAttentionPyTorch"
    q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
    grad_o = randn(shape_q, dtype=dtype, device=device, gen=gen)
    o, *grads = impl.run(attention_forward_backward, function_name, q, k, v, grad_o, is_causal)
    assert_forward_matches(o, None, q, k, v, is_causal, allow_tf32=triton)
    assert_backward_matches(grads, q, k, v, grad_o, is_causal, allow_tf32=triton if allow_tf32 is None else allow_tf32)


@pytest.mark.check("flash_attention.pytorch.backward")
@pytest.mark.parametrize("is_causal", CAUSAL.values(), ids=CAUSAL.keys())
@pytest.mark.parametrize("dtype", CORE_DTYPES.values(), ids=CORE_DTYPES.keys())
def test_pytorch_backward_matches_autograd_reference(impl, on_gpu, gen, dtype, is_causal):
    shape_q = core_shape(on_gpu, backward=True)
    check_backward(impl, "FlashAttentionPyTorch", shape_q, shape_q[-2], dtype, is_causal, PYTORCH_DEVICE, gen)


@pytest.mark.check("flash_attention.pytorch.backward_shapes")
@pytest.mark.parametrize("case", BACKWARD_SHAPES)
def test_pytorch_backward_handles_ragged_rectangular_and_fp16(impl, on_gpu, gen, case):
    check_backward(impl, "FlashAttentionPyTorch", *shape_case(BACKWARD_SHAPES, case, on_gpu), PYTORCH_DEVICE, gen)


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
