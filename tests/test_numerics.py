"""The comparison helpers tests rely on: the low-precision rule, plain tolerances, messages, seeds."""

from __future__ import annotations

import pytest
import torch

from grader.numerics import assert_close, assert_close_lowp, max_abs_error, randn, seed_for

Failed = pytest.fail.Exception


@pytest.fixture
def bf16_matmul():
    """An fp64 reference, the naive bf16 result, and the naive error, for a 64x64 product."""
    gen = torch.Generator().manual_seed(1234)
    a, b = torch.randn(64, 64, generator=gen), torch.randn(64, 64, generator=gen)
    reference = a.double() @ b.double()
    naive = (a.bfloat16() @ b.bfloat16())
    return reference, naive, max_abs_error(naive, reference)


def test_lowp_accepts_a_result_as_accurate_as_the_naive_one(bf16_matmul):
    reference, naive, naive_error = bf16_matmul
    assert naive_error > 1e-3  # the rule only means something when bf16 really loses precision
    assert_close_lowp(naive.clone(), reference, naive, context="M=64 bf16")


def test_lowp_rejects_ten_times_the_naive_error_with_context_error_and_bound(bf16_matmul):
    reference, naive, naive_error = bf16_matmul
    worse = (reference + 10 * (naive.double() - reference)).float()
    with pytest.raises(Failed) as failure:
        assert_close_lowp(worse, reference, naive, what="c", context="M=64 K=64 N=64 bf16")
    message = str(failure.value)
    assert "[M=64 K=64 N=64 bf16]" in message
    assert "c mismatch" in message
    assert f"max abs error {10 * naive_error:.3g}" in message
    assert f"allowed {2 * naive_error + 1e-5:.3g}" in message


def test_lowp_factor_widens_the_bound(bf16_matmul):
    reference, naive, _ = bf16_matmul
    worse = (reference + 2.5 * (naive.double() - reference)).float()
    with pytest.raises(Failed):
        assert_close_lowp(worse, reference, naive, factor=2.0)
    assert_close_lowp(worse, reference, naive, factor=3.0)


def test_lowp_reports_shape_mismatch():
    with pytest.raises(Failed, match=r"\[ctx\] o has shape \(3,\), expected \(4,\)"):
        assert_close_lowp(torch.zeros(3), torch.zeros(4), torch.zeros(4), what="o", context="ctx")


def test_lowp_rejects_a_non_tensor():
    with pytest.raises(Failed, match="expected a tensor, got list"):
        assert_close_lowp([0.0], torch.zeros(1), torch.zeros(1))


def test_lowp_counts_nan_as_a_failure(bf16_matmul):
    reference, naive, _ = bf16_matmul
    actual = naive.clone()
    actual[3, 5] = float("nan")
    with pytest.raises(Failed, match=r"1 of 4096 elements off.*index \[3, 5\]"):
        assert_close_lowp(actual, reference, naive)


def test_lowp_bound_stays_finite_when_the_naive_result_overflows():
    reference = torch.tensor([1.0, 70000.0], dtype=torch.float64)
    naive = reference.half()                   # 70000 overflows fp16 to inf
    garbage = torch.tensor([float("nan"), 0.0])
    with pytest.raises((Failed, ValueError)):
        assert_close_lowp(garbage, reference, naive)


def test_lowp_accepts_matching_infinities():
    reference = torch.tensor([1.0, float("-inf")], dtype=torch.float64)
    assert_close_lowp(torch.tensor([1.0, float("-inf")]), reference, reference.float())


def test_assert_close_passes_within_atol_and_rtol():
    expected = torch.tensor([1.0, 100.0])
    assert_close(torch.tensor([1.05, 101.0]), expected, atol=0.1, rtol=0.01)


def test_assert_close_message_names_context_error_index_and_tolerance():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 0.5
    with pytest.raises(Failed) as failure:
        assert_close(actual, expected, atol=1e-3, what="lse", context="rows=2 fp32")
    message = str(failure.value)
    for part in ("[rows=2 fp32]", "lse mismatch", "1 of 6 elements off", "max abs error 0.5",
                 "index [1, 2]", "atol=0.001"):
        assert part in message, message


def test_assert_close_counts_nan_as_a_failure():
    with pytest.raises(Failed, match="max abs error inf"):
        assert_close(torch.tensor([float("nan")]), torch.tensor([0.0]), atol=1.0)


def test_assert_close_reports_shape_mismatch():
    with pytest.raises(Failed, match=r"has shape \(2, 2\), expected \(4,\)"):
        assert_close(torch.zeros(2, 2), torch.zeros(4), atol=1.0)


def test_max_abs_error_treats_nan_as_infinite_and_equal_infinities_as_exact():
    assert max_abs_error(torch.tensor([float("nan")]), torch.tensor([0.0])) == float("inf")
    assert max_abs_error(torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), 1.5])) == 0.5
    assert max_abs_error(torch.tensor([float("inf")]), torch.tensor([float("-inf")])) > 1e300


def test_seed_for_is_stable_and_differs_by_salt():
    nodeid = "tests_public/test_softmax.py::test_rows[3]"
    assert seed_for(nodeid, "public") == seed_for(nodeid, "public")
    assert seed_for(nodeid, "public") != seed_for(nodeid, "hidden")
    assert seed_for(nodeid, "public") != seed_for(nodeid + "x", "public")
    assert 0 <= seed_for(nodeid, "hidden") < 2**31


def test_randn_is_reproducible_per_generator_and_casts():
    first = randn((4, 4), dtype=torch.bfloat16, gen=torch.Generator().manual_seed(7))
    second = randn((4, 4), dtype=torch.bfloat16, gen=torch.Generator().manual_seed(7))
    assert first.dtype == torch.bfloat16 and torch.equal(first, second)
