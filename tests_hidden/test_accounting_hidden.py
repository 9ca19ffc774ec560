"""Hidden tests for `accounting`: configurations the public suite never shows, and the lecture's traps.

The traps each test guards (the broken fixture tests/fixtures/broken/accounting_traps falls into them):
- the 16 bytes/param total is not the split: all-FP32 Adam is 4 + 4 + 0 + 8, not 2 + 2 + 4 + 8;
- the KV cache holds keys AND values (the factor 2);
- GiB is 2**30 bytes, not 1e9;
- intensity is FLOPs per byte (ReLU FP16 0.25), not the slide's inverted bytes per FLOP;
- causal attention counts half the score matrix;
- waves round up (one extra row of tiles can cost a whole wave);
- energy includes the PUE;
- bad input raises ValueError (not ZeroDivisionError, not a silent negative size).
"""

import pytest

from grader.testing import raises_from_student

H100_BF16_PEAK = 989e12
H100_BANDWIDTH = 3.35e12
A100_BF16_PEAK = 312e12
A100_FP32_PEAK = 19.5e12
A100_BANDWIDTH = 2.039e12


def exactly(value):
    """pytest.approx tight enough that only rounding differences pass."""
    return pytest.approx(value, rel=1e-9)


# ---------------------------------------------------------------------------------------------- memory

@pytest.mark.check("accounting.memory.variants")
def test_27b_bf16_weights_are_54e9_bytes_which_is_50_29_gib(impl):
    n_bytes = impl.accounting.param_bytes(27e9, "bf16")
    assert n_bytes == 54_000_000_000
    assert impl.accounting.bytes_to_gib(n_bytes) == exactly(50.29141902923584)


@pytest.mark.check("accounting.memory.variants")
def test_gib_uses_binary_units(impl):
    assert impl.accounting.bytes_to_gib(2**30) == exactly(1.0)
    assert impl.accounting.bytes_to_gib(1e9) == exactly(0.931322574615478515625)   # 1 GB < 1 GiB


@pytest.mark.check("accounting.memory.variants")
def test_405b_bf16_weights_are_810e9_bytes(impl):
    assert impl.accounting.param_bytes(405e9, "bf16") == 810_000_000_000


@pytest.mark.check("accounting.memory.variants")
def test_70b_bf16_is_141e9_bytes_and_int4_is_35e9(impl):
    assert impl.accounting.param_bytes(70.6e9, "bf16") == 141_200_000_000      # does not fit 80 GB
    assert impl.accounting.param_bytes(70.6e9, "int4") == 35_300_000_000


@pytest.mark.check("accounting.memory.variants")
@pytest.mark.parametrize("dtype, n_bytes", [("fp32", 12), ("fp16", 6), ("fp8", 3), ("int8", 3),
                                            ("int4", 2), ("fp64", 24)])
def test_weight_bytes_follow_the_dtype_width(impl, dtype, n_bytes):
    # 3 parameters; an odd number of int4 values still occupies a whole last byte
    assert impl.accounting.param_bytes(3, dtype) == n_bytes


@pytest.mark.check("accounting.memory.variants")
def test_fp32_gradients_make_18_bytes_per_param(impl):
    assert impl.accounting.training_bytes_per_param(grad_dtype="fp32") == 18    # 2 + 4 + 4 + 8


@pytest.mark.check("accounting.memory.variants")
def test_no_master_copy_makes_12_bytes_per_param(impl):
    assert impl.accounting.training_bytes_per_param(master_weights=False) == 12  # 2 + 2 + 0 + 8


@pytest.mark.check("accounting.memory.variants")
@pytest.mark.parametrize("master_weights", [True, False], ids=["master_flag_on", "master_flag_off"])
def test_all_fp32_adam_totals_16_but_splits_4_4_0_8(impl, master_weights):
    # FP32 weights are their own master copy, so the flag adds nothing here
    options = dict(weight_dtype="fp32", grad_dtype="fp32", master_weights=master_weights)
    assert impl.accounting.training_bytes_per_param(**options) == 16
    assert impl.accounting.training_bytes_breakdown(**options) == {
        "weights": 4, "gradients": 4, "master_weights": 0, "optimizer_state": 8}


