"""Hidden tests for the `softmax` problem: rescaling, masking and overflow edge cases, unseen shapes.

Configurations here differ from the public suite's (block splits, shapes, dtypes), so a submission
tuned to the public cases gains nothing.
"""

import math

import pytest
import torch

from grader.perf.cases import softmax as softmax_benchmarks
from grader.perf.measure import measure_graded_case
from grader.references.softmax import assert_softmax_close, reference_softmax
from grader.testing import SOFTMAX_OPS, assert_close, raises_from_student, randn

LN2, LN3, LN6 = math.log(2.0), math.log(3.0), math.log(6.0)
NEG_INF = float("-inf")
F64 = torch.float64


def empty_state(rows_shape=(), d_values=1, dtype=F64):
    return (torch.full(rows_shape, NEG_INF, dtype=dtype), torch.zeros(rows_shape, dtype=dtype),
            torch.zeros(tuple(rows_shape) + (d_values,), dtype=dtype))


def fold_blocks(impl, scores, values, block_sizes):
    """Fold scores [..., n] and values [..., n, d] into a fresh state, block_sizes columns at a time."""
    state = empty_state(scores.shape[:-1], values.shape[-1], scores.dtype)
    start = 0
    for size in block_sizes:
        state = impl.softmax.online_softmax_update(*state, scores[..., start:start + size],
                                                   values[..., start:start + size, :])
        start += size
    assert start == scores.shape[-1]
    return state


def reference_attention_row(scores, values):
    """softmax(scores) @ values and lse in fp64; all -inf rows give 0 and -inf."""
    weights = torch.softmax(scores.double(), dim=-1).nan_to_num(0.0)
    return (weights.unsqueeze(-1) * values.double()).sum(dim=-2), torch.logsumexp(scores.double(), dim=-1)


def output_and_lse(m, l, acc):
    """acc / l and m + log l, computed by the checker (0 and -inf where l = 0)."""
    seen = l > 0
    safe_l = torch.where(seen, l, torch.ones_like(l))
    out = acc / safe_l.unsqueeze(-1)
    lse = torch.where(seen, m + torch.log(safe_l), torch.full_like(m, NEG_INF))
    return out, lse


# ------------------------------------------------------------------ update: rescaling


@pytest.mark.check("softmax.update.rescale")
def test_no_rescale_bug_is_caught_single_score_first(impl):
    # blocks [0] then [ln2, ln3]: the max grows from 0 to ln3; without rescaling l = 1 + 5/3, acc = 1 + 14/3
    scores, values = torch.tensor([0.0, LN2, LN3], dtype=F64), torch.tensor([[1.0], [2.0], [4.0]], dtype=F64)
    m, l, acc = fold_blocks(impl, scores, values, [1, 2])
    assert_close(l, torch.tensor(2.0, dtype=F64), atol=1e-12, what="l after [0] [ln2, ln3]")
    assert_close(acc / l, torch.tensor([17.0 / 6.0], dtype=F64), atol=1e-12, what="output (17/6)")


@pytest.mark.check("softmax.update.rescale")
def test_worked_example_output_is_not_two_point_six(impl):
    scores, values = torch.tensor([0.0, LN2, LN3], dtype=F64), torch.tensor([[1.0], [2.0], [4.0]], dtype=F64)
    m, l, acc = fold_blocks(impl, scores, values, [2, 1])
    out = float((acc / l).reshape(-1)[0])
    assert abs(out - 2.6) > 0.1, "output 2.6: the old l and acc were not rescaled by exp(m_old - m_new)"
    assert abs(out - 17.0 / 6.0) < 1e-12, f"output {out}, expected 17/6"


@pytest.mark.check("softmax.update.rescale")
@pytest.mark.parametrize("block_sizes", [[5, 5, 5, 5, 5], [1, 7, 2, 15], [24, 1]], ids=["even", "ragged", "tail"])
def test_random_merges_match_one_shot_softmax(impl, gen, block_sizes):
    # increasing ramp + noise: the max moves in almost every block, so every block needs a rescale
    scores = (randn((3, 25), dtype=F64, gen=gen) + torch.linspace(0, 8, 25, dtype=F64))
    values = randn((3, 25, 4), dtype=F64, gen=gen)
    m, l, acc = fold_blocks(impl, scores, values, block_sizes)
    out, lse = output_and_lse(m, l, acc)
    expected_out, expected_lse = reference_attention_row(scores, values)
    assert_close(out, expected_out, atol=1e-10, rtol=1e-10, what="acc / l", context=f"blocks {block_sizes}")
    assert_close(lse, expected_lse, atol=1e-10, what="m + log l", context=f"blocks {block_sizes}")
    assert_close(m, scores.amax(dim=-1), atol=0.0, what="m = running max")


