"""Public tests for `accounting`: the lecture's own worked numbers, computed by your functions.

Every expected value below is written out from the lecture notes (with the arithmetic in a comment), so
a failing test tells you which formula or unit to re-read. Exact integers are compared exactly; other
values to a relative 1e-9. When a wrong answer has the fingerprint of a classic mistake (exactly 1/3
of 6ND, half the KV cache, waves rounded down), the message names the mistake
(grader/signatures/accounting.py lists them).
"""

import pytest
import torch

from grader.diagnose import check_value
from grader.signatures import accounting as mistakes
from grader.testing import raises_from_student

H100_BF16_PEAK = 989e12        # FLOP/s, dense tensor cores
H100_BANDWIDTH = 3.35e12       # bytes/s, HBM3
LLAMA3_8B_PARAMS = 8.03e9
LLAMA3_VOCAB, LLAMA3_D_MODEL = 128_256, 4096


# ---------------------------------------------------------------------------------------------- memory

@pytest.mark.check("accounting.memory.lecture")
def test_8b_bf16_weights_are_16e9_bytes_which_is_14_90_gib(impl):
    n_bytes = impl.accounting.param_bytes(8e9, "bf16")
    check_value('param_bytes(8e9, "bf16")', n_bytes, 16_000_000_000, why="8e9 params x 16 bits / 8 = 16e9 bytes")
    gib = impl.accounting.bytes_to_gib(16_000_000_000)
    check_value("bytes_to_gib(16e9)", gib, 16e9 / 2**30, signatures=mistakes.GIB)   # 14.901161..., not 16


@pytest.mark.check("accounting.memory.lecture")
def test_8b_int4_ideally_packed_is_4e9_bytes(impl):
    n_bytes = impl.accounting.param_bytes(8e9, "int4")
    check_value('param_bytes(8e9, "int4")', n_bytes, 4_000_000_000, why="int4 is half a byte per parameter")


@pytest.mark.check("accounting.memory.lecture")
def test_dtype_may_be_a_torch_dtype(impl):
    check_value("param_bytes(1000, torch.bfloat16)", impl.accounting.param_bytes(1000, torch.bfloat16), 2000)
    check_value("param_bytes(1000, torch.float32)", impl.accounting.param_bytes(1000, torch.float32), 4000)


@pytest.mark.check("accounting.memory.lecture")
def test_mixed_precision_adamw_is_2_2_4_8_bytes_per_param(impl):
    parts = impl.accounting.training_bytes_breakdown()
    check_value("training_bytes_breakdown()", parts,
                {"weights": 2, "gradients": 2, "master_weights": 4, "optimizer_state": 8})
    check_value("training_bytes_per_param()", impl.accounting.training_bytes_per_param(), 16)


@pytest.mark.check("accounting.memory.lecture")
def test_training_bytes_follow_the_options_not_a_fixed_16(impl):
    # fp32 gradients: 2 + 4 + 4 + 8; no master copy: 2 + 2 + 0 + 8
    fp32_grads = impl.accounting.training_bytes_per_param(grad_dtype="fp32")
    check_value('training_bytes_per_param(grad_dtype="fp32")', fp32_grads, 18,
                wrong_answers={16: mistakes.MIXED_PRECISION_TOTAL})
    no_master = impl.accounting.training_bytes_breakdown(master_weights=False)
    check_value("training_bytes_breakdown(master_weights=False)", no_master,
                {"weights": 2, "gradients": 2, "master_weights": 0, "optimizer_state": 8},
                why=mistakes.MIXED_PRECISION_TOTAL)


@pytest.mark.check("accounting.memory.lecture")
def test_training_state_of_an_8b_model_is_128e9_bytes(impl):
    n_bytes = impl.accounting.training_memory_bytes(8e9)
    check_value("training_memory_bytes(8e9)", n_bytes, 128_000_000_000)     # 8e9 x 16


@pytest.mark.check("accounting.memory.lecture")
def test_80gb_card_trains_at_most_5b_params(impl):
    n_params = impl.accounting.max_trainable_params(80e9)
    check_value("max_trainable_params(80e9)", n_params, 5_000_000_000)       # 80e9 / 16


@pytest.mark.check("accounting.memory.lecture")
def test_llama3_8b_kv_cache_is_128kib_per_token(impl):
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes
    n_bytes = impl.accounting.kv_cache_bytes(32, 8, 128, seq_len=1)
    check_value("kv_cache_bytes(32, 8, 128, seq_len=1)", n_bytes, 131_072, signatures=mistakes.KV_CACHE)