@pytest.mark.check("accounting.memory.variants")
@pytest.mark.parametrize("options, total", [
    (dict(optimizer_state_dtype="int8"), 10),                 # 8-bit Adam: 2 + 2 + 4 + 2
    (dict(optimizer_state_dtype="bf16"), 12),                 # 2 + 2 + 4 + 4
    (dict(optimizer="sgd"), 8),                               # no state: 2 + 2 + 4
    (dict(optimizer="sgd_momentum"), 12),                     # one fp32 state: 2 + 2 + 4 + 4
    (dict(optimizer="adam", grad_dtype="fp32", master_weights=False), 14),   # 2 + 4 + 0 + 8
], ids=["8bit_adam", "bf16_moments", "sgd", "sgd_momentum", "adam_fp32_grads_no_master"])
def test_optimizer_state_follows_the_optimizer_and_its_dtype(impl, options, total):
    assert impl.accounting.training_bytes_per_param(**options) == total


@pytest.mark.check("accounting.memory.variants")
def test_training_memory_follows_the_options(impl):
    assert impl.accounting.training_memory_bytes(7e9, grad_dtype="fp32") == 126_000_000_000  # 7e9 x 18
    assert impl.accounting.training_memory_bytes(1_000_003, master_weights=False) == 12_000_036


@pytest.mark.check("accounting.memory.variants")
def test_max_trainable_params_rounds_down_and_80gib_is_not_80gb(impl):
    assert impl.accounting.max_trainable_params(80 * 2**30) == 5_368_709_120
    assert impl.accounting.max_trainable_params(80e9, bytes_per_param=18) == 4_444_444_444
    assert impl.accounting.max_trainable_params(141e9, 12) == 11_750_000_000


@pytest.mark.check("accounting.memory.variants")
def test_kv_cache_counts_both_keys_and_values(impl):
    # Llama-3 70B shape: 80 layers, 8 KV heads of 128, context 4096, BF16: 2 x 80 x 8 x 128 x 4096 x 2
    assert impl.accounting.kv_cache_bytes(80, 8, 128, 4096) == 1_342_177_280


@pytest.mark.check("accounting.memory.variants")
def test_kv_cache_of_batch_256_at_context_2048_is_64gib(impl):
    assert impl.accounting.kv_cache_bytes(32, 8, 128, 2048, batch=256) == 64 * 2**30


@pytest.mark.check("accounting.memory.variants")
def test_kv_cache_at_128k_context_and_batch_32_is_512gib(impl):
    assert impl.accounting.kv_cache_bytes(32, 8, 128, 131_072, batch=32) == 512 * 2**30
    assert impl.accounting.kv_cache_bytes(32, 8, 128, 131_072, batch=32, bytes_per_elem=0.5) == 128 * 2**30


@pytest.mark.check("accounting.memory.variants")
def test_attention_matrices_scale_with_batch_heads_and_both_lengths(impl):
    assert impl.accounting.attention_matrix_bytes(4096, 4096, heads=32) == 2**30
    assert impl.accounting.attention_matrix_bytes(1, 8192, heads=8, batch=4, bytes_per_elem=4) == 1_048_576


# ----------------------------------------------------------------------------------------------- flops

@pytest.mark.check("accounting.flops.variants")
def test_non_square_matmul_is_2mkn(impl):
    assert impl.accounting.matmul_flops(2048, 4096, 4096) == 68_719_476_736
    assert impl.accounting.matmul_flops(3, 5, 7) == 210


@pytest.mark.check("accounting.flops.variants")
@pytest.mark.parametrize("convention, flops", [("2mkn", 16), ("exact", 12), ("fma", 8)])
def test_matmul_counting_conventions_on_2x2x2(impl, convention, flops):
    assert impl.accounting.matmul_flops(2, 2, 2, convention=convention) == flops