# ------------------------------------------------------------------ update: edge cases


@pytest.mark.check("softmax.update.edge_cases")
def test_masked_first_block_lecture_lse(impl):
    scores = torch.tensor([NEG_INF, NEG_INF, 0.0, LN2, LN3], dtype=F64)
    values = torch.tensor([[9.0], [9.0], [1.0], [2.0], [4.0]], dtype=F64)
    m, l, acc = fold_blocks(impl, scores, values, [2, 2, 1])
    out, lse = output_and_lse(m, l, acc)
    assert_close(out, torch.tensor([17.0 / 6.0], dtype=F64), atol=1e-12, what="output after a masked first block")
    assert_close(lse, torch.tensor(LN6, dtype=F64), atol=1e-12, what="lse = ln 6")


@pytest.mark.check("softmax.update.edge_cases")
def test_huge_scores_do_not_overflow(impl):
    scores = torch.tensor([1000.0, 1000.0 + LN2, 1000.0 + LN3], dtype=torch.float32)
    values = torch.tensor([[1.0], [2.0], [4.0]], dtype=torch.float32)
    m, l, acc = fold_blocks(impl, scores, values, [1, 1, 1])
    assert torch.isfinite(l).all() and torch.isfinite(acc).all(), f"overflow: l={l}, acc={acc}"
    out, lse = output_and_lse(m.double(), l.double(), acc.double())
    assert_close(out, torch.tensor([17.0 / 6.0], dtype=F64), atol=1e-4, what="output for scores 1000 + [0, ln2, ln3]")
    assert_close(lse, torch.tensor(1000.0 + LN6, dtype=F64), atol=1e-3, what="lse = 1000 + ln 6")


@pytest.mark.check("softmax.update.edge_cases")
def test_all_masked_row_and_masked_middle_block_in_a_batch(impl, gen):
    scores = randn((3, 12), dtype=F64, gen=gen)
    scores[0] = NEG_INF               # a row that never sees a score
    scores[1, 4:8] = NEG_INF          # a masked middle block
    values = randn((3, 12, 2), dtype=F64, gen=gen)
    m, l, acc = fold_blocks(impl, scores, values, [4, 4, 4])
    for name, tensor in (("m", m), ("l", l), ("acc", acc)):
        assert not torch.isnan(tensor).any(), f"NaN in {name} for a batch with an all -inf row: {tensor}"
    out, lse = output_and_lse(m, l, acc)
    expected_out, expected_lse = reference_attention_row(scores, values)
    assert_close(out, expected_out, atol=1e-12, rtol=1e-12, what="acc / l (the all -inf row must give 0)")
    assert_close(lse, expected_lse, atol=1e-12, what="lse (-inf for the all -inf row)")


# ------------------------------------------------------------------ online_softmax variants


ONLINE_CASES = [((3, 7), 10), ((2, 2, 33), 8), ((1, 50), 7), ((6, 1), 1)]


@pytest.mark.check("softmax.online.variants")
@pytest.mark.parametrize("shape,block_size", ONLINE_CASES, ids=[f"{s}-b{b}" for s, b in ONLINE_CASES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=["fp16", "fp64"])
def test_online_softmax_unseen_shapes(impl, gen, on_gpu, device, shape, block_size, dtype):
    x = randn(shape, dtype=dtype, device=device, gen=gen, scale=4.0)
    out = impl.softmax.online_softmax(x, block_size)
    assert_softmax_close(out, x, on_gpu=on_gpu, context=f"shape={shape} block_size={block_size} {dtype}")


@pytest.mark.check("softmax.online.variants")
def test_online_softmax_huge_and_masked_rows(impl, device):
    x = torch.tensor([[1000.0, 1000.0 + LN2, 1000.0 + LN3],
                      [NEG_INF, NEG_INF, NEG_INF],
                      [NEG_INF, 0.0, NEG_INF]], device=device)
    out = impl.softmax.online_softmax(x, 2)
    # fp32 spaces numbers near 1000 by 6e-5, so compare with the softmax of the rounded inputs
    assert_close(out, reference_softmax(x), atol=1e-6, what="softmax of huge / all -inf / one-finite rows")
    assert_close(out[1:], torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], device=device), atol=0.0,
                 what="all -inf row gives zeros; a single finite score gives 1")


# ------------------------------------------------------------------ softmax_triton variants


def run_triton(impl, x):
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        return impl.softmax.softmax_triton(x)


TRITON_SHAPES = [(5, 2), (3, 129), (2, 4097), (2, 16385), (1, 70001)]


