"""The public suite catches the concept mistakes the lecture names, and says which one it saw.

Each variant (tests/broken_variants.py) is the reference with one classic mistake that the public
suite let through before its concept check existed: a Triton softmax that takes exp(x) without
subtracting the max (right for small inputs, NaN at 1000) and a loss scaler that never unscales
(AdamW's update ignores the scale, only an SGD check sees it). For FlashAttention, a PyTorch forward that
never rescales and an lse without the max: the worked example fails and says which. The check must
fail and its message must name the cause; the other public tests of the same function still pass,
so the failure is about the concept and nothing else.
"""

import pytest
from broken_variants import build_variant, suite_failures

CASES = {
    "softmax_no_max": ("tests_public/test_softmax.py", "softmax_triton", {
        "failed": ["test_softmax_triton_of_large_inputs_is_finite[fp32-one-block]",
                   "test_softmax_triton_of_large_inputs_is_finite[fp16-long-row]"],
        "passed": ["test_softmax_triton_matches_torch[fp32-8x37]",
                   "test_softmax_triton_matches_torch[fp32-2x20000]"],
    }, ("Likely cause: exp overflowed", "Subtract the row's max")),
    "mp_never_unscaled": ("tests_public/test_mixed_precision.py", "scaled or scale or injected", {
        "failed": ["test_scaled_fp16_sgd_step_uses_the_unscaled_gradient"],
        "passed": ["test_scale_unscale_and_backoff_arithmetic", "test_injected_inf_skips_step_and_halves_scale"],
    }, ("Likely cause: the gradients were never divided by the loss scale S = 1024",)),
    "fa_pytorch_no_rescale": ("tests_public/test_flash_attention.py", "pytorch_forward_worked_example", {
        "failed": ["test_pytorch_forward_worked_example_gives_17_over_6[k_tile1]",
                   "test_pytorch_forward_worked_example_gives_17_over_6[k_tile2]"],
        "passed": ["test_pytorch_forward_worked_example_gives_17_over_6[k_tile3]"],   # one tile: no rescale
    }, ("Likely cause: when a block raises the running max",)),
    "fa_lse_without_max": ("tests_public/test_flash_attention.py", "pytorch_forward_worked_example", {
        "failed": ["test_pytorch_forward_worked_example_gives_17_over_6[k_tile1]"], "passed": [],
    }, ("Likely cause: lse came out as ln l",)),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("variants")
    return {name: suite_failures(suite, build_variant(name, root), tmp_path_factory.mktemp(name) / "junit.xml",
                                 keyword)
            for name, (suite, keyword, _, _) in CASES.items()}


VERDICTS = [(name, want, test) for name, (_, _, wants, _) in CASES.items() for want, tests in wants.items()
            for test in tests]


@pytest.mark.parametrize("name,want,test", VERDICTS, ids=[f"{n}-{w}-{t}" for n, w, t in VERDICTS])
def test_public_suite_verdict_on_concept_mistake(results, name, want, test):
    outcome, message = results[name].get(test, ("not collected", ""))
    assert outcome == want, f"{name}: {test} {outcome}, expected {want}\n{message}"


@pytest.mark.parametrize("name", list(CASES))
def test_public_suite_names_the_concept_mistake(results, name):
    phrases = CASES[name][3]
    messages = [message for outcome, message in results[name].values() if outcome == "failed"]
    assert messages, f"{name}: nothing failed"
    for message in messages:
        for phrase in phrases:
            assert phrase in message, f"{name}: {phrase!r} missing from the student's message:\n{message}"


def test_block16_matmul_passes_the_cpu_suite_so_only_the_gpu_bench_can_show_it(tmp_path):
    # The write-up's claim: speed is invisible on a CPU. If this starts failing, a CPU test caught it
    # after all and the write-up should say so.
    found = suite_failures("tests_public/test_matmul.py", build_variant("matmul_block16", tmp_path),
                           tmp_path / "junit.xml", "matches or edge or transposed")
    assert found and all(outcome == "passed" for outcome, _ in found.values()), found
