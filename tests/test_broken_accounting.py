"""The accounting suites catch each of the lecture's traps, and say which trap it was.

tests/fixtures/broken/accounting_traps/accounting.py is a realistic wrong submission: most functions
are right, a few fall into one trap each (GB for GiB, the hard-coded 2 + 2 + 4 + 8 table, no factor 2
in the KV cache, causal ignored, the slide's inverted intensity, waves rounded to nearest, no PUE, no
input checks, the notes' 528 tensor cores, uncapped utilization, the slowest branch instead of the
sum, free recomputation, a fixed loss scale of 512, the batch ignored, overlapping launches).
Running the hidden suite against it must fail exactly the tests that guard those traps, and must
still pass tests of the functions it gets right (so the failures are about the traps, not a suite that
fails everything). The public suite must fail it too, with a message naming the mistake, and so must
it fail the one-bug variants acc_forward_only_6nd and acc_waves_floor (tests/broken_variants.py).
"""


import pytest
from broken_variants import build_variant, hidden_suite_outcomes, junit_failures

BROKEN = "tests/fixtures/broken/accounting_traps"
HIDDEN_SUITE = "tests_hidden/test_accounting_hidden.py"
PUBLIC_SUITE = "tests_public/test_accounting.py"

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
    "test_a100_has_432_tensor_cores_not_528",
    "test_min_warps_round_up[16-500-33]",
    "test_divergence_pays_every_branch_taken",
    "test_coalescing_on_other_strides_sizes_and_alignments",
    "test_partial_recomputation_costs_less",
    "test_loss_scale_is_the_smallest_power_of_two_that_suffices[1e-7]",
    "test_batched_decode_reads_the_weights_once_and_every_kv_cache",
    "test_crossover_on_other_models_and_batches",
    "test_gqa_projections_shrink_k_and_v",
    "test_cuda_graphs_and_fusion_cut_launch_overhead[both]",
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
    "test_min_warps_round_up[4-400-101]",
    "test_chain_traffic_and_speedup_on_other_chains",
    "test_sigmoid_chain_accesses_grow_only_without_recomputation",
    "test_peak_ladder_on_other_formats_and_gpus",
    "test_mx_storage_on_ragged_sizes_and_with_the_transpose",
    "test_round_up_to_other_multiples",
    "test_llama3_70b_int4_decodes_in_10_5_ms_at_95_tokens_per_s",
    "test_a100_decode_is_compute_bound_from_batch_166_not_256",
    "test_loss_scale_is_the_smallest_power_of_two_that_suffices[bf16_needs_none]",
]

# Public tests the broken module fails, with the words that name its mistake in the message.
PUBLIC_TRAPS = {
    "test_8b_bf16_weights_are_16e9_bytes_which_is_14_90_gib": "divides by 1e9 (GB)",
    "test_training_bytes_follow_the_options_not_a_fixed_16": "16 is the lecture's total",
    "test_llama3_8b_kv_cache_is_128kib_per_token": "K or V is missing",
    "test_causal_attention_counts_half_the_score_matrix": "causal=True was ignored",
    "test_fp32_relu_intensity_is_0_125_not_8": "bytes per FLOP, the inverse",
    "test_1793_squared_needs_a_second_wave_of_12_tiles": "round up",
    "test_pue_1_2_multiplies_the_energy": "PUE is missing",
    "test_one_warp_hides_1_percent_and_64_warps_64_percent_of_a_400_cycle_load": "min(1, ...)",
    "test_two_10_cycle_branches_cost_20_once_one_thread_diverges": "sum of every branch",
    "test_full_recomputation_costs_4f_over_3f": "counted as free",
    "test_llama3_8b_weights_without_the_embedding_are_14_0_of_15_gib": "output head is a matmul",
    "test_kv_cache_reads_match_the_weights_at_114688_tokens_or_3584_at_batch_32": "batch is ignored",
    "test_mha_projections_are_8btd2": "one projection is missing",
    "test_200_kernel_launches_at_5_us_take_1200_us_and_the_gpu_is_busy_17_percent": "waits for its launch",
}

# One-bug variants of the solution: (variant, public test, words of the message).
VARIANT_TRAPS = [
    ("acc_forward_only_6nd", "test_llama3_8b_on_15t_tokens_is_6nd", "forward pass only"),
    ("acc_waves_floor", "test_1792_squared_is_98_tiles_in_one_wave_on_108_sms", "partial waves are dropped"),
    ("acc_waves_floor", "test_8192_squared_in_128_tiles_is_32_waves_at_0_970_on_132_sms", "round up"),
]

HARNESS_NOISE = ("_ModuleProxy", "<lambda>", "grader/impl.py", "grader/diagnose.py")


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


@pytest.fixture(scope="module")
def public_failures(tmp_path_factory):
    """{test name: failure text} from running the public suite against the broken module."""
    report = tmp_path_factory.mktemp("broken_accounting_public") / "junit.xml"
    hidden_suite_outcomes(PUBLIC_SUITE, BROKEN, report, timeout=300)
    return junit_failures(report)


@pytest.mark.parametrize("name", PUBLIC_TRAPS)
def test_public_suite_names_the_mistake_of_the_broken_module(public_failures, name):
    assert name in public_failures, f"{name} passed the broken module"
    message = public_failures[name]
    assert PUBLIC_TRAPS[name] in message, message
    assert not any(noise in message for noise in HARNESS_NOISE), message


@pytest.fixture(scope="module")
def variant_failures(tmp_path_factory):
    """{variant: {test name: failure text}} from the public suite against each one-bug variant."""
    root = tmp_path_factory.mktemp("accounting_variants")
    failures = {}
    for variant in sorted({variant for variant, _, _ in VARIANT_TRAPS}):
        report = root / f"{variant}.xml"
        hidden_suite_outcomes(PUBLIC_SUITE, build_variant(variant, root), report, timeout=300)
        failures[variant] = junit_failures(report)
    return failures


@pytest.mark.parametrize("variant, name, words", VARIANT_TRAPS, ids=[f"{v}-{n}" for v, n, _ in VARIANT_TRAPS])
def test_public_suite_explains_the_classic_accounting_bug(variant_failures, variant, name, words):
    failures = variant_failures[variant]
    assert name in failures, f"{name} passed the {variant} variant"
    assert words in failures[name], failures[name]
    assert not any(noise in failures[name] for noise in HARNESS_NOISE), failures[name]