@pytest.mark.check("accounting.memory.lecture")
def test_one_4096_square_bf16_attention_matrix_is_32mib(impl):
    n_bytes = impl.accounting.attention_matrix_bytes(4096, 4096)
    check_value("attention_matrix_bytes(4096, 4096)", n_bytes, 33_554_432)   # 4096**2 x 2


# ----------------------------------------------------------------------------------------------- flops

@pytest.mark.check("accounting.flops.lecture")
def test_8192_cubed_matmul_is_2mkn_flops(impl):
    flops = impl.accounting.matmul_flops(8192, 8192, 8192)
    check_value("matmul_flops(8192, 8192, 8192)", flops, 1_099_511_627_776,
                signatures={0.5: "a factor 1/2: one multiply-add counts as 2 FLOPs (2mkn)."})


@pytest.mark.check("accounting.flops.lecture")
def test_ffn_is_4df_and_swiglu_is_6df(impl):
    check_value("ffn_flops_per_token(2, 8)", impl.accounting.ffn_flops_per_token(2, 8), 64)
    check_value("ffn_flops_per_token(2, 8, swiglu=True)",
                impl.accounting.ffn_flops_per_token(2, 8, swiglu=True), 96,
                signatures={2 / 3: "a factor 2/3: SwiGLU has three weight matrices (gate, up, down): 6DF."})


@pytest.mark.check("accounting.flops.lecture")
def test_llama3_prefill_attention_term_is_4bt2d(impl):
    # B = 1, T = 2048, D = 32 heads x 128 = 4096: 4 x 2048**2 x 4096
    flops = impl.accounting.attention_flops(1, 32, 2048, 2048, 128)
    check_value("attention_flops(1, 32, 2048, 2048, 128)", flops, 68_719_476_736)


@pytest.mark.check("accounting.flops.lecture")
def test_causal_attention_counts_half_the_score_matrix(impl):
    flops = impl.accounting.attention_flops(1, 32, 2048, 2048, 128, causal=True)
    check_value("attention_flops(1, 32, 2048, 2048, 128, causal=True)", flops, 34_359_738_368,
                signatures=mistakes.CAUSAL)


@pytest.mark.check("accounting.flops.lecture")
def test_llama3_8b_on_15t_tokens_is_6nd(impl):
    flops = impl.accounting.training_flops(8.03e9, 15e12)
    check_value("training_flops(8.03e9, 15e12)", flops, 7.227e23, signatures=mistakes.SIX_ND)


@pytest.mark.check("accounting.flops.lecture")
def test_mfu_of_2048_h100s_for_30_days_is_13_8_percent(impl):
    # available: 2048 x 989e12 x 30 x 86400 = 5.250023e24 FLOPs; needed 7.23e23
    seconds = 30 * 86400
    utilization = impl.accounting.mfu(7.23e23, 2048, H100_BF16_PEAK, seconds)
    check_value("mfu(7.23e23, 2048, 989e12, 30 days)", utilization, 0.13771367127523126)


# -------------------------------------------------------------------------------------------- roofline

@pytest.mark.check("accounting.roofline.lecture")
def test_h100_ridge_point_is_295_flop_per_byte(impl):
    ridge = impl.accounting.ridge_point(H100_BF16_PEAK, H100_BANDWIDTH)
    check_value("ridge_point(989e12, 3.35e12)", ridge, 989 / 3.35)


@pytest.mark.check("accounting.roofline.lecture")
def test_toy_roofline_ridge_is_100_and_intensity_10_reaches_10_tflops(impl):
    check_value("ridge_point(100e12, 1e12)", impl.accounting.ridge_point(100e12, 1e12), 100.0)
    check_value("attainable_flops(10, 100e12, 1e12)", impl.accounting.attainable_flops(10, 100e12, 1e12), 1e13)


@pytest.mark.check("accounting.roofline.lecture")
def test_bf16_elementwise_add_intensity_is_one_sixth(impl):
    n = 8192 * 8192
    intensity = impl.accounting.arithmetic_intensity(n, 3 * n * 2)
    check_value("arithmetic_intensity(8192**2, 3 x 8192**2 x 2)", intensity, 1 / 6,
                wrong_answers=mistakes.intensity_mistakes(1 / 6))


