"""Hidden tests for the `flash_attention` problem: more shapes and dtypes, stability, the rules
(no PyTorch attention inside the Triton path, nothing n x n saved, memory linear in n), input errors,
and (GPU only) forward and backward time against PyTorch's SDPA (grader.perf.cases.flash_attention).

The scenarios run through `impl.run` come from `grader.references.attention` and
`grader.scenarios.flash_attention`, never from this file: the worker imports a scenario's module, and this
file must not be readable by student code.

As in the public suite, TF32 products, the output's dtype and the PyTorch version's device have checks of
their own (public): here the Triton value checks allow the error TF32 products make on float32, values
are compared after casting to the contract's dtypes, and the PyTorch version runs on CPU inputs.
"""

import pytest
import torch

from grader.perf import memory_growth
from grader.perf.cases import flash_attention as attention_benchmarks
from grader.perf.measure import measure_graded_case
from grader.perf.worker_memory import MemoryUnavailable
from grader.references.attention import (
    assert_backward_matches,
    assert_forward_matches,
    attention_forward_backward,
    describe,
    random_qkv,
)
from grader.scenarios.flash_attention import peak_extra_memory, replay_backward, saved_for_backward
from grader.testing import ATTENTION_OPS, raises_from_student, randn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
PYTORCH_DEVICE = "cpu"   # the PyTorch version's value checks, as in the public suite
SEEDS = [0, 1]  # each id also gets its own generator seed; two draws per case


# ------------------------------------------------------------------ Triton forward, more shapes


# name -> ((q shape, n_k, causal) in the interpreter, the same on a GPU): ragged lengths, n_q != n_k both
# ways, d = 16 .. 128, 3-D inputs. Each case is its own test: a crash costs that case only.
FORWARD_SHAPES = {
    "ragged_d16": (((1, 2, 33, 16), 33, False), ((2, 3, 1000, 64), 1000, True)),
    "ragged_causal": (((1, 1, 65, 32), 65, True), ((1, 2, 513, 128), 777, False)),
    "fewer_queries": (((2, 1, 17, 16), 80, False), ((4, 2, 129, 16), 129, True)),
    "fewer_keys": (((1, 1, 50, 16), 7, False), ((1, 2, 700, 64), 65, False)),
    "three_dims": (((2, 30, 32), 30, True), ((2, 1025, 32), 1025, True)),
    "d128": (((1, 1, 20, 128), 40, False), ((1, 2, 513, 128), 777, False)),
    "one_token": (((1, 1, 1, 16), 1, True), ((1, 1, 1, 128), 1, True)),
}


@pytest.mark.check("flash_attention.hidden.forward_shapes")
@pytest.mark.triton
@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"draw{s}")
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("case", FORWARD_SHAPES)
def test_triton_forward_handles_ragged_and_rectangular_shapes(impl, device, on_gpu, gen, case, dtype, seed):
    shape_q, n_k, is_causal = FORWARD_SHAPES[case][on_gpu]
    q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
    o, lse = impl.flash_attention.flash_attention_forward(q, k, v, is_causal)
    assert tuple(lse.shape) == tuple(q.shape[:-1]), \
        f"[{describe(q, k, is_causal)}] lse has shape {tuple(lse.shape)}, expected {tuple(q.shape[:-1])}"
    assert_forward_matches(o, lse, q, k, v, is_causal, allow_tf32=True)


# ------------------------------------------------------------------ Triton backward, more shapes

# name -> ((q shape, n_k) in the interpreter, the same on a GPU); the rectangular ones run non-causal only
BACKWARD_SHAPES = {
    "ragged_d16": (((1, 1, 45, 16), 45), ((2, 2, 1000, 64), 1000)),
    "ragged_d128": (((1, 1, 20, 128), 20), ((1, 2, 333, 128), 333)),
    "three_dims": (((2, 24, 16), 24), ((2, 515, 32), 515)),
    "three_heads_d16": (((1, 3, 33, 16), 33), ((2, 3, 257, 16), 257)),
}
RECTANGULAR_BACKWARD = {
    "more_keys": (((1, 2, 33, 32), 20), ((1, 2, 300, 64), 701)),
    "fewer_keys": (((1, 1, 17, 16), 50), ((1, 2, 513, 128), 100)),
}
BACKWARD_CASES = [(name, False) for name in [*BACKWARD_SHAPES, *RECTANGULAR_BACKWARD]] + \
                 [(name, True) for name in BACKWARD_SHAPES]


