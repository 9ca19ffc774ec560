"""The hidden mixed-precision suite catches two realistic bugs, each in a full copy of the module.

- mp_bf16_master_weights: the step casts the model to bf16/fp16 ("just train in low precision"), so the
  optimizer updates low-precision weights: tiny updates round away and training drifts from fp32.
- mp_never_unscaled: step() never divides the gradients by the scale (a variant of the public check's
  mistake: the hidden suite sees it in a 1e-8 gradient that must come back as 1e-8).
- mp_no_inf_check: unscale_ never reports inf/NaN, so an overflowing step is taken and the scale
  never backs off.
Each must fail the tests that guard its bug and pass the tests of what it gets right.
"""


import pytest
from broken_variants import build_variant, hidden_suite_outcomes

HIDDEN_SUITE = "tests_hidden/test_mixed_precision_hidden.py"

EXPECTED = {
    "mp_bf16_master_weights": {
        "failed": [
            "test_tiny_updates_accumulate_in_master_weights[sgd-200x5e-4]",
            "test_tiny_updates_accumulate_in_master_weights[adam-40x2e-3]",
            "test_bf16_layernorm_mlp_eight_sgd_steps_track_fp32",
            "test_fp16_with_scaler_and_adamw_tracks_fp32",
        ],
        "passed": [
            "test_gradients_are_zeroed_between_steps",
            "test_scale_of_one_loses_the_tiny_fp16_gradient",
            "test_small_addends_after_a_large_one_are_lost[bf16]",
        ],
    },
    "mp_never_unscaled": {
        "failed": ["test_tiny_fp16_gradient_survives_with_scaling"],
        # AdamW divides by the gradient's own running size, so the scale cancels: only SGD-like checks see it
        "passed": ["test_fp16_with_scaler_and_adamw_tracks_fp32", "test_gradients_are_zeroed_between_steps"],
    },
    "mp_no_inf_check": {
        "failed": [
            "test_nan_batch_skips_step_in_bf16_then_scale_grows",
            "test_too_large_initial_scale_backs_off_until_steps_go_through",
        ],
        "passed": [
            "test_fp16_with_scaler_and_adamw_tracks_fp32",
            "test_tiny_fp16_gradient_survives_with_scaling",
            "test_tiny_updates_accumulate_in_master_weights[sgd-200x5e-4]",
        ],
    },
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("variants")
    return {broken: hidden_suite_outcomes(HIDDEN_SUITE, build_variant(broken, root),
                                          tmp_path_factory.mktemp("broken") / "junit.xml")
            for broken in EXPECTED}


CASES = [(broken, want, name) for broken, wants in EXPECTED.items() for want, names in wants.items()
         for name in names]


@pytest.mark.parametrize("broken,want,name", CASES, ids=[f"{b.split('/')[-1]}-{w}-{n}" for b, w, n in CASES])
def test_hidden_suite_verdict_on_broken_module(outcomes, broken, want, name):
    got = outcomes[broken].get(name, "not collected")
    assert got == want, f"{broken}: {name} {got}, expected {want}"