@pytest.mark.check("accounting.roofline.lecture")
def test_fp32_relu_intensity_is_0_125_not_8(impl):
    # one operation per element; read 4 bytes + write 4 bytes (the slide's "8 FLOP/byte" is inverted)
    n = 1 << 20
    intensity = impl.accounting.arithmetic_intensity(n, 8 * n)
    check_value("arithmetic_intensity(2**20, 8 x 2**20)", intensity, 0.125,
                wrong_answers=mistakes.intensity_mistakes(0.125))


@pytest.mark.check("accounting.roofline.lecture")
def test_square_bf16_matmul_intensity_is_n_over_3(impl):
    intensity = impl.accounting.matmul_intensity(8192, 8192, 8192, 2)
    check_value("matmul_intensity(8192, 8192, 8192, 2)", intensity, 8192 / 3)


@pytest.mark.check("accounting.roofline.lecture")
def test_roofline_time_is_set_by_the_slower_roof(impl):
    # toy hardware: 100e12 FLOP/s, 1e12 bytes/s
    compute = impl.accounting.roofline_time(1e12, 1e9, 100e12, 1e12)
    check_value("roofline_time(1e12, 1e9, 100e12, 1e12)", compute, 0.01)    # compute: 1e12/1e14
    memory = impl.accounting.roofline_time(1e9, 1e12, 100e12, 1e12)
    check_value("roofline_time(1e9, 1e12, 100e12, 1e12)", memory, 1.0)      # memory: 1e12/1e12


# ----------------------------------------------------------------------------------------------- waves

@pytest.mark.check("accounting.waves.lecture")
def test_1792_squared_is_98_tiles_in_one_wave_on_108_sms(impl):
    n_tiles = impl.accounting.num_tiles(1792, 1792, 256, 128)
    check_value("num_tiles(1792, 1792, 256, 128)", n_tiles, 98)              # 7 x 14
    waves = impl.accounting.num_waves(98, 108)
    check_value("num_waves(98, 108)", waves, 1, wrong_answers=mistakes.wave_mistakes(98, 108))


@pytest.mark.check("accounting.waves.lecture")
def test_1793_squared_needs_a_second_wave_of_12_tiles(impl):
    n_tiles = impl.accounting.num_tiles(1793, 1793, 256, 128)
    check_value("num_tiles(1793, 1793, 256, 128)", n_tiles, 120,             # 8 x 15
                wrong_answers={98: "the partial edge tiles are dropped: count them, ceil(m / tile_m)."})
    waves = impl.accounting.num_waves(120, 108)
    check_value("num_waves(120, 108)", waves, 2, wrong_answers=mistakes.wave_mistakes(120, 108))
    check_value("last_wave_tiles(120, 108)", impl.accounting.last_wave_tiles(120, 108), 12)


@pytest.mark.check("accounting.waves.lecture")
def test_8192_squared_in_128_tiles_is_32_waves_at_0_970_on_132_sms(impl):
    check_value("num_tiles(8192, 8192, 128, 128)", impl.accounting.num_tiles(8192, 8192, 128, 128), 4096)
    waves = impl.accounting.num_waves(4096, 132)
    check_value("num_waves(4096, 132)", waves, 32, wrong_answers=mistakes.wave_mistakes(4096, 132))
    efficiency = impl.accounting.wave_efficiency(4096, 132)
    check_value("wave_efficiency(4096, 132)", efficiency, 4096 / (32 * 132))


# ---------------------------------------------------------------------------------------------- energy

@pytest.mark.check("accounting.energy.lecture")
def test_1e18_flops_at_100_tflops_and_1kw_is_2_78_kwh(impl):
    # 1e18 / 100e12 = 10,000 s; x 1000 W = 1e7 J; / 3.6e6 J per kWh
    energy = impl.accounting.energy_kwh(1e18, 100e12, 1000)
    check_value("energy_kwh(1e18, 100e12, 1000)", energy, 1e7 / 3.6e6,
                signatures={1000: "a factor 1000: that is Wh, not kWh (1 kWh = 3.6e6 J)."})


@pytest.mark.check("accounting.energy.lecture")
def test_pue_1_2_multiplies_the_energy(impl):
    energy = impl.accounting.energy_kwh(1e18, 100e12, 1000, pue=1.2)
    check_value("energy_kwh(1e18, 100e12, 1000, pue=1.2)", energy, 1.2e7 / 3.6e6,
                signatures={1 / 1.2: "the PUE is missing: the facility's overhead multiplies the energy."})


# ------------------------------------------------------------------------------------- execution model

