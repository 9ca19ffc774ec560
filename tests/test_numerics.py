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


def test_lowp_ulp_floor_scales_with_the_results_magnitude_and_dtype():
    reference = torch.tensor([1000.0, 1.0], dtype=torch.float64)
    naive = reference.half()                                  # exact: the naive error is 0
    one_ulp_off = torch.tensor([1000.5, 1.0], dtype=torch.float16)   # 0.5 = 1 ulp of fp16 at 1000
    with pytest.raises(Failed, match=r"2 ulp of float16 at \|o\| = 1e\+03"):
        assert_close_lowp(torch.tensor([1002.0, 1.0], dtype=torch.float16), reference, naive, ulps=2, what="o")
    assert_close_lowp(one_ulp_off, reference, naive, ulps=2, what="o")


def test_lowp_names_tf32_when_a_float32_error_is_tf32_sized():
    reference = torch.linspace(-4, 4, 64, dtype=torch.float64)
    tf32_like = (reference * (1 + 2.0 ** -11)).float()
    with pytest.raises(Failed, match=r'TF32-sized.*input_precision="ieee"'):
        assert_close_lowp(tf32_like, reference, reference.float(), ulps=2)


def test_lowp_names_input_dtype_accumulation_for_a_float32_result_of_half_inputs():
    reference = torch.linspace(1, 5, 64, dtype=torch.float64)
    rounded_through_fp16 = reference.half().float()
    expected = "size of float16 rounding: keep the running max, the running sum and lse in float32"
    with pytest.raises(Failed, match=expected):
        assert_close_lowp(rounded_through_fp16, reference, reference.float(), ulps=2, input_dtype=torch.float16,
                          what="lse")


def test_lowp_adds_no_hint_to_a_plainly_wrong_result():
    reference = torch.linspace(1, 5, 64, dtype=torch.float64)
    with pytest.raises(Failed) as failure:
        assert_close_lowp((reference * 1.5).float(), reference, reference.float(), ulps=2)
    assert "TF32" not in str(failure.value) and "rounding" not in str(failure.value)


NEG_INF, POS_INF, NAN = float("-inf"), float("inf"), float("nan")


@pytest.mark.parametrize("rtol", [0.0, 1e-5])
def test_assert_close_rejects_a_finite_value_where_minus_inf_is_expected(rtol):
    # rtol * |-inf| made the bound NaN (rtol = 0) or inf, and every value passed: a wrong lse got through
    with pytest.raises(Failed, match="1 of 2 elements off"):
        assert_close(torch.tensor([0.5, 3.0]), torch.tensor([0.5, NEG_INF]), atol=1e-6, rtol=rtol, what="lse")


@pytest.mark.parametrize("actual", [POS_INF, NAN, 1e308])
def test_assert_close_matches_minus_inf_only_with_minus_inf(actual):
    with pytest.raises(Failed):
        assert_close(torch.tensor([actual], dtype=torch.float64), torch.tensor([NEG_INF], dtype=torch.float64),
                     atol=1.0, rtol=1.0)
    assert_close(torch.tensor([NEG_INF]), torch.tensor([NEG_INF]), atol=0.0)


@pytest.mark.parametrize("expected", [0.0, POS_INF, 1e300])
def test_assert_close_never_passes_nan_where_a_number_is_expected(expected):
    with pytest.raises(Failed):
        assert_close(torch.tensor([NAN], dtype=torch.float64), torch.tensor([expected], dtype=torch.float64),
                     atol=1e300, rtol=1.0)


def test_assert_close_matches_an_expected_nan_only_with_nan():
    assert_close(torch.tensor([NAN, 1.0]), torch.tensor([NAN, 1.0]), atol=0.0)
    with pytest.raises(Failed):
        assert_close(torch.tensor([0.0]), torch.tensor([NAN]), atol=1e9, rtol=1.0)


def test_lowp_rejects_a_finite_value_where_minus_inf_is_expected():
    reference = torch.tensor([1.0, NEG_INF], dtype=torch.float64)
    naive = torch.tensor([1.01, NEG_INF], dtype=torch.float32)
    with pytest.raises(Failed, match="1 of 2 elements off"):
        assert_close_lowp(torch.tensor([1.0, -80.0]), reference, naive)
    assert_close_lowp(torch.tensor([1.0, NEG_INF]), reference, naive)