@pytest.mark.check("accounting.flops.variants")
def test_llama3_70b_swiglu_ffn_is_6df(impl):
    assert impl.accounting.ffn_flops_per_token(8192, 28672, swiglu=True) == 1_409_286_144
    assert impl.accounting.ffn_flops_per_token(768, 3072) == 9_437_184


@pytest.mark.check("accounting.flops.variants")
def test_llama3_8b_attention_over_32_layers_is_2_2_tflop(impl):
    per_layer = impl.accounting.attention_flops(1, 32, 2048, 2048, 128)
    assert 32 * per_layer == 2_199_023_255_552


@pytest.mark.check("accounting.flops.variants")
def test_causal_attention_halves_any_shape(impl):
    full = 4 * 2 * 16 * 1024 * 1024 * 64
    assert impl.accounting.attention_flops(2, 16, 1024, 1024, 64) == full
    assert impl.accounting.attention_flops(2, 16, 1024, 1024, 64, causal=True) == full // 2


@pytest.mark.check("accounting.flops.variants")
def test_attention_scales_with_both_sequence_lengths(impl):
    # decode: one query against 8192 cached keys
    assert impl.accounting.attention_flops(4, 8, 1, 8192, 128) == 4 * 4 * 8 * 8192 * 128


@pytest.mark.check("accounting.flops.variants")
def test_attention_backward_is_2_5x_the_forward(impl):
    assert impl.accounting.attention_flops(1, 8, 512, 512, 64, backward=True) == 10 * 8 * 512 * 512 * 64
    assert impl.accounting.attention_flops(1, 8, 512, 512, 64, causal=True, backward=True) == \
        5 * 8 * 512 * 512 * 64


@pytest.mark.check("accounting.flops.variants")
def test_6nd_uses_the_parameter_count_given(impl):
    assert impl.accounting.training_flops(124e6, 300e9) == exactly(2.232e20)        # GPT-2 small
    assert impl.accounting.training_flops(6.98e9, 15e12) == exactly(6.282e23)        # non-embedding 8B


@pytest.mark.check("accounting.flops.variants")
def test_days_and_gpu_hours_at_40_percent_mfu(impl):
    assert impl.accounting.training_days(7.23e23, 2048, H100_BF16_PEAK, 0.4) == exactly(10.328525345642344)
    assert impl.accounting.training_days(7.227e23, 1000, H100_BF16_PEAK, 0.4) == exactly(21.144042804179307)
    assert impl.accounting.gpu_hours(7.227e23, H100_BF16_PEAK, 0.4) == exactly(507457.02730030334)


@pytest.mark.check("accounting.flops.variants")
def test_mfu_of_a_small_run(impl):
    # 8 GPUs at 312e12 for one hour doing 3.6e18 useful FLOPs: 3.6e18 / (8 x 312e12 x 3600)
    assert impl.accounting.mfu(3.6e18, 8, A100_BF16_PEAK, 3600) == exactly(1e15 / (8 * 312e12))


# -------------------------------------------------------------------------------------------- roofline

@pytest.mark.check("accounting.roofline.variants")
def test_a100_ridges_are_153_for_bf16_and_9_56_for_fp32(impl):
    assert impl.accounting.ridge_point(A100_BF16_PEAK, A100_BANDWIDTH) == exactly(312 / 2.039)
    assert impl.accounting.ridge_point(A100_FP32_PEAK, A100_BANDWIDTH) == exactly(19.5 / 2.039)