@pytest.mark.check("accounting.execution.lecture")
def test_h100_has_16896_fp32_cores_and_528_tensor_cores(impl):
    units = impl.accounting.gpu_unit_counts(132)          # 132 SMs x 128 cores, x 4 tensor cores
    check_value("gpu_unit_counts(132)", units, {"fp32_cores": 16_896, "tensor_cores": 528})


@pytest.mark.check("accounting.execution.lecture")
def test_one_warp_hides_1_percent_and_64_warps_64_percent_of_a_400_cycle_load(impl):
    for warps, compute, expected in [(1, 4, 4 / 404), (64, 4, 256 / 404), (8, 64, 1.0)]:
        got = impl.accounting.latency_hiding_utilization(warps, compute, 400)
        check_value(f"latency_hiding_utilization({warps}, {compute}, 400)", got, expected,
                    wrong_answers=mistakes.utilization_mistakes(warps, compute, 400))


@pytest.mark.check("accounting.execution.lecture")
def test_8_instructions_per_load_need_51_warps(impl):
    warps = impl.accounting.min_warps_to_hide_latency(8, 400)       # (8 + 400) / 8 = 51
    check_value("min_warps_to_hide_latency(8, 400)", warps, 51,
                wrong_answers=mistakes.warp_rounding_mistakes(8, 400))


@pytest.mark.check("accounting.execution.lecture")
def test_two_10_cycle_branches_cost_20_once_one_thread_diverges(impl):
    agree = impl.accounting.divergent_warp_cycles([0] * 32, [10, 10])
    check_value("divergent_warp_cycles([0] * 32, [10, 10])", agree, 10)
    diverge = impl.accounting.divergent_warp_cycles([0] * 31 + [1], [10, 10])
    check_value("divergent_warp_cycles([0] * 31 + [1], [10, 10])", diverge, 20, signatures=mistakes.DIVERGENCE)


@pytest.mark.check("accounting.execution.lecture")
def test_strided_fp32_loads_need_32_transactions_and_use_3_percent(impl):
    consecutive = list(range(0, 128, 4))              # A[0..31]: one 128-byte line
    strided = list(range(0, 32 * 4000, 4000))         # A[0], A[1000], A[2000], ...
    check_value("warp_transactions(A[0..31])", impl.accounting.warp_transactions(consecutive), 1)
    check_value("warp_transactions(A[0], A[1000], ...)", impl.accounting.warp_transactions(strided), 32)
    useful = impl.accounting.coalescing_efficiency(strided)
    check_value("coalescing_efficiency(A[0], A[1000], ...)", useful, 4 / 128)      # 3%


# ------------------------------------------------------------------------------ fusion and recompute

@pytest.mark.check("accounting.fusion.lecture")
def test_fusing_layernorm_gelu_dropout_cuts_traffic_from_6x_to_2x(impl):
    size = 2 * 8 * 2048 * 4096                        # one [8, 2048, 4096] bf16 activation
    unfused = impl.accounting.elementwise_chain_bytes(3, size)
    check_value("elementwise_chain_bytes(3, size)", unfused, 6 * size)
    fused = impl.accounting.elementwise_chain_bytes(3, size, fused=True)
    check_value("elementwise_chain_bytes(3, size, fused=True)", fused, 2 * size)


@pytest.mark.check("accounting.fusion.lecture")
def test_fusing_rmsnorm_with_the_residual_add_is_1_67x(impl):
    # residual add 6 bytes/element + RMSNorm 4 = 10; fused: read 2 inputs, write 1 output = 6
    speedup = impl.accounting.memory_bound_speedup(10, 6)
    check_value("memory_bound_speedup(10, 6)", speedup, 10 / 6)


@pytest.mark.check("accounting.fusion.lecture")
def test_recomputing_a_sigmoid_chain_cuts_8_accesses_to_5(impl):
    check_value("sigmoid_chain_accesses(3)", impl.accounting.sigmoid_chain_accesses(3), 8)
    check_value("sigmoid_chain_accesses(3, recompute=True)",
                impl.accounting.sigmoid_chain_accesses(3, recompute=True), 5)


@pytest.mark.check("accounting.fusion.lecture")
def test_full_recomputation_costs_4f_over_3f(impl):
    ratio = impl.accounting.recompute_flops_ratio()
    check_value("recompute_flops_ratio()", ratio, 4 / 3, signatures=mistakes.RECOMPUTE)


# ---------------------------------------------------------------------------------------------- formats

