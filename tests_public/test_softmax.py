"""Public tests for the `softmax` problem: the online softmax state, online_softmax and softmax_triton.

The lecture's online-softmax worked example: scores [0, ln2, ln3] with values [1, 2, 4], split into the
first two scores and the last one. After block 1 the state is m = ln2, l = 1.5, acc = 2.5; block 2
raises the max to ln3, so the old terms are rescaled by exp(ln2 - ln3) = 2/3: l = 2, acc = 17/3, and
the output is acc / l = 17/6.
"""

import math

import pytest
import torch

from grader.diagnose_tensors import equals, non_finite
from grader.references.softmax import (
    NO_RESCALE_CAUSE,
    OVERFLOW_CAUSE,
    WORKED_EXAMPLE_WRONG_OUTPUTS,
    assert_softmax_close,
)
from grader.testing import SOFTMAX_OPS, assert_close, randn

LN2, LN3 = math.log(2.0), math.log(3.0)
NEG_INF = float("-inf")


def empty_state(d_values=1, dtype=torch.float64):
    """m = -inf, l = 0, acc = 0 for a single row (acc has d_values entries)."""
    return (torch.tensor(NEG_INF, dtype=dtype), torch.tensor(0.0, dtype=dtype),
            torch.zeros(d_values, dtype=dtype))


def column(values, dtype=torch.float64):
    """Scalar values as a [b, 1] block (one value dimension)."""
    return torch.tensor(values, dtype=dtype).reshape(-1, 1)


# ------------------------------------------------------------------ online_softmax_update


@pytest.mark.check("softmax.update.worked_example")
def test_worked_example_state_after_first_block(impl):
    m, l, acc = impl.softmax.online_softmax_update(*empty_state(), torch.tensor([0.0, LN2], dtype=torch.float64),
                                                   column([1.0, 2.0]))
    assert_close(m, torch.tensor(LN2, dtype=torch.float64), atol=1e-12, what="m after block 1")
    assert_close(l, torch.tensor(1.5, dtype=torch.float64), atol=1e-12, what="l after block 1")
    assert_close(acc, torch.tensor([2.5], dtype=torch.float64), atol=1e-12, what="acc after block 1")


@pytest.mark.check("softmax.update.worked_example")
def test_worked_example_rescales_when_max_grows(impl):
    state = impl.softmax.online_softmax_update(*empty_state(), torch.tensor([0.0, LN2], dtype=torch.float64),
                                               column([1.0, 2.0]))
    m, l, acc = impl.softmax.online_softmax_update(*state, torch.tensor([LN3], dtype=torch.float64), column([4.0]))
    assert_close(m, torch.tensor(LN3, dtype=torch.float64), atol=1e-12, what="m after block 2")
    assert_close(l, torch.tensor(2.0, dtype=torch.float64), atol=1e-12, what="l after block 2",
                 signatures=(equals(2.5, NO_RESCALE_CAUSE),))
    assert_close(acc, torch.tensor([17.0 / 3.0], dtype=torch.float64), atol=1e-12, what="acc after block 2",
                 signatures=(equals(6.5, NO_RESCALE_CAUSE),))
    assert_close(acc / l, torch.tensor([17.0 / 6.0], dtype=torch.float64), atol=1e-12, what="output acc / l",
                 signatures=(equals(WORKED_EXAMPLE_WRONG_OUTPUTS, NO_RESCALE_CAUSE),))


@pytest.mark.check("softmax.update.masking")
def test_fully_masked_first_block_gives_no_nan(impl):
    masked = torch.tensor([NEG_INF, NEG_INF], dtype=torch.float64)
    m, l, acc = impl.softmax.online_softmax_update(*empty_state(), masked, column([9.0, 9.0]))
    assert not torch.isnan(l).any() and not torch.isnan(acc).any(), f"NaN after a fully masked block: l={l}, acc={acc}"
    assert_close(l, torch.tensor(0.0, dtype=torch.float64), atol=0.0, what="l after a fully masked block")
    assert_close(acc, torch.tensor([0.0], dtype=torch.float64), atol=0.0, what="acc after a fully masked block")
    for scores, values in (([0.0, LN2], [1.0, 2.0]), ([LN3], [4.0])):
        m, l, acc = impl.softmax.online_softmax_update(m, l, acc, torch.tensor(scores, dtype=torch.float64),
                                                       column(values))
    assert_close(acc / l, torch.tensor([17.0 / 6.0], dtype=torch.float64), atol=1e-12,
                 what="output after [-inf, -inf] [0, ln2] [ln3]")


@pytest.mark.check("softmax.update.masking")
def test_update_without_values_tracks_statistics(impl):
    m, l, _ = impl.softmax.online_softmax_update(*empty_state(), torch.tensor([0.0, LN2, LN3], dtype=torch.float64))
    assert_close(m, torch.tensor(LN3, dtype=torch.float64), atol=1e-12, what="m")
    assert_close(l, torch.tensor(2.0, dtype=torch.float64), atol=1e-12, what="l = (1 + 2 + 3) / 3")


