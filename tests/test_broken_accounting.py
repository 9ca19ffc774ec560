"""The hidden accounting suite catches each of the lecture's traps.

tests/fixtures/broken/accounting_traps/accounting.py is a realistic wrong submission: most functions
are right, a few fall into one trap each (GB for GiB, the hard-coded 2 + 2 + 4 + 8 table, no factor 2
in the KV cache, causal ignored, the slide's inverted intensity, waves rounded to nearest, no PUE, no
input checks). Running the hidden suite against it must fail exactly the tests that guard those traps,
and must still pass tests of the functions it gets right (so the failures are about the traps, not a
suite that fails everything).
"""


import pytest
from broken_variants import hidden_suite_outcomes

BROKEN = "tests/fixtures/broken/accounting_traps"
HIDDEN_SUITE = "tests_hidden/test_accounting_hidden.py"

TRAP_TESTS = [
    "test_gib_uses_binary_units",
    "test_all_fp32_adam_totals_16_but_splits_4_4_0_8[master_flag_on]",
    "test_all_fp32_adam_totals_16_but_splits_4_4_0_8[master_flag_off]",
    "test_fp32_gradients_make_18_bytes_per_param",
    "test_kv_cache_counts_both_keys_and_values",
    "test_causal_attention_halves_any_shape",
    "test_fp16_relu_intensity_is_0_25_flop_per_byte",
    "test_one_extra_tile_row_adds_a_whole_wave",
    "test_energy_multiplies_facility_overhead_pue",
    "test_bad_input_raises_value_error_naming_the_argument[zero_bandwidth_time]",
    "test_bad_input_raises_value_error_naming_the_argument[negative_kv_heads]",
]

# Functions the broken module gets right: their tests must pass against it.
CONTROL_TESTS = [
    "test_405b_bf16_weights_are_810e9_bytes",
    "test_no_master_copy_makes_12_bytes_per_param",
    "test_non_square_matmul_is_2mkn",
    "test_6nd_uses_the_parameter_count_given",
    "test_a100_ridges_are_153_for_bf16_and_9_56_for_fp32",
    "test_257_squared_needs_9_tiles_of_128",
    "test_energy_uses_effective_throughput_not_peak",
    "test_bad_input_raises_value_error_naming_the_argument[unknown_optimizer]",
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """{test name: "passed" | "failed"} from running the hidden suite against the broken module."""
    report = tmp_path_factory.mktemp("broken_accounting") / "junit.xml"
    return hidden_suite_outcomes(HIDDEN_SUITE, BROKEN, report, timeout=300)


@pytest.mark.parametrize("name", TRAP_TESTS)
def test_hidden_suite_fails_the_broken_module_on_the_trap(outcomes, name):
    assert outcomes.get(name) == "failed", f"{name}: {outcomes.get(name, 'not collected')}"


@pytest.mark.parametrize("name", CONTROL_TESTS)
def test_hidden_suite_passes_what_the_broken_module_gets_right(outcomes, name):
    assert outcomes.get(name) == "passed", f"{name}: {outcomes.get(name, 'not collected')}"