@pytest.mark.triton
@pytest.mark.check("softmax.triton.variants")
@pytest.mark.parametrize("shape", TRITON_SHAPES, ids=[f"{r}x{c}" for r, c in TRITON_SHAPES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_triton_unseen_row_lengths(impl, gen, on_gpu, device, shape, dtype):
    rows, cols = shape
    if on_gpu:
        rows *= 33
    x = randn((rows, cols), dtype=dtype, device=device, gen=gen, scale=2.5)
    assert_softmax_close(run_triton(impl, x), x, on_gpu=on_gpu, interpreted_kernel=True,
                         context=f"{rows}x{cols} {dtype}")


@pytest.mark.triton
@pytest.mark.check("softmax.triton.variants")
@pytest.mark.parametrize("shape", [(2, 3, 4, 20), (3, 1, 300)], ids=["4d", "3d"])
def test_triton_batched_fp16(impl, gen, on_gpu, device, shape):
    x = randn(shape, dtype=torch.float16, device=device, gen=gen, scale=2.0)
    assert_softmax_close(run_triton(impl, x), x, on_gpu=on_gpu, interpreted_kernel=True, context=f"{shape} fp16")


@pytest.mark.triton
@pytest.mark.check("softmax.triton.variants")
def test_triton_non_contiguous_input(impl, gen, on_gpu, device):
    x = randn((48, 6), device=device, gen=gen).t()   # rows of 48 with stride 6 between columns
    assert_softmax_close(run_triton(impl, x), x, on_gpu=on_gpu, interpreted_kernel=True, context="transposed 6x48")


@pytest.mark.triton
@pytest.mark.check("softmax.triton.variants")
@pytest.mark.parametrize("cols", [300, 40000], ids=["one-pass", "long"])
def test_triton_huge_scores_and_masked_prefix(impl, gen, on_gpu, device, cols):
    x = randn((3, cols), device=device, gen=gen)
    x[0] += 1000.0                       # exp(1000) overflows unless the max is subtracted
    x[1, : cols * 3 // 4] = NEG_INF      # long masked prefix: the first blocks see only -inf
    x[2] = NEG_INF                       # all -inf: zeros
    out = run_triton(impl, x)
    assert not torch.isnan(out).any(), "NaN in softmax_triton output (huge, masked-prefix or all -inf row)"
    assert_softmax_close(out, x, on_gpu=on_gpu, interpreted_kernel=True, context=f"3x{cols} huge/masked rows")


# ------------------------------------------------------------------ bad input


@pytest.mark.check("softmax.errors")
def test_update_with_mismatched_values_is_a_value_error(impl):
    with raises_from_student(ValueError):
        impl.softmax.online_softmax_update(*empty_state((2,), 3), torch.zeros(2, 4, dtype=F64),
                                           torch.zeros(2, 5, 3, dtype=F64))


@pytest.mark.check("softmax.errors")
@pytest.mark.parametrize("block_size", [0, -2], ids=["zero", "negative"])
def test_online_softmax_bad_block_size_is_a_value_error(impl, block_size):
    with raises_from_student(ValueError):
        impl.softmax.online_softmax(torch.zeros(2, 8), block_size)


@pytest.mark.triton
@pytest.mark.check("softmax.errors")
def test_softmax_triton_integer_input_is_a_value_error(impl, device):
    with raises_from_student(ValueError):
        impl.softmax.softmax_triton(torch.ones(2, 8, dtype=torch.int32, device=device))


# ------------------------------------------------------------------ performance (GPU only)

ALL_BENCHMARKS = softmax_benchmarks.benchmarks()
ONE_PASS_BENCHMARKS = [case for case in ALL_BENCHMARKS if case.check == softmax_benchmarks.CHECK]
ONLINE_BENCHMARKS = [case for case in ALL_BENCHMARKS if case.check == softmax_benchmarks.CHECK_ONLINE]


def timed_against_copy(impl, record_perf, case):
    gen = torch.Generator(device="cuda").manual_seed(4321 + len(case.case))
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        result = measure_graded_case(impl, case, gen)
    record_perf(**result.as_record())


@pytest.mark.perf("softmax.perf.bandwidth")
@pytest.mark.triton
@pytest.mark.parametrize("case", ONE_PASS_BENCHMARKS, ids=[case.case.replace(" ", "_") for case in ONE_PASS_BENCHMARKS])
def test_rows_that_fit_on_chip_run_near_copy_bandwidth(impl, record_perf, case):
    timed_against_copy(impl, record_perf, case)


@pytest.mark.perf("softmax.perf.online")
@pytest.mark.triton
@pytest.mark.parametrize("case", ONLINE_BENCHMARKS, ids=[case.case.replace(" ", "_") for case in ONLINE_BENCHMARKS])
def test_long_rows_online_path_bandwidth(impl, record_perf, case):
    # two reads of x and one write, scored on the compulsory read + write: 2/3 of copy unless x stays in L2
    timed_against_copy(impl, record_perf, case)