@pytest.mark.check("accounting.formats.lecture")
def test_h100_ladder_tf32_is_half_of_bf16_989_and_fp8_twice(impl):
    tf32 = impl.accounting.tensor_core_peak("tf32", H100_BF16_PEAK)
    check_value('tensor_core_peak("tf32", 989e12)', tf32, 494.5e12, signatures=mistakes.PEAK_LADDER)
    fp8 = impl.accounting.tensor_core_peak("fp8", H100_BF16_PEAK)
    check_value('tensor_core_peak("fp8", 989e12)', fp8, 1978e12, signatures=mistakes.PEAK_LADDER)
    assert fp8 == pytest.approx(1979e12, rel=1e-3), "the spec sheet's FP8 peak is 1979 TFLOP/s"


@pytest.mark.check("accounting.formats.lecture")
def test_a_static_loss_scale_of_512_lifts_2_to_the_minus_23_into_fp16(impl):
    check_value('smallest_normal("fp16")', impl.accounting.smallest_normal("fp16"), 2.0**-14)
    scale = impl.accounting.min_loss_scale(2.0**-23, "fp16")             # 2**-14 / 2**-23 = 2**9
    check_value('min_loss_scale(2**-23, "fp16")', scale, 512,
                signatures={2: "not the smallest power of two: half of it already lifts the gradient."})
    bf16 = impl.accounting.min_loss_scale(2.0**-23, "bf16")
    check_value('min_loss_scale(2**-23, "bf16")', bf16, 1,
                why="bf16 has fp32's 8 exponent bits: it needs no loss scaling.")


@pytest.mark.check("accounting.formats.lecture")
def test_mxfp8_scales_32_elements_and_mxfp4_16(impl):
    mxfp8 = impl.accounting.mx_num_scales(4096, "mxfp8")
    check_value('mx_num_scales(4096, "mxfp8")', mxfp8, 128, signatures=mistakes.MX_SCALES)
    mxfp4 = impl.accounting.mx_num_scales(4096, "mxfp4")
    check_value('mx_num_scales(4096, "mxfp4")', mxfp4, 256, signatures=mistakes.MX_SCALES)
    check_value('mx_storage_bytes(4096, "mxfp8")', impl.accounting.mx_storage_bytes(4096, "mxfp8"), 4224)


@pytest.mark.check("accounting.formats.lecture")
def test_gpt2_vocabulary_pads_from_50257_to_50304(impl):
    check_value("round_up_to_multiple(50257, 64)", impl.accounting.round_up_to_multiple(50_257, 64), 50_304)


# -------------------------------------------------------------------------------------------- inference

@pytest.mark.check("accounting.inference.lecture")
def test_llama3_8b_weights_without_the_embedding_are_14_0_of_15_gib(impl):
    matmul = impl.accounting.non_embedding_params(LLAMA3_8B_PARAMS, LLAMA3_VOCAB, LLAMA3_D_MODEL)
    check_value("non_embedding_params(8.03e9, 128256, 4096)", matmul, 7_504_663_424,   # 8.03e9 - 525,336,576
                wrong_answers={6_979_326_848: "only the embedding table is a lookup: the output head is a "
                                              "matmul, read at every decode step."})
    check_value("GiB of 7,504,663,424 bf16 weights", impl.accounting.bytes_to_gib(2 * 7_504_663_424),
                13.978524923324585)                                    # "14.0 GiB"
    check_value("GiB of 8.03e9 bf16 weights", impl.accounting.bytes_to_gib(2 * 8.03e9), 14.957040548324585)


@pytest.mark.check("accounting.inference.lecture")
def test_batch_1_decode_of_14_gib_takes_4_49_ms_so_about_220_tokens_per_s(impl):
    weights = 14.0 * 2**30
    step = impl.accounting.decode_step_time(weights, H100_BANDWIDTH)
    check_value("decode_step_time(14.0 GiB, 3.35e12)", step, weights / 3.35e12,   # 4.487 ms
                signatures={1e9 / 2**30: "14.0 GiB is 14 x 2**30 bytes, not 14e9."})
    rate = impl.accounting.decode_tokens_per_second(weights, H100_BANDWIDTH)
    check_value("decode_tokens_per_second(14.0 GiB, 3.35e12)", rate, 3.35e12 / weights)   # 222.9


@pytest.mark.check("accounting.inference.lecture")
def test_kv_cache_reads_match_the_weights_at_114688_tokens_or_3584_at_batch_32(impl):
    weights, per_token = 14 * 2**30, 128 * 2**10
    single = impl.accounting.kv_weight_crossover_tokens(weights, per_token)
    check_value("kv_weight_crossover_tokens(14 GiB, 128 KiB)", single, 114_688)
    batched = impl.accounting.kv_weight_crossover_tokens(weights, per_token, batch=32)
    check_value("kv_weight_crossover_tokens(14 GiB, 128 KiB, batch=32)", batched, 3_584,
                signatures={32: "the batch is ignored: each of the 32 sequences reads its own cache."})