@pytest.mark.check("flash_attention.hidden.backward_shapes")
@pytest.mark.triton
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("case,is_causal", BACKWARD_CASES,
                         ids=[f"{name}-{'causal' if causal else 'full'}" for name, causal in BACKWARD_CASES])
def test_triton_backward_handles_ragged_and_rectangular_shapes(impl, device, on_gpu, gen, dtype, case, is_causal):
    shape_q, n_k = {**BACKWARD_SHAPES, **RECTANGULAR_BACKWARD}[case][on_gpu]
    q, k, v = random_qkv(shape_q, n_k, dtype, device, gen)
    grad_o = randn(shape_q, dtype=dtype, device=device, gen=gen)
    o, *grads = impl.run(attention_forward_backward, "flash_attention", q, k, v, grad_o, is_causal)
    assert_forward_matches(o, None, q, k, v, is_causal, allow_tf32=True)
    assert_backward_matches(grads, q, k, v, grad_o, is_causal, allow_tf32=True)


# ------------------------------------------------------------------ PyTorch path, odd tiles


@pytest.mark.check("flash_attention.hidden.pytorch_tiles")
@pytest.mark.parametrize("q_tile,k_tile", [(7, 5), (64, 3), (1, 100), (16, 32)],
                         ids=lambda t: str(t))
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_pytorch_forward_any_tile_sizes(impl, gen, q_tile, k_tile, is_causal):
    n_k = 23 if is_causal else 31
    q, k, v = random_qkv((2, 2, 23, 8), n_k, torch.float32, PYTORCH_DEVICE, gen)
    o, lse = impl.flash_attention.flash_attention_forward_pytorch(q, k, v, is_causal, q_tile, k_tile)
    assert_forward_matches(o, lse, q, k, v, is_causal)


@pytest.mark.check("flash_attention.hidden.pytorch_tiles")
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_pytorch_backward_over_several_tiles(impl, gen, dtype, is_causal):
    q, k, v = random_qkv((1, 2, 150, 16), 150, dtype, PYTORCH_DEVICE, gen)  # > 2 tiles of the default 64
    grad_o = randn(q.shape, dtype=dtype, device=PYTORCH_DEVICE, gen=gen)
    o, *grads = impl.run(attention_forward_backward, "FlashAttentionPyTorch", q, k, v, grad_o, is_causal)
    assert_forward_matches(o, None, q, k, v, is_causal)
    assert_backward_matches(grads, q, k, v, grad_o, is_causal)


# ------------------------------------------------------------------ stability


def function_device(function, device):
    """Where a forward's inputs live: the PyTorch version on the CPU, the Triton one on the run's device."""
    return PYTORCH_DEVICE if function == "flash_attention_forward_pytorch" else device


STABILITY_FUNCTIONS = [
    pytest.param("flash_attention_forward_pytorch", marks=pytest.mark.check("flash_attention.hidden.stability")),
    pytest.param("flash_attention_forward", marks=[pytest.mark.triton,
                                                   pytest.mark.check("flash_attention.hidden.triton_stability")]),
]


@pytest.mark.parametrize("function", STABILITY_FUNCTIONS)
def test_large_scores_do_not_overflow(impl, device, gen, function):
    # scores of a few hundred: exp overflows fp32 unless the running max is subtracted
    q, k, v = random_qkv((1, 2, 40, 16), 56, torch.float32, function_device(function, device), gen, scale=12.0)
    o, lse = getattr(impl.flash_attention, function)(q, k, v, False)
    assert bool(torch.isfinite(o).all()), f"[{function}] non-finite outputs for large scores"
    assert_forward_matches(o, lse, q, k, v, False, allow_tf32=function == "flash_attention_forward")


@pytest.mark.parametrize("function", STABILITY_FUNCTIONS)
def test_causal_with_fully_masked_tile_rows_has_no_nan(impl, device, gen, function):
    # n = 70 with the kernel's tiles (or q_tile 32 > k_tile 8): diagonal tiles hold rows that see no key
    q, k, v = random_qkv((1, 1, 70, 16), 70, torch.float32, function_device(function, device), gen, scale=3.0)
    args = (q, k, v, True, 32, 8) if function == "flash_attention_forward_pytorch" else (q, k, v, True)
    o, lse = getattr(impl.flash_attention, function)(*args)
    assert not bool(torch.isnan(o).any() or torch.isnan(lse).any()), f"[{function}] NaN in causal output"
    assert_forward_matches(o, lse, q, k, v, True, allow_tf32=function == "flash_attention_forward")


