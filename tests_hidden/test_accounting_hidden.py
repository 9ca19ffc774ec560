"""Hidden tests for `accounting`: configurations the public suite never shows, and the lecture's traps.

The traps each test guards (the broken fixture tests/fixtures/broken/accounting_traps falls into them):
- the 16 bytes/param total is not the split: all-FP32 Adam is 4 + 4 + 0 + 8, not 2 + 2 + 4 + 8;
- the KV cache holds keys AND values (the factor 2);
- GiB is 2**30 bytes, not 1e9;
- intensity is FLOPs per byte (ReLU FP16 0.25), not the slide's inverted bytes per FLOP;
- causal attention counts half the score matrix;
- waves round up (one extra row of tiles can cost a whole wave);
- energy includes the PUE;
- the H100, not the A100, has 528 tensor cores (an erratum of the notes);
- the compute-bound decode batch is where intensity (about b) reaches the ridge, not the notes' 512;
- launches and kernels do not overlap in the lecture's overhead model;
- bad input raises ValueError (not ZeroDivisionError, not a silent negative size).
"""

import pytest

from grader.diagnose import check_value
from grader.signatures import accounting as mistakes
from grader.testing import raises_from_student

H100_BF16_PEAK = 989e12
H100_BANDWIDTH = 3.35e12
A100_BF16_PEAK = 312e12
A100_FP32_PEAK = 19.5e12
A100_BANDWIDTH = 2.039e12


# ---------------------------------------------------------------------------------------------- memory

@pytest.mark.check("accounting.memory.variants")
def test_27b_bf16_weights_are_54e9_bytes_which_is_50_29_gib(impl):
    n_bytes = impl.accounting.param_bytes(27e9, "bf16")
    check_value('param_bytes(27e9, "bf16")', n_bytes, 54_000_000_000)
    check_value("bytes_to_gib(54e9)", impl.accounting.bytes_to_gib(54_000_000_000), 50.29141902923584)


@pytest.mark.check("accounting.memory.variants")
def test_gib_uses_binary_units(impl):
    check_value("bytes_to_gib(2**30)", impl.accounting.bytes_to_gib(2**30), 1.0, signatures=mistakes.GIB)
    check_value("bytes_to_gib(1e9)", impl.accounting.bytes_to_gib(1e9), 0.931322574615478515625,  # 1 GB < 1 GiB
                signatures=mistakes.GIB)


@pytest.mark.check("accounting.memory.variants")
def test_405b_bf16_weights_are_810e9_bytes(impl):
    check_value("param_bytes(405e9, \"bf16\")", impl.accounting.param_bytes(405e9, "bf16"), 810_000_000_000)


@pytest.mark.check("accounting.memory.variants")
def test_70b_bf16_is_141e9_bytes_and_int4_is_35e9(impl):
    check_value("param_bytes(70.6e9, \"bf16\")",  # does not fit 80 GB
                impl.accounting.param_bytes(70.6e9, "bf16"), 141_200_000_000)
    check_value("param_bytes(70.6e9, \"int4\")", impl.accounting.param_bytes(70.6e9, "int4"), 35_300_000_000)


@pytest.mark.check("accounting.memory.variants")
@pytest.mark.parametrize("dtype, n_bytes", [("fp32", 12), ("fp16", 6), ("fp8", 3), ("int8", 3),
                                            ("int4", 2), ("fp64", 24)])
def test_weight_bytes_follow_the_dtype_width(impl, dtype, n_bytes):
    # 3 parameters; an odd number of int4 values still occupies a whole last byte
    check_value(f"param_bytes(3, {dtype!r})", impl.accounting.param_bytes(3, dtype), n_bytes)


@pytest.mark.check("accounting.memory.variants")
def test_fp32_gradients_make_18_bytes_per_param(impl):
    total = impl.accounting.training_bytes_per_param(grad_dtype="fp32")     # 2 + 4 + 4 + 8
    check_value('training_bytes_per_param(grad_dtype="fp32")', total, 18,
                wrong_answers={16: mistakes.MIXED_PRECISION_TOTAL})


@pytest.mark.check("accounting.memory.variants")
def test_no_master_copy_makes_12_bytes_per_param(impl):
    check_value("training_bytes_per_param(master_weights=False)",  # 2 + 2 + 0 + 8
                impl.accounting.training_bytes_per_param(master_weights=False), 12)


@pytest.mark.check("accounting.memory.variants")
@pytest.mark.parametrize("master_weights", [True, False], ids=["master_flag_on", "master_flag_off"])
def test_all_fp32_adam_totals_16_but_splits_4_4_0_8(impl, master_weights):
    # FP32 weights are their own master copy, so the flag adds nothing here
    options = dict(weight_dtype="fp32", grad_dtype="fp32", master_weights=master_weights)
    what = f"training_bytes_breakdown(weight_dtype=\"fp32\", grad_dtype=\"fp32\", master_weights={master_weights})"
    check_value(what.replace("breakdown", "per_param"), impl.accounting.training_bytes_per_param(**options), 16)
    check_value(what, impl.accounting.training_bytes_breakdown(**options),
                {"weights": 4, "gradients": 4, "master_weights": 0, "optimizer_state": 8},
                why="fp32 weights are their own master copy; " + mistakes.MIXED_PRECISION_TOTAL)