@pytest.mark.check("accounting.inference.lecture")
def test_prefill_of_2048_tokens_is_30_8_tflop_and_72_percent_of_peak_in_43_ms(impl):
    matmul_params = 8.03e9 - 2 * LLAMA3_VOCAB * LLAMA3_D_MODEL        # no embedding, no output head
    attention = 32 * 4 * 2048**2 * 4096                               # 4BT^2D over 32 layers: 2.2e12
    flops = impl.accounting.prefill_flops(matmul_params, 2048, attention)
    check_value("prefill_flops(6.979e9, 2048, 2.2e12)", flops, 30_786_346_024_960,
                signatures={(matmul_params * 2048 + attention) / 30_786_346_024_960:
                            "the matmul term is halved: a multiply-add is 2 FLOPs, so 2 x params x tokens."})
    achieved = impl.accounting.mfu(30_786_346_024_960, 1, H100_BF16_PEAK, 0.043)
    check_value("mfu(30.8e12, 1, 989e12, 43 ms)", achieved, 0.7239247072438687)


@pytest.mark.check("accounting.inference.lecture")
def test_mha_projections_are_8btd2(impl):
    flops = impl.accounting.attention_projection_flops(1, 2048, 4096)
    check_value("attention_projection_flops(1, 2048, 4096)", flops, 8 * 2048 * 4096**2,
                signatures=mistakes.PROJECTIONS)


@pytest.mark.check("accounting.inference.lecture")
def test_decode_intensity_is_about_the_batch_so_h100_needs_batch_345(impl):
    # a decode matmul [b, 4096] @ [4096, 4096] in bf16 has intensity about b
    for batch in (1, 8, 128):
        intensity = impl.accounting.matmul_intensity(batch, 4096, 4096, 2)
        assert intensity == pytest.approx(batch, rel=0.07), (
            f"matmul_intensity({batch}, 4096, 4096, 2) returned {intensity}: about the batch, {batch}")
    ridge = 989 / 3.35
    batch = impl.accounting.decode_batch_for_compute_bound(4096, H100_BF16_PEAK, H100_BANDWIDTH)
    check_value("decode_batch_for_compute_bound(4096, 989e12, 3.35e12)", batch, 345,
                wrong_answers=mistakes.decode_batch_mistakes(ridge))


@pytest.mark.check("accounting.inference.lecture")
def test_200_kernel_launches_at_5_us_take_1200_us_and_the_gpu_is_busy_17_percent(impl):
    total = impl.accounting.launch_bound_time(200, 200e-6, 5e-6)
    check_value("launch_bound_time(200, 200 us, 5 us)", total, 1200e-6,
                wrong_answers=mistakes.launch_mistakes(200, 200e-6, 5e-6))
    busy = impl.accounting.gpu_busy_fraction(200, 200e-6, 5e-6)
    check_value("gpu_busy_fraction(200, 200 us, 5 us)", busy, 200 / 1200)


# ---------------------------------------------------------------------------------------------- errors

@pytest.mark.check("accounting.errors.common")
@pytest.mark.parametrize("function, args, argument", [
    ("param_bytes", (-1, "bf16"), "n_params"),
    ("kv_cache_bytes", (32, 8, 128, -5), "seq_len"),
    ("num_tiles", (-1, 128, 64, 64), "m"),
], ids=["param_bytes", "kv_cache_bytes", "num_tiles"])
def test_negative_size_raises_value_error_naming_the_argument(impl, function, args, argument):
    with raises_from_student(ValueError, match=rf"\b{argument}\b"):
        getattr(impl.accounting, function)(*args)


@pytest.mark.check("accounting.errors.common")
def test_unknown_dtype_name_raises_value_error_listing_the_accepted_names(impl):
    with raises_from_student(ValueError, match=r"dtype(?s:.*)bf16(?s:.*)fp12|dtype(?s:.*)fp12(?s:.*)bf16"):
        impl.accounting.param_bytes(1000, "fp12")


@pytest.mark.check("accounting.errors.common")
def test_zero_bandwidth_raises_value_error(impl):
    with raises_from_student(ValueError, match="bandwidth"):
        impl.accounting.ridge_point(H100_BF16_PEAK, 0)