# ------------------------------------------------------------------ rules: Triton only, O(n) saved, O(n) memory


# The rules are judged on their own: at a shape any reasonable kernel supports (n a multiple of
# 64, float32, d = 32), and whatever the values, so a wrong-but-honest kernel keeps these points and a
# ragged-length or fp16 bug costs only the checks about those. A call that raises cannot be observed,
# so it fails here too: at core shapes a crash is a crash the core checks see as well.
RULE_SHAPE = (1, 2, 64, 32)


@pytest.mark.check("flash_attention.hidden.no_torch_attention")
@pytest.mark.triton
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_triton_forward_uses_no_torch_attention_ops(impl, device, gen, is_causal):
    q, k, v = random_qkv(RULE_SHAPE, RULE_SHAPE[-2], torch.float32, device, gen)
    with impl.guards(forbid=ATTENTION_OPS, require_triton=True):
        impl.flash_attention.flash_attention_forward(q, k, v, is_causal)


@pytest.mark.check("flash_attention.hidden.no_torch_attention")
@pytest.mark.triton
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_triton_autograd_uses_no_torch_attention_ops(impl, device, gen, is_causal):
    q, k, v = random_qkv(RULE_SHAPE, RULE_SHAPE[-2], torch.float32, device, gen)
    grad_o = randn(q.shape, dtype=q.dtype, device=device, gen=gen)
    # The backward may run on autograd's own thread, out of the run-time guard's sight: scan it too.
    entry_points = ("flash_attention", ("FlashAttentionTriton", "flash_attention"))
    with impl.guards(forbid=ATTENTION_OPS, require_triton=True, scan=entry_points):
        impl.run(attention_forward_backward, "FlashAttentionTriton", q, k, v, grad_o, is_causal)


@pytest.mark.check("flash_attention.hidden.saved_tensors")
@pytest.mark.parametrize("function_name", ["FlashAttentionPyTorch",
                                           pytest.param("FlashAttentionTriton", marks=pytest.mark.triton)])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_backward_saves_nothing_quadratic(impl, device, gen, function_name, is_causal):
    # n = 64, d = 16: q, k, v, o hold 2 * 64 * 16 = 2048 values each; one n x n score matrix holds 8192
    on = PYTORCH_DEVICE if function_name == "FlashAttentionPyTorch" else device
    q, k, v = random_qkv((1, 2, 64, 16), 64, torch.float32, on, gen)
    grad_o = randn(q.shape, dtype=q.dtype, device=on, gen=gen)
    saved, tensors, plain, others, grads = impl.run(saved_for_backward, function_name, q, k, v, grad_o, is_causal)
    # Measured here, from what autograd keeps for the backward: ctx.save_for_backward and ctx's tensors.
    largest = max((t.numel() for t in [*saved, *tensors.values()] if t is not None), default=0)
    assert largest <= q.numel(), (
        f"{function_name} saves a tensor of {largest} elements for the backward; q has {q.numel()} and "
        f"one n_q x n_k score matrix per head has {2 * 64 * 64}: save q, k, v, o and lse only")
    assert not others, (f"{function_name} keeps {', '.join(others)} on ctx, which is not a tensor or a plain "
                        "value: keep only tensors (through save_for_backward) and numbers, flags or dtypes")
    # The same backward in a fresh process, from those alone, must give the same gradients: a forward that
    # keeps anything elsewhere (a global, a cache) for its backward does not.
    impl.fresh_worker()
    replayed = impl.run(replay_backward, function_name, saved, tensors, plain, grad_o)
    for name, got, want in zip(("dq", "dk", "dv"), replayed, grads):
        assert isinstance(got, torch.Tensor) and torch.allclose(got, want, rtol=1e-3, atol=1e-5), (
            f"{function_name}: {name} computed from what the forward saved differs from the backward autograd "
            "ran: the backward uses something the forward kept outside ctx; save what it needs on ctx")