@pytest.mark.check("softmax.stability.large_inputs")
def test_update_with_scores_near_1000_does_not_overflow(impl):
    # fp32's exp overflows past ~88.7: only an update that subtracts the running max survives 1000
    big = torch.tensor(1000.0)
    state = impl.softmax.online_softmax_update(*empty_state(dtype=torch.float32), big + torch.tensor([0.0, LN2]),
                                               column([1.0, 2.0], dtype=torch.float32))
    m, l, acc = impl.softmax.online_softmax_update(*state, big + torch.tensor([LN3]),
                                                   column([4.0], dtype=torch.float32))
    signatures = (non_finite(OVERFLOW_CAUSE),)
    assert_close(l, torch.tensor(2.0), atol=1e-4, what="l after scores 1000 + [0, ln2] then 1000 + [ln3] (fp32)",
                 signatures=signatures)
    assert_close(acc / l, torch.tensor([17.0 / 6.0]), atol=1e-4, what="output acc / l for scores 1000 + [0, ln2, ln3]",
                 signatures=signatures)


# ------------------------------------------------------------------ online_softmax (PyTorch)


@pytest.mark.check("softmax.online.correct")
@pytest.mark.parametrize("block_size", [1, 2, 3])
def test_online_softmax_worked_example(impl, block_size):
    out = impl.softmax.online_softmax(torch.tensor([0.0, LN2, LN3]), block_size)
    assert_close(out, torch.tensor([1 / 6, 1 / 3, 1 / 2]), atol=1e-7, what="softmax([0, ln2, ln3])",
                 context=f"block_size={block_size}")


@pytest.mark.check("softmax.online.correct")
@pytest.mark.parametrize("shape,block_size", [((4, 10), 3), ((2, 3, 64), 16), ((5, 100), 128)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_online_softmax_matches_torch(impl, gen, on_gpu, device, shape, block_size, dtype):
    x = randn(shape, dtype=dtype, device=device, gen=gen, scale=3.0)
    out = impl.softmax.online_softmax(x, block_size)
    assert_softmax_close(out, x, on_gpu=on_gpu, context=f"shape={shape} block_size={block_size} {dtype}")


@pytest.mark.check("softmax.stability.large_inputs")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_online_softmax_of_large_inputs_is_finite(impl, gen, device, on_gpu, dtype):
    x = 1000.0 + randn((3, 40), device=device, gen=gen, scale=3.0)   # exp(1000) is inf in any float dtype
    x = x.to(dtype)
    out = impl.softmax.online_softmax(x, 16)
    assert_softmax_close(out, x, on_gpu=on_gpu, context=f"x = 1000 + 3 * randn, shape (3, 40), block 16, {dtype}")


# ------------------------------------------------------------------ softmax_triton

TRITON_CASES = [
    (4, 1),        # rows of length 1: every output is 1
    (8, 37),       # not a power of two
    (3, 1000),
    (2, 20000),    # longer than one block: the online path
]


@pytest.mark.triton
@pytest.mark.check("softmax.triton.correct")
@pytest.mark.parametrize("rows,cols", TRITON_CASES, ids=[f"{r}x{c}" for r, c in TRITON_CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_softmax_triton_matches_torch(impl, gen, on_gpu, device, rows, cols, dtype):
    if on_gpu:
        rows = rows * 64
    x = randn((rows, cols), dtype=dtype, device=device, gen=gen, scale=3.0)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        out = impl.softmax.softmax_triton(x)
    assert_softmax_close(out, x, on_gpu=on_gpu, interpreted_kernel=True, context=f"{rows}x{cols} {dtype}")


@pytest.mark.triton
@pytest.mark.check("softmax.triton.correct")
def test_softmax_triton_batched_input_keeps_shape(impl, gen, on_gpu, device):
    x = randn((2, 3, 50), device=device, gen=gen)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        out = impl.softmax.softmax_triton(x)
    assert_softmax_close(out, x, on_gpu=on_gpu, interpreted_kernel=True, context="shape (2, 3, 50) fp32")


@pytest.mark.triton
@pytest.mark.check("softmax.triton.masking")
def test_softmax_triton_all_masked_row_is_zero(impl, gen, on_gpu, device):
    x = randn((3, 40), device=device, gen=gen)
    x[1] = NEG_INF
    x[2, :20] = NEG_INF
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        out = impl.softmax.softmax_triton(x)
    assert not torch.isnan(out).any(), "softmax_triton returned NaN for a row of all -inf (expected zeros)"
    assert_softmax_close(out, x, on_gpu=on_gpu, interpreted_kernel=True, context="rows with -inf")


@pytest.mark.triton
@pytest.mark.check("softmax.stability.large_inputs")
@pytest.mark.parametrize("cols", [100, 20000], ids=["one-block", "long-row"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_softmax_triton_of_large_inputs_is_finite(impl, gen, on_gpu, device, cols, dtype):
    x = (1000.0 + randn((2, cols), device=device, gen=gen, scale=3.0)).to(dtype)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        out = impl.softmax.softmax_triton(x)
    assert_softmax_close(out, x, on_gpu=on_gpu, interpreted_kernel=True,
                         context=f"x = 1000 + 3 * randn, shape (2, {cols}), {dtype}")
