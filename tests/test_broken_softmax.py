"""The hidden softmax suite catches the classic online-softmax bug: forgetting to rescale.

the softmax_no_rescale variant (tests/broken_variants.py) is the reference module with one realistic bug
(in both the PyTorch update and the Triton online kernel): when a block raises the running max, the
old l and acc are not multiplied by exp(m_old - m_new). The lecture's example then gives 2.6 instead
of 17/6. The hidden suite must fail the tests that guard rescaling, and still pass the tests of what
the module gets right (the one-pass kernel never rescales), so the failures are about the bug.
"""


import pytest
from broken_variants import build_variant, hidden_suite_outcomes

BROKEN = "softmax_no_rescale"
HIDDEN_SUITE = "tests_hidden/test_softmax_hidden.py"

TRAP_TESTS = [
    "test_no_rescale_bug_is_caught_single_score_first",
    "test_worked_example_output_is_not_two_point_six",
    "test_random_merges_match_one_shot_softmax[ragged]",
    "test_masked_first_block_lecture_lse",
    "test_huge_scores_do_not_overflow",
    "test_online_softmax_huge_and_masked_rows",
    "test_triton_unseen_row_lengths[fp32-1x70001]",
    "test_triton_unseen_row_lengths[bf16-2x16385]",
    "test_triton_huge_scores_and_masked_prefix[long]",
]

# What the broken module still gets right: rows that fit one program (no rescale needed).
CONTROL_TESTS = [
    "test_triton_unseen_row_lengths[fp32-3x129]",
    "test_triton_unseen_row_lengths[bf16-2x4097]",
    "test_triton_non_contiguous_input",
    "test_triton_huge_scores_and_masked_prefix[one-pass]",
    "test_online_softmax_unseen_shapes[fp64-(3, 7)-b10]",
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    broken = build_variant(BROKEN, tmp_path_factory.mktemp("variants"))
    return hidden_suite_outcomes(HIDDEN_SUITE, broken, tmp_path_factory.mktemp("broken") / "junit.xml")


@pytest.mark.parametrize("name", TRAP_TESTS)
def test_hidden_suite_fails_the_no_rescale_module(outcomes, name):
    assert outcomes.get(name) == "failed", f"{name}: {outcomes.get(name, 'not collected')}"


@pytest.mark.parametrize("name", CONTROL_TESTS)
def test_hidden_suite_passes_what_the_no_rescale_module_gets_right(outcomes, name):
    assert outcomes.get(name) == "passed", f"{name}: {outcomes.get(name, 'not collected')}"


@pytest.fixture(scope="module")
def no_max_outcomes(tmp_path_factory):
    broken = build_variant("softmax_no_max", tmp_path_factory.mktemp("variants"))
    return hidden_suite_outcomes(HIDDEN_SUITE, broken, tmp_path_factory.mktemp("no_max") / "junit.xml")


@pytest.mark.parametrize("name, want", [("test_triton_huge_scores_and_masked_prefix[one-pass]", "failed"),
                                        ("test_triton_huge_scores_and_masked_prefix[long]", "failed"),
                                        ("test_triton_unseen_row_lengths[fp32-3x129]", "passed")])
def test_hidden_suite_catches_softmax_without_the_max_at_huge_scores(no_max_outcomes, name, want):
    assert no_max_outcomes.get(name) == want, f"{name}: {no_max_outcomes.get(name, 'not collected')}"