@pytest.mark.check("accounting.memory.variants")
@pytest.mark.parametrize("options, total", [
    (dict(optimizer_state_dtype="int8"), 10),                 # 8-bit Adam: 2 + 2 + 4 + 2
    (dict(optimizer_state_dtype="bf16"), 12),                 # 2 + 2 + 4 + 4
    (dict(optimizer="sgd"), 8),                               # no state: 2 + 2 + 4
    (dict(optimizer="sgd_momentum"), 12),                     # one fp32 state: 2 + 2 + 4 + 4
    (dict(optimizer="adam", grad_dtype="fp32", master_weights=False), 14),   # 2 + 4 + 0 + 8
], ids=["8bit_adam", "bf16_moments", "sgd", "sgd_momentum", "adam_fp32_grads_no_master"])
def test_optimizer_state_follows_the_optimizer_and_its_dtype(impl, options, total):
    check_value(f"training_bytes_per_param(**{options})", impl.accounting.training_bytes_per_param(**options), total)


@pytest.mark.check("accounting.memory.variants")
def test_training_memory_follows_the_options(impl):
    check_value("training_memory_bytes(7e9, grad_dtype=\"fp32\")",  # 7e9 x 18
                impl.accounting.training_memory_bytes(7e9, grad_dtype="fp32"), 126_000_000_000)
    check_value("training_memory_bytes(1_000_003, master_weights=False)",
                impl.accounting.training_memory_bytes(1_000_003, master_weights=False), 12_000_036)


@pytest.mark.check("accounting.memory.variants")
def test_max_trainable_params_rounds_down_and_80gib_is_not_80gb(impl):
    check_value("max_trainable_params(80 * 2**30)",
                impl.accounting.max_trainable_params(80 * 2**30), 5_368_709_120)
    check_value("max_trainable_params(80e9, bytes_per_param=18)",
                impl.accounting.max_trainable_params(80e9, bytes_per_param=18), 4_444_444_444)
    check_value("max_trainable_params(141e9, 12)", impl.accounting.max_trainable_params(141e9, 12), 11_750_000_000)


@pytest.mark.check("accounting.memory.variants")
def test_kv_cache_counts_both_keys_and_values(impl):
    # Llama-3 70B shape: 80 layers, 8 KV heads of 128, context 4096, BF16: 2 x 80 x 8 x 128 x 4096 x 2
    n_bytes = impl.accounting.kv_cache_bytes(80, 8, 128, 4096)
    check_value("kv_cache_bytes(80, 8, 128, 4096)", n_bytes, 1_342_177_280, signatures=mistakes.KV_CACHE)


@pytest.mark.check("accounting.memory.variants")
def test_kv_cache_of_batch_256_at_context_2048_is_64gib(impl):
    check_value("kv_cache_bytes(32, 8, 128, 2048, batch=256)",
                impl.accounting.kv_cache_bytes(32, 8, 128, 2048, batch=256), 64 * 2**30)


@pytest.mark.check("accounting.memory.variants")
def test_kv_cache_at_128k_context_and_batch_32_is_512gib(impl):
    check_value("kv_cache_bytes(32, 8, 128, 131_072, batch=32)",
                impl.accounting.kv_cache_bytes(32, 8, 128, 131_072, batch=32), 512 * 2**30)
    check_value("kv_cache_bytes(32, 8, 128, 131_072, batch=32, bytes_per_elem=0.5)",
                impl.accounting.kv_cache_bytes(32, 8, 128, 131_072, batch=32, bytes_per_elem=0.5), 128 * 2**30)


@pytest.mark.check("accounting.memory.variants")
def test_attention_matrices_scale_with_batch_heads_and_both_lengths(impl):
    check_value("attention_matrix_bytes(4096, 4096, heads=32)",
                impl.accounting.attention_matrix_bytes(4096, 4096, heads=32), 2**30)
    check_value("attention_matrix_bytes(1, 8192, heads=8, batch=4, bytes_per_elem=4)",
                impl.accounting.attention_matrix_bytes(1, 8192, heads=8, batch=4, bytes_per_elem=4), 1_048_576)


# ----------------------------------------------------------------------------------------------- flops

@pytest.mark.check("accounting.flops.variants")
def test_non_square_matmul_is_2mkn(impl):
    check_value("matmul_flops(2048, 4096, 4096)", impl.accounting.matmul_flops(2048, 4096, 4096), 68_719_476_736)
    check_value("matmul_flops(3, 5, 7)", impl.accounting.matmul_flops(3, 5, 7), 210)


@pytest.mark.check("accounting.flops.variants")
@pytest.mark.parametrize("convention, flops", [("2mkn", 16), ("exact", 12), ("fma", 8)])
def test_matmul_counting_conventions_on_2x2x2(impl, convention, flops):
    check_value(f"matmul_flops(2, 2, 2, convention={convention!r})",
                impl.accounting.matmul_flops(2, 2, 2, convention=convention), flops)


