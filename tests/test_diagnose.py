"""grader.diagnose turns a wrong number into a message that names the likely mistake."""

import pytest

from grader.diagnose import check_value, explain_ratio, explain_value, mismatch

SIGNATURES = {1 / 3: "forward pass only", 0.5: "K or V is missing"}


@pytest.mark.parametrize("got, expected, cause", [
    (2.409e23, 7.227e23, "forward pass only"),
    (65_536, 131_072, "K or V is missing"),
    (131_072, 131_072, None),
    (7, 131_072, None),
    (5, 0, None),
    ("memory", "compute", None),
])
def test_explain_ratio_matches_the_factor_of_a_known_mistake(got, expected, cause):
    assert explain_ratio(got, expected, SIGNATURES) == cause


def test_explain_value_matches_a_known_wrong_answer():
    wrong = {0: "partial waves are dropped", 1.11: "a fractional wave"}
    assert explain_value(0, wrong) == "partial waves are dropped"
    assert explain_value(1.1100000001, wrong) == "a fractional wave"
    assert explain_value(2, wrong) is None


def test_mismatch_says_what_got_expected_ratio_and_cause():
    message = mismatch("training_flops(8.03e9, 15e12)", 2.409e23, 7.227e23, signatures=SIGNATURES)
    assert message.startswith("training_flops(8.03e9, 15e12) returned 2.409e+23, expected 7.227e+23")
    assert "got / expected = 0.3333" in message
    assert "Likely cause: forward pass only" in message


def test_mismatch_falls_back_to_the_rule_when_no_signature_matches():
    message = mismatch("num_tiles(1793, 1793, 256, 128)", 121, 120, signatures=SIGNATURES, why="ceil each side")
    assert "returned 121, expected 120" in message and "ceil each side" in message
    assert "Likely cause" not in message


def test_check_value_compares_ints_exactly_and_floats_to_1e_9():
    check_value("f()", 16, 16)
    check_value("f()", 0.1 + 0.2, 0.3)
    check_value("f()", 16.0, 16)                       # an exact float is accepted for an int
    with pytest.raises(AssertionError, match="returned 1,099,511,627,777, expected 1,099,511,627,776"):
        check_value("matmul_flops(8192, 8192, 8192)", 1_099_511_627_777, 1_099_511_627_776)
    with pytest.raises(AssertionError, match="returned 1.000001"):
        check_value("f()", 1.000001, 1.0)


def test_check_value_refuses_a_bool_for_a_count_and_compares_other_values_with_eq():
    with pytest.raises(AssertionError):
        check_value("f()", True, 1)
    check_value("bound()", "memory", "memory")
    with pytest.raises(AssertionError, match="'compute'"):
        check_value("bound()", "compute", "memory")
    with pytest.raises(AssertionError, match=r"expected \{.a.: 18\}\n16 is a fixed total"):
        check_value("f()", {"a": 16}, {"a": 18}, wrong_answers={16: "never this"}, why="16 is a fixed total")


@pytest.mark.parametrize("got", [10**4000, -10**4000, 10**5000, "x" * 100_000, {"flops": 1}, [1, 2], None, True,
                                 float("nan"), float("inf")], ids=lambda value: type(value).__name__)
@pytest.mark.parametrize("expected", [7.227e23, 3, 0, float("inf"), "compute"])
def test_check_value_fails_with_a_message_whatever_the_student_returned(got, expected):
    """A value the student returned must never crash the check: any mismatch is an AssertionError."""
    if type(got) is type(expected) and got == expected:
        return
    with pytest.raises(AssertionError) as failure:
        check_value("f()", got, expected, signatures=SIGNATURES, wrong_answers={0: "zero", 1.5: "half"})
    assert len(str(failure.value)) < 1000


def test_mismatch_names_a_huge_int_and_a_value_of_the_wrong_type():
    assert "an int of about 4001 digits" in mismatch("f()", 10**4000, 3.0, signatures=SIGNATURES)
    assert "a str where an int was expected" in mismatch("f()", "3", 3)