@pytest.mark.check("flash_attention.hidden.memory")
@pytest.mark.gpu_only
@pytest.mark.triton
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_forward_backward_memory_grows_linearly_in_n(impl, is_causal):
    # Judged on the driver's figure for the worker process, which the checker reads: student code can patch
    # torch.cuda's counters in the worker, not the driver. Each length runs in a fresh worker.
    try:
        problems = memory_growth.attention_failures(impl, peak_extra_memory, 1, 4, 64, (2048, 8192), is_causal)
    except MemoryUnavailable as why:
        pytest.skip(f"GPU memory check: not run here ({why})")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ input errors


def error_cases():
    """(name, q shape, k shape, v shape, dtypes, causal, regex the message must match)."""
    fp32 = (torch.float32,) * 3
    return [
        ("k_v_lengths_differ", (1, 2, 16, 16), (1, 2, 20, 16), (1, 2, 24, 16), fp32, False, r"20|24"),
        ("head_dims_differ", (1, 2, 16, 16), (1, 2, 16, 32), (1, 2, 16, 32), fp32, False, r"16|32"),
        ("batch_differs", (2, 2, 16, 16), (1, 2, 16, 16), (1, 2, 16, 16), fp32, False, r"2|1"),
        ("mixed_dtypes", (1, 2, 16, 16), (1, 2, 16, 16), (1, 2, 16, 16),
         (torch.float16, torch.float32, torch.float16), False, r"(?i)float|dtype|half"),
        ("causal_needs_square", (1, 2, 16, 16), (1, 2, 24, 16), (1, 2, 24, 16), fp32, True, r"16|24|causal"),
        ("two_dimensional", (16, 16), (16, 16), (16, 16), fp32, False, r"16|dim|shape"),
    ]


@pytest.mark.check("flash_attention.hidden.errors")
@pytest.mark.parametrize("function", ["flash_attention_forward_pytorch",
                                      pytest.param("flash_attention_forward", marks=pytest.mark.triton)])
@pytest.mark.parametrize("case", error_cases(), ids=lambda case: case[0])
def test_bad_inputs_raise_value_error(impl, device, case, function):
    _, shape_q, shape_k, shape_v, dtypes, is_causal, pattern = case
    q, k, v = (torch.zeros(shape, dtype=dtype, device=function_device(function, device))
               for shape, dtype in zip((shape_q, shape_k, shape_v), dtypes))
    with raises_from_student(ValueError, match=pattern):
        getattr(impl.flash_attention, function)(q, k, v, is_causal)


@pytest.mark.check("flash_attention.hidden.errors")
@pytest.mark.triton
@pytest.mark.parametrize("d", [8, 24, 256])
def test_triton_rejects_unsupported_head_dim(impl, device, d):
    q = torch.zeros(1, 1, 16, d, device=device)
    with raises_from_student(ValueError, match=str(d)):
        impl.flash_attention.flash_attention_forward(q, q, q, False)


# ------------------------------------------------------------------ performance (GPU only)

PERF_BENCHMARKS = [case for case in attention_benchmarks.benchmarks()
                   if case.check in (attention_benchmarks.CHECK_FORWARD, attention_benchmarks.CHECK_BACKWARD)]


def _perf_case(check_id):
    cases = [case for case in PERF_BENCHMARKS if case.check == check_id]
    return pytest.mark.parametrize("case", cases, ids=[case.case.replace(" ", "_") for case in cases])


def _time_against_sdpa(impl, record_perf, case):
    gen = torch.Generator(device="cuda").manual_seed(4321 + len(case.case))
    with impl.guards(forbid=ATTENTION_OPS, require_triton=True):
        result = measure_graded_case(impl, case, gen)
    record_perf(**result.as_record())


@pytest.mark.perf(attention_benchmarks.CHECK_FORWARD)
@pytest.mark.triton
@_perf_case(attention_benchmarks.CHECK_FORWARD)
def test_forward_throughput_against_sdpa(impl, record_perf, case):
    _time_against_sdpa(impl, record_perf, case)


@pytest.mark.perf(attention_benchmarks.CHECK_BACKWARD)
@pytest.mark.triton
@_perf_case(attention_benchmarks.CHECK_BACKWARD)
def test_backward_throughput_against_sdpa(impl, record_perf, case):
    _time_against_sdpa(impl, record_perf, case)