@pytest.mark.check("accounting.flops.variants")
def test_llama3_70b_swiglu_ffn_is_6df(impl):
    check_value("ffn_flops_per_token(8192, 28672, swiglu=True)",
                impl.accounting.ffn_flops_per_token(8192, 28672, swiglu=True), 1_409_286_144)
    check_value("ffn_flops_per_token(768, 3072)", impl.accounting.ffn_flops_per_token(768, 3072), 9_437_184)


@pytest.mark.check("accounting.flops.variants")
def test_llama3_8b_attention_over_32_layers_is_2_2_tflop(impl):
    per_layer = impl.accounting.attention_flops(1, 32, 2048, 2048, 128)
    check_value("32 x attention_flops(1, 32, 2048, 2048, 128)", 32 * per_layer, 2_199_023_255_552)


@pytest.mark.check("accounting.flops.variants")
def test_causal_attention_halves_any_shape(impl):
    full = 4 * 2 * 16 * 1024 * 1024 * 64
    check_value("attention_flops(2, 16, 1024, 1024, 64)",
                impl.accounting.attention_flops(2, 16, 1024, 1024, 64), full)
    causal = impl.accounting.attention_flops(2, 16, 1024, 1024, 64, causal=True)
    check_value("attention_flops(2, 16, 1024, 1024, 64, causal=True)",
                causal, full // 2, signatures=mistakes.CAUSAL)


@pytest.mark.check("accounting.flops.variants")
def test_attention_scales_with_both_sequence_lengths(impl):
    # decode: one query against 8192 cached keys
    check_value("attention_flops(4, 8, 1, 8192, 128)",
                impl.accounting.attention_flops(4, 8, 1, 8192, 128), 4 * 4 * 8 * 8192 * 128)


@pytest.mark.check("accounting.flops.variants")
def test_attention_backward_is_2_5x_the_forward(impl):
    check_value("attention_flops(1, 8, 512, 512, 64, backward=True)",
                impl.accounting.attention_flops(1, 8, 512, 512, 64, backward=True), 10 * 8 * 512 * 512 * 64)
    check_value("attention_flops(1, 8, 512, 512, 64, causal=True, backward=True)",
                impl.accounting.attention_flops(1, 8, 512, 512, 64, causal=True, backward=True),
                5 * 8 * 512 * 512 * 64, signatures=mistakes.CAUSAL)


@pytest.mark.check("accounting.flops.variants")
def test_6nd_uses_the_parameter_count_given(impl):
    gpt2 = impl.accounting.training_flops(124e6, 300e9)                               # GPT-2 small
    check_value("training_flops(124e6, 300e9)", gpt2, 2.232e20, signatures=mistakes.SIX_ND)
    non_embedding = impl.accounting.training_flops(6.98e9, 15e12)                    # non-embedding 8B
    check_value("training_flops(6.98e9, 15e12)", non_embedding, 6.282e23, signatures=mistakes.SIX_ND)


@pytest.mark.check("accounting.flops.variants")
def test_days_and_gpu_hours_at_40_percent_mfu(impl):
    check_value("training_days(7.23e23, 2048, H100_BF16_PEAK, 0.4)",
                impl.accounting.training_days(7.23e23, 2048, H100_BF16_PEAK, 0.4), 10.328525345642344)
    check_value("training_days(7.227e23, 1000, H100_BF16_PEAK, 0.4)",
                impl.accounting.training_days(7.227e23, 1000, H100_BF16_PEAK, 0.4), 21.144042804179307)
    check_value("gpu_hours(7.227e23, H100_BF16_PEAK, 0.4)",
                impl.accounting.gpu_hours(7.227e23, H100_BF16_PEAK, 0.4), 507457.02730030334)


@pytest.mark.check("accounting.flops.variants")
def test_mfu_of_a_small_run(impl):
    # 8 GPUs at 312e12 for one hour doing 3.6e18 useful FLOPs: 3.6e18 / (8 x 312e12 x 3600)
    check_value("mfu(3.6e18, 8, A100_BF16_PEAK, 3600)",
                impl.accounting.mfu(3.6e18, 8, A100_BF16_PEAK, 3600), 1e15 / (8 * 312e12))


# -------------------------------------------------------------------------------------------- roofline

@pytest.mark.check("accounting.roofline.variants")
def test_a100_ridges_are_153_for_bf16_and_9_56_for_fp32(impl):
    check_value("ridge_point(A100_BF16_PEAK, A100_BANDWIDTH)",
                impl.accounting.ridge_point(A100_BF16_PEAK, A100_BANDWIDTH), 312 / 2.039)
    check_value("ridge_point(A100_FP32_PEAK, A100_BANDWIDTH)",
                impl.accounting.ridge_point(A100_FP32_PEAK, A100_BANDWIDTH), 19.5 / 2.039)


@pytest.mark.check("accounting.roofline.variants")
def test_4096_matmul_on_a100_is_7_05ms_fp32_and_0_44ms_bf16(impl):
    flops = 2 * 4096**3
    fp32 = impl.accounting.roofline_time(flops, 3 * 4096**2 * 4, A100_FP32_PEAK, A100_BANDWIDTH)
    bf16 = impl.accounting.roofline_time(flops, 3 * 4096**2 * 2, A100_BF16_PEAK, A100_BANDWIDTH)
    check_value("roofline_time(2 x 4096**3, 3 x 4096**2 x 4, 19.5e12, 2.039e12)",  # 7.048 ms
                fp32, flops / 19.5e12)
    check_value("roofline_time(2 x 4096**3, 3 x 4096**2 x 2, 312e12, 2.039e12)", bf16, flops / 312e12)  # 0.4405 ms


@pytest.mark.check("accounting.roofline.variants")
def test_rmsnorm_and_residual_add_are_memory_bound_on_h100(impl):
    elements = 16 * 4096 * 8192                  # 536,870,912 BF16 elements
    rmsnorm = impl.accounting.roofline_time(5 * elements, 4 * elements, H100_BF16_PEAK, H100_BANDWIDTH)
    residual = impl.accounting.roofline_time(elements, 6 * elements, H100_BF16_PEAK, H100_BANDWIDTH)
    check_value("roofline_time(RMSNorm, 4 bytes per element)", rmsnorm, 4 * elements / 3.35e12)      # 0.641 ms
    check_value("roofline_time(residual add, 6 bytes per element)", residual, 6 * elements / 3.35e12)  # 0.962 ms


@pytest.mark.check("accounting.roofline.variants")
def test_fp16_relu_intensity_is_0_25_flop_per_byte(impl):
    n = 3 * 1024
    intensity = impl.accounting.arithmetic_intensity(n, 4 * n)
    check_value("arithmetic_intensity(3072, 4 x 3072)",
                intensity, 0.25, wrong_answers=mistakes.intensity_mistakes(0.25))
    check_value("arithmetic_intensity(6e9, 2e9)", impl.accounting.arithmetic_intensity(6e9, 2e9), 3.0)


@pytest.mark.check("accounting.roofline.variants")
def test_prefill_q_projection_intensity_is_1024(impl):
    check_value("matmul_intensity(2048, 4096, 4096, 2)",
                impl.accounting.matmul_intensity(2048, 4096, 4096, 2), 1024.0)
    check_value("matmul_intensity(4096, 4096, 4096, 4)",
                impl.accounting.matmul_intensity(4096, 4096, 4096, 4), 4096 / 6)


@pytest.mark.check("accounting.roofline.variants")
def test_attainable_flops_is_capped_by_the_peak(impl):
    check_value("attainable_flops(8192 / 3, H100_BF16_PEAK, H100_BANDWIDTH)",
                impl.accounting.attainable_flops(8192 / 3, H100_BF16_PEAK, H100_BANDWIDTH), 989e12)
    check_value("attainable_flops(0.125, H100_BF16_PEAK, H100_BANDWIDTH)",
                impl.accounting.attainable_flops(0.125, H100_BF16_PEAK, H100_BANDWIDTH), 0.125 * 3.35e12)


@pytest.mark.check("accounting.roofline.variants")
@pytest.mark.parametrize("intensity, bound", [(0.125, "memory"), (99.9, "memory"), (100, "compute"),
                                              (2730.7, "compute")])
def test_roofline_bound_names_the_binding_roof(impl, intensity, bound):
    check_value(f"roofline_bound({intensity}, 100e12, 1e12)",
                impl.accounting.roofline_bound(intensity, 100e12, 1e12), bound)


# ----------------------------------------------------------------------------------------------- waves

@pytest.mark.check("accounting.waves.variants")
def test_wave_efficiency_drops_from_0_91_to_0_56_on_108_sms(impl):
    check_value("wave_efficiency(98, 108)", impl.accounting.wave_efficiency(98, 108), 98 / 108)
    check_value("wave_efficiency(120, 108)", impl.accounting.wave_efficiency(120, 108), 120 / 216)


@pytest.mark.check("accounting.waves.variants")
def test_8192_squared_in_256x128_tiles_is_16_waves(impl):
    n_tiles = impl.accounting.num_tiles(8192, 8192, 256, 128)
    check_value("num_tiles(8192, 8192, 256, 128)", n_tiles, 2048)
    check_value("num_waves(2048, 132)", impl.accounting.num_waves(2048, 132), 16,
                wrong_answers=mistakes.wave_mistakes(2048, 132))
    check_value("wave_efficiency(2048, 132)", impl.accounting.wave_efficiency(2048, 132), 2048 / (16 * 132))


@pytest.mark.check("accounting.waves.variants")
def test_one_extra_tile_row_adds_a_whole_wave(impl):
    before = impl.accounting.num_tiles(4096, 4096, 128, 128)
    after = impl.accounting.num_tiles(4224, 4224, 128, 128)
    check_value("(num_tiles(4096, ...), num_tiles(4224, ...))", (before, after), (1024, 1089))
    check_value("num_waves(1024, 132)", impl.accounting.num_waves(1024, 132), 8,
                wrong_answers=mistakes.wave_mistakes(1024, 132))
    check_value("num_waves(1089, 132)", impl.accounting.num_waves(1089, 132), 9,
                wrong_answers=mistakes.wave_mistakes(1089, 132))


@pytest.mark.check("accounting.waves.variants")
def test_257_squared_needs_9_tiles_of_128(impl):
    check_value("num_tiles(256, 256, 128, 128)", impl.accounting.num_tiles(256, 256, 128, 128), 4)
    check_value("num_tiles(257, 257, 128, 128)", impl.accounting.num_tiles(257, 257, 128, 128), 9)
    check_value("num_tiles(1000, 33, 64, 32)", impl.accounting.num_tiles(1000, 33, 64, 32), 16 * 2)


@pytest.mark.check("accounting.waves.variants")
def test_several_tiles_per_sm_shrink_the_wave_count(impl):
    check_value("num_waves(120, 108, tiles_per_sm=2)", impl.accounting.num_waves(120, 108, tiles_per_sm=2), 1)
    check_value("wave_efficiency(120, 108, tiles_per_sm=2)",
                impl.accounting.wave_efficiency(120, 108, tiles_per_sm=2), 120 / 216)
    check_value("num_waves(300, 132, tiles_per_sm=2)", impl.accounting.num_waves(300, 132, tiles_per_sm=2), 2)
    check_value("last_wave_tiles(300, 132, tiles_per_sm=2)",
                impl.accounting.last_wave_tiles(300, 132, tiles_per_sm=2), 36)


@pytest.mark.check("accounting.waves.variants")
def test_a_whole_number_of_waves_is_fully_efficient(impl):
    check_value("num_waves(264, 132)", impl.accounting.num_waves(264, 132), 2)
    check_value("wave_efficiency(264, 132)", impl.accounting.wave_efficiency(264, 132), 1.0)
    check_value("last_wave_tiles(264, 132)", impl.accounting.last_wave_tiles(264, 132), 132)


# ---------------------------------------------------------------------------------------------- energy

@pytest.mark.check("accounting.energy.variants")
def test_energy_uses_effective_throughput_not_peak(impl):
    # same 1e18 FLOP job at 50% of 100e12: 20,000 s at 1 kW
    check_value("energy_kwh(1e18, 50e12, 1000)", impl.accounting.energy_kwh(1e18, 50e12, 1000), 2e7 / 3.6e6)


@pytest.mark.check("accounting.energy.variants")
def test_energy_multiplies_facility_overhead_pue(impl):
    # 3.6e18 / 200e12 = 18,000 s; x 700 W x 1.5 = 1.89e7 J = 5.25 kWh
    energy = impl.accounting.energy_kwh(3.6e18, 200e12, 700, pue=1.5)
    check_value("energy_kwh(3.6e18, 200e12, 700, pue=1.5)", energy, 5.25,
                signatures={1 / 1.5: "the PUE is missing: the facility's overhead multiplies the energy."})


# ------------------------------------------------------------------------------------- execution model

@pytest.mark.check("accounting.execution.variants")
def test_a100_has_432_tensor_cores_not_528(impl):
    units = impl.accounting.gpu_unit_counts(108, fp32_cores_per_sm=64)
    check_value("gpu_unit_counts(108, fp32_cores_per_sm=64)[\"tensor_cores\"]", units["tensor_cores"], 432,
                wrong_answers=mistakes.A100_TENSOR_CORES)
    check_value("gpu_unit_counts(108, fp32_cores_per_sm=64)[\"fp32_cores\"]", units["fp32_cores"], 6912)


@pytest.mark.check("accounting.execution.variants")
@pytest.mark.parametrize("warps, compute, latency, expected", [
    (4, 8, 400, 32 / 408), (51, 8, 400, 1.0), (50, 8, 400, 400 / 408), (10, 20, 180, 1.0), (3, 5, 600, 15 / 605),
], ids=["4_warps", "51_warps_saturate", "50_warps_fall_short", "short_latency", "long_latency"])
def test_latency_hiding_on_other_warps_and_latencies(impl, warps, compute, latency, expected):
    got = impl.accounting.latency_hiding_utilization(warps, compute, latency)
    check_value(f"latency_hiding_utilization({warps}, {compute}, {latency})", got, expected,
                wrong_answers=mistakes.utilization_mistakes(warps, compute, latency))


@pytest.mark.check("accounting.execution.variants")
@pytest.mark.parametrize("compute, latency, warps", [(64, 400, 8), (4, 400, 101), (16, 500, 33), (10, 100, 11)])
def test_min_warps_round_up(impl, compute, latency, warps):
    got = impl.accounting.min_warps_to_hide_latency(compute, latency)
    check_value(f"min_warps_to_hide_latency({compute}, {latency})", got, warps,
                wrong_answers=mistakes.warp_rounding_mistakes(compute, latency))


@pytest.mark.check("accounting.execution.variants")
def test_divergence_pays_every_branch_taken(impl):
    half = impl.accounting.divergent_warp_cycles([0, 1] * 16, [10, 10])
    check_value("divergent_warp_cycles([0, 1] * 16, [10, 10])", half, 20, signatures=mistakes.DIVERGENCE)
    three = impl.accounting.divergent_warp_cycles([0] * 30 + [2, 2], [7, 100, 13])   # branch 1 never taken
    check_value("divergent_warp_cycles([0] * 30 + [2, 2], [7, 100, 13])", three, 20)
    one = impl.accounting.divergent_warp_cycles([1] * 32, [7, 100, 13])
    check_value("divergent_warp_cycles([1] * 32, [7, 100, 13])", one, 100)


@pytest.mark.check("accounting.execution.variants")
def test_coalescing_on_other_strides_sizes_and_alignments(impl):
    shifted = list(range(64, 64 + 128, 4))            # 32 floats straddling two lines
    check_value("warp_transactions(32 floats from byte 64)", impl.accounting.warp_transactions(shifted), 2)
    check_value("coalescing_efficiency(32 floats from byte 64)",
                impl.accounting.coalescing_efficiency(shifted), 0.5)
    halves = list(range(0, 64, 2))                    # 32 fp16 values: half a line
    check_value("warp_transactions(32 fp16, access_bytes=2)", impl.accounting.warp_transactions(halves, 2), 1)
    check_value("coalescing_efficiency(32 fp16, access_bytes=2)",
                impl.accounting.coalescing_efficiency(halves, 2), 0.5)
    stride2 = list(range(0, 256, 8))                  # every other float: 2 lines, half used
    check_value("warp_transactions(stride 2 floats)", impl.accounting.warp_transactions(stride2), 2)
    column = [row * 4096 * 4 for row in range(32)]    # one column of a row-major [*, 4096] fp32 matrix
    check_value("coalescing_efficiency(a column)", impl.accounting.coalescing_efficiency(column), 1 / 32)
    straddle = [124]                                  # one 8-byte access across a line boundary
    check_value("warp_transactions([124], access_bytes=8)", impl.accounting.warp_transactions(straddle, 8), 2)


# ------------------------------------------------------------------------------ fusion and recompute

@pytest.mark.check("accounting.fusion.variants")
def test_chain_traffic_and_speedup_on_other_chains(impl):
    check_value("elementwise_chain_bytes(8, 1000)", impl.accounting.elementwise_chain_bytes(8, 1000), 16_000)
    check_value("elementwise_chain_bytes(8, 1000, fused=True)",
                impl.accounting.elementwise_chain_bytes(8, 1000, fused=True), 2000)
    check_value("elementwise_chain_bytes(1, 2 x 67108864)",
                                    # one pass over [8, 2048, 4096] bf16
                impl.accounting.elementwise_chain_bytes(1, 134_217_728), 268_435_456)
    check_value("memory_bound_speedup(16000, 2000)", impl.accounting.memory_bound_speedup(16_000, 2000), 8.0)
    check_value("memory_bound_speedup(6, 6)", impl.accounting.memory_bound_speedup(6, 6), 1.0)


@pytest.mark.check("accounting.fusion.variants")
def test_sigmoid_chain_accesses_grow_only_without_recomputation(impl):
    check_value("sigmoid_chain_accesses(10)", impl.accounting.sigmoid_chain_accesses(10), 22)
    check_value("sigmoid_chain_accesses(1)", impl.accounting.sigmoid_chain_accesses(1), 4)
    check_value("sigmoid_chain_accesses(10, recompute=True)",
                impl.accounting.sigmoid_chain_accesses(10, recompute=True), 5)


@pytest.mark.check("accounting.fusion.variants")
def test_partial_recomputation_costs_less(impl):
    check_value("recompute_flops_ratio(0.5)", impl.accounting.recompute_flops_ratio(0.5), 3.5 / 3)
    check_value("recompute_flops_ratio(0.0)", impl.accounting.recompute_flops_ratio(0.0), 1.0)
    check_value("recompute_flops_ratio(1.0, backward_factor=3)",
                impl.accounting.recompute_flops_ratio(1.0, backward_factor=3), 5 / 4)


# ---------------------------------------------------------------------------------------------- formats

@pytest.mark.check("accounting.formats.variants")
def test_peak_ladder_on_other_formats_and_gpus(impl):
    check_value('tensor_core_peak("int8", 312e12)', impl.accounting.tensor_core_peak("int8", 312e12), 624e12,
                signatures=mistakes.PEAK_LADDER)
    check_value('tensor_core_peak("fp16", 312e12)', impl.accounting.tensor_core_peak("fp16", 312e12), 312e12)
    check_value('tensor_core_peak("tf32", 312e12)', impl.accounting.tensor_core_peak("tf32", 312e12), 156e12,
                signatures=mistakes.PEAK_LADDER)


@pytest.mark.check("accounting.formats.variants")
@pytest.mark.parametrize("fmt, value", [("bf16", 2.0**-126), ("fp32", 2.0**-126), ("e4m3", 2.0**-6),
                                        ("e5m2", 2.0**-14), ("fp64", 2.0**-1022)])
def test_smallest_normal_follows_the_exponent_bits(impl, fmt, value):
    check_value(f"smallest_normal({fmt!r})", impl.accounting.smallest_normal(fmt), value)


@pytest.mark.check("accounting.formats.variants")
@pytest.mark.parametrize("gradient, fmt, scale", [
    (1e-7, "fp16", 1024), (2.0**-20, "fp16", 64), (1e-3, "fp16", 1), (6.1e-5, "fp16", 2),
    (1e-30, "bf16", 1), (1e-3, "e4m3", 16),
], ids=["1e-7", "2^-20", "already_normal", "just_below", "bf16_needs_none", "fp8_e4m3"])
def test_loss_scale_is_the_smallest_power_of_two_that_suffices(impl, gradient, fmt, scale):
    got = impl.accounting.min_loss_scale(gradient, fmt)
    check_value(f"min_loss_scale({gradient!r}, {fmt!r})", got, scale,
                wrong_answers={512: "512 is the lecture's example, not a constant: compute the smallest "
                                    "power of two s with s x gradient >= smallest_normal(fmt)."})


@pytest.mark.check("accounting.formats.variants")
def test_mx_storage_on_ragged_sizes_and_with_the_transpose(impl):
    check_value('mx_num_scales(100, "mxfp8")', impl.accounting.mx_num_scales(100, "mxfp8"), 4)
    check_value('mx_num_scales(100, "mxfp4")', impl.accounting.mx_num_scales(100, "mxfp4"), 7)
    check_value('mx_storage_bytes(4096, "mxfp4")', impl.accounting.mx_storage_bytes(4096, "mxfp4"), 2304,
                signatures={4224 / 2304: "MXFP4 packs two 4-bit values per byte."})
    check_value('mx_storage_bytes(101, "mxfp4")', impl.accounting.mx_storage_bytes(101, "mxfp4"), 51 + 7)
    check_value('mx_storage_bytes(4096, "mxfp8", keep_transpose=True)',
                impl.accounting.mx_storage_bytes(4096, "mxfp8", keep_transpose=True), 8448)


@pytest.mark.check("accounting.formats.variants")
def test_round_up_to_other_multiples(impl):
    check_value("round_up_to_multiple(50304, 64)", impl.accounting.round_up_to_multiple(50_304, 64), 50_304)
    check_value("round_up_to_multiple(128256, 128)", impl.accounting.round_up_to_multiple(128_256, 128), 128_256)
    check_value("round_up_to_multiple(32001, 128)", impl.accounting.round_up_to_multiple(32_001, 128), 32_128)
    check_value("round_up_to_multiple(0, 64)", impl.accounting.round_up_to_multiple(0, 64), 0)


# -------------------------------------------------------------------------------------------- inference

@pytest.mark.check("accounting.inference.variants")
def test_llama3_70b_int4_decodes_in_10_5_ms_at_95_tokens_per_s(impl):
    weights = 35_300_000_000                          # 70.6e9 x 0.5 bytes
    step = impl.accounting.decode_step_time(weights, H100_BANDWIDTH)
    check_value("decode_step_time(35.3e9, 3.35e12)", step, 35.3e9 / 3.35e12)       # 10.54 ms
    rate = impl.accounting.decode_tokens_per_second(weights, H100_BANDWIDTH)
    check_value("decode_tokens_per_second(35.3e9, 3.35e12)", rate, 3.35e12 / 35.3e9)   # 94.9


@pytest.mark.check("accounting.inference.variants")
def test_batched_decode_reads_the_weights_once_and_every_kv_cache(impl):
    weights, kv = 14 * 2**30, 64 * 2**30             # batch 256 at context 2048: 64 GiB of KV cache
    step = impl.accounting.decode_step_time(weights, H100_BANDWIDTH, kv_cache_bytes=kv)
    check_value("decode_step_time(14 GiB, 3.35e12, kv_cache_bytes=64 GiB)", step, 78 * 2**30 / 3.35e12)
    rate = impl.accounting.decode_tokens_per_second(weights, H100_BANDWIDTH, kv_cache_bytes=kv, batch=256)
    check_value("decode_tokens_per_second(14 GiB, 3.35e12, kv_cache_bytes=64 GiB, batch=256)", rate,
                256 * 3.35e12 / (78 * 2**30),
                signatures={1 / 256: "the batch is ignored: every step yields one token per sequence."})


@pytest.mark.check("accounting.inference.variants")
def test_crossover_on_other_models_and_batches(impl):
    check_value("kv_weight_crossover_tokens(141.2e9, 327680, batch=8)",        # 70B bf16, 320 KiB per token
                impl.accounting.kv_weight_crossover_tokens(141.2e9, 327_680, batch=8), 141.2e9 / (327_680 * 8))
    check_value("kv_weight_crossover_tokens(14 GiB, 128 KiB, batch=7)",
                impl.accounting.kv_weight_crossover_tokens(14 * 2**30, 131_072, batch=7), 114_688 / 7)


@pytest.mark.check("accounting.inference.variants")
def test_prefill_and_non_embedding_counts_on_other_models(impl):
    matmul = impl.accounting.non_embedding_params(124_439_808, 50_257, 768)       # GPT-2 small, tied head
    check_value("non_embedding_params(124439808, 50257, 768)", matmul, 85_842_432)
    flops = impl.accounting.prefill_flops(1e9, 512)
    check_value("prefill_flops(1e9, 512)", flops, 1_024_000_000_000)
    flops = impl.accounting.prefill_flops(1e9, 512, attention_flops=5e10)
    check_value("prefill_flops(1e9, 512, attention_flops=5e10)", flops, 1_074_000_000_000)


@pytest.mark.check("accounting.inference.variants")
def test_gqa_projections_shrink_k_and_v(impl):
    # Llama-3 8B: 8 KV heads of 128 = 1024 wide K and V
    flops = impl.accounting.attention_projection_flops(1, 2048, 4096, kv_dim=1024)
    check_value("attention_projection_flops(1, 2048, 4096, kv_dim=1024)", flops, 2 * 2048 * 4096 * (8192 + 2048))
    flops = impl.accounting.attention_projection_flops(4, 100, 64)
    check_value("attention_projection_flops(4, 100, 64)",
                flops, 8 * 4 * 100 * 64**2, signatures=mistakes.PROJECTIONS)


@pytest.mark.check("accounting.inference.variants")
def test_a100_decode_is_compute_bound_from_batch_166_not_256(impl):
    batch = impl.accounting.decode_batch_for_compute_bound(4096, A100_BF16_PEAK, A100_BANDWIDTH)
    check_value("decode_batch_for_compute_bound(4096, 312e12, 2.039e12)", batch, 166,
                wrong_answers=mistakes.decode_batch_mistakes(312 / 2.039))
    big = impl.accounting.decode_batch_for_compute_bound(8192, H100_BF16_PEAK, H100_BANDWIDTH)
    check_value("decode_batch_for_compute_bound(8192, 989e12, 3.35e12)", big, 319,
                wrong_answers=mistakes.decode_batch_mistakes(989 / 3.35))


@pytest.mark.check("accounting.inference.variants")
@pytest.mark.parametrize("n_kernels, launch, total", [(200, 0.5e-6, 300e-6), (20, 5e-6, 300e-6),
                                                      (20, 0.5e-6, 210e-6)],
                         ids=["cuda_graphs", "fused_to_20", "both"])
def test_cuda_graphs_and_fusion_cut_launch_overhead(impl, n_kernels, launch, total):
    got = impl.accounting.launch_bound_time(n_kernels, 200e-6, launch)
    check_value(f"launch_bound_time({n_kernels}, 200 us, {launch * 1e6:g} us)", got, total,
                wrong_answers=mistakes.launch_mistakes(n_kernels, 200e-6, launch))
    busy = impl.accounting.gpu_busy_fraction(n_kernels, 200e-6, launch)
    check_value(f"gpu_busy_fraction({n_kernels}, 200 us, {launch * 1e6:g} us)", busy, 200e-6 / total)


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
    ("min_warps_to_hide_latency", (0, 400), {}, "compute_per_load"),
    ("decode_step_time", (14e9, 0), {}, "bandwidth"),
    ("mx_num_scales", (4096, "mxfp6"), {}, "fmt"),
    ("tensor_core_peak", ("fp32", 989e12), {}, "dtype"),
    ("smallest_normal", ("fp12",), {}, "fmt"),
    ("recompute_flops_ratio", (1.5,), {}, "recomputed_fraction"),
    ("kv_weight_crossover_tokens", (14e9, 131072, 0), {}, "batch"),
    ("round_up_to_multiple", (50257, 0), {}, "multiple"),
], ids=["unknown_optimizer", "unknown_grad_dtype", "zero_seconds", "pue_below_1", "zero_tile",
        "zero_sms", "zero_bytes", "zero_bandwidth_time", "zero_bandwidth_roof", "fractional_params",
        "negative_kv_heads", "negative_n_k", "zero_compute_per_load", "zero_bandwidth_decode",
        "unknown_mx_format", "no_tensor_core_fp32", "unknown_float_format", "recompute_above_1",
        "zero_batch_crossover", "zero_multiple"])
def test_bad_input_raises_value_error_naming_the_argument(impl, function, args, kwargs, argument):
    with raises_from_student(ValueError, match=rf"\b{argument}\b"):
        getattr(impl.accounting, function)(*args, **kwargs)


@pytest.mark.check("accounting.errors.edge_cases")
def test_unknown_optimizer_lists_the_accepted_ones(impl):
    with raises_from_student(ValueError, match=r"adamw(?s:.*)sgd"):
        impl.accounting.training_bytes_per_param(optimizer="lion")