@pytest.mark.check("accounting.roofline.variants")
def test_4096_matmul_on_a100_is_7_05ms_fp32_and_0_44ms_bf16(impl):
    flops = 2 * 4096**3
    fp32 = impl.accounting.roofline_time(flops, 3 * 4096**2 * 4, A100_FP32_PEAK, A100_BANDWIDTH)
    bf16 = impl.accounting.roofline_time(flops, 3 * 4096**2 * 2, A100_BF16_PEAK, A100_BANDWIDTH)
    assert fp32 == exactly(flops / 19.5e12)      # 7.048 ms, compute-bound
    assert bf16 == exactly(flops / 312e12)       # 0.4405 ms, 16x faster


@pytest.mark.check("accounting.roofline.variants")
def test_rmsnorm_and_residual_add_are_memory_bound_on_h100(impl):
    elements = 16 * 4096 * 8192                  # 536,870,912 BF16 elements
    rmsnorm = impl.accounting.roofline_time(5 * elements, 4 * elements, H100_BF16_PEAK, H100_BANDWIDTH)
    residual = impl.accounting.roofline_time(elements, 6 * elements, H100_BF16_PEAK, H100_BANDWIDTH)
    assert rmsnorm == exactly(4 * elements / 3.35e12)      # 0.641 ms
    assert residual == exactly(6 * elements / 3.35e12)     # 0.962 ms


@pytest.mark.check("accounting.roofline.variants")
def test_fp16_relu_intensity_is_0_25_flop_per_byte(impl):
    n = 3 * 1024
    assert impl.accounting.arithmetic_intensity(n, 4 * n) == exactly(0.25)
    assert impl.accounting.arithmetic_intensity(6e9, 2e9) == exactly(3.0)


@pytest.mark.check("accounting.roofline.variants")
def test_prefill_q_projection_intensity_is_1024(impl):
    assert impl.accounting.matmul_intensity(2048, 4096, 4096, 2) == exactly(1024.0)
    assert impl.accounting.matmul_intensity(4096, 4096, 4096, 4) == exactly(4096 / 6)


@pytest.mark.check("accounting.roofline.variants")
def test_attainable_flops_is_capped_by_the_peak(impl):
    assert impl.accounting.attainable_flops(8192 / 3, H100_BF16_PEAK, H100_BANDWIDTH) == exactly(989e12)
    assert impl.accounting.attainable_flops(0.125, H100_BF16_PEAK, H100_BANDWIDTH) == exactly(0.125 * 3.35e12)


@pytest.mark.check("accounting.roofline.variants")
@pytest.mark.parametrize("intensity, bound", [(0.125, "memory"), (99.9, "memory"), (100, "compute"),
                                              (2730.7, "compute")])
def test_roofline_bound_names_the_binding_roof(impl, intensity, bound):
    assert impl.accounting.roofline_bound(intensity, 100e12, 1e12) == bound


# ----------------------------------------------------------------------------------------------- waves

@pytest.mark.check("accounting.waves.variants")
def test_wave_efficiency_drops_from_0_91_to_0_56_on_108_sms(impl):
    assert impl.accounting.wave_efficiency(98, 108) == exactly(98 / 108)
    assert impl.accounting.wave_efficiency(120, 108) == exactly(120 / 216)


@pytest.mark.check("accounting.waves.variants")
def test_8192_squared_in_256x128_tiles_is_16_waves(impl):
    n_tiles = impl.accounting.num_tiles(8192, 8192, 256, 128)
    assert n_tiles == 2048
    assert impl.accounting.num_waves(n_tiles, 132) == 16
    assert impl.accounting.wave_efficiency(n_tiles, 132) == exactly(2048 / (16 * 132))


@pytest.mark.check("accounting.waves.variants")
def test_one_extra_tile_row_adds_a_whole_wave(impl):
    before = impl.accounting.num_tiles(4096, 4096, 128, 128)
    after = impl.accounting.num_tiles(4224, 4224, 128, 128)
    assert (before, after) == (1024, 1089)
    assert impl.accounting.num_waves(before, 132) == 8
    assert impl.accounting.num_waves(after, 132) == 9


@pytest.mark.check("accounting.waves.variants")
def test_257_squared_needs_9_tiles_of_128(impl):
    assert impl.accounting.num_tiles(256, 256, 128, 128) == 4
    assert impl.accounting.num_tiles(257, 257, 128, 128) == 9
    assert impl.accounting.num_tiles(1000, 33, 64, 32) == 16 * 2


@pytest.mark.check("accounting.waves.variants")
def test_several_tiles_per_sm_shrink_the_wave_count(impl):
    assert impl.accounting.num_waves(120, 108, tiles_per_sm=2) == 1
    assert impl.accounting.wave_efficiency(120, 108, tiles_per_sm=2) == exactly(120 / 216)
    assert impl.accounting.num_waves(300, 132, tiles_per_sm=2) == 2
    assert impl.accounting.last_wave_tiles(300, 132, tiles_per_sm=2) == 36


@pytest.mark.check("accounting.waves.variants")
def test_a_whole_number_of_waves_is_fully_efficient(impl):
    assert impl.accounting.num_waves(264, 132) == 2
    assert impl.accounting.wave_efficiency(264, 132) == exactly(1.0)
    assert impl.accounting.last_wave_tiles(264, 132) == 132


# ---------------------------------------------------------------------------------------------- energy

@pytest.mark.check("accounting.energy.variants")
def test_energy_uses_effective_throughput_not_peak(impl):
    # same 1e18 FLOP job at 50% of 100e12: 20,000 s at 1 kW
    assert impl.accounting.energy_kwh(1e18, 50e12, 1000) == exactly(2e7 / 3.6e6)


@pytest.mark.check("accounting.energy.variants")
def test_energy_multiplies_facility_overhead_pue(impl):
    # 3.6e18 / 200e12 = 18,000 s; x 700 W x 1.5 = 1.89e7 J = 5.25 kWh
    assert impl.accounting.energy_kwh(3.6e18, 200e12, 700, pue=1.5) == exactly(5.25)


# ---------------------------------------------------------------------------------------------- errors

@pytest.mark.check("accounting.errors.edge_cases")
@pytest.mark.parametrize("function, args, kwargs, argument", [
    ("training_bytes_per_param", (), {"optimizer": "lion"}, "optimizer"),
    ("training_bytes_per_param", (), {"grad_dtype": "fp12"}, "grad_dtype"),
    ("mfu", (1e18, 8, 312e12, 0), {}, "seconds"),
    ("energy_kwh", (1e18, 100e12, 1000), {"pue": 0.8}, "pue"),
    ("num_tiles", (128, 128, 64, 0), {}, "tile_n"),
    ("num_waves", (100, 0), {}, "n_sms"),
    ("arithmetic_intensity", (1e9, 0), {}, "bytes_moved"),
    ("roofline_time", (1e9, 1e9, 989e12, 0), {}, "bandwidth"),
    ("attainable_flops", (10, 989e12, 0), {}, "bandwidth"),
    ("param_bytes", (1.5, "bf16"), {}, "n_params"),
    ("kv_cache_bytes", (32, -8, 128, 2048), {}, "n_kv_heads"),
    ("attention_flops", (1, 32, 2048, -2048, 128), {}, "n_k"),
], ids=["unknown_optimizer", "unknown_grad_dtype", "zero_seconds", "pue_below_1", "zero_tile",
        "zero_sms", "zero_bytes", "zero_bandwidth_time", "zero_bandwidth_roof", "fractional_params",
        "negative_kv_heads", "negative_n_k"])
def test_bad_input_raises_value_error_naming_the_argument(impl, function, args, kwargs, argument):
    with raises_from_student(ValueError, match=rf"\b{argument}\b"):
        getattr(impl.accounting, function)(*args, **kwargs)


@pytest.mark.check("accounting.errors.edge_cases")
def test_unknown_optimizer_lists_the_accepted_ones(impl):
    with raises_from_student(ValueError, match=r"adamw(?s:.*)sgd"):
        impl.accounting.training_bytes_per_param(optimizer="lion")
