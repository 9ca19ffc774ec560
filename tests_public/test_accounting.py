"""Public tests for `accounting`: the lecture's own worked numbers, computed by your functions.

Every expected value below is written out from the lecture notes (with the arithmetic in a comment), so
a failing test tells you which formula or unit to re-read. Exact integers are compared exactly; other
values to a relative 1e-9.
"""

import pytest
import torch

from grader.testing import raises_from_student

H100_BF16_PEAK = 989e12        # FLOP/s, dense tensor cores
H100_BANDWIDTH = 3.35e12       # bytes/s, HBM3


def exactly(value):
    """pytest.approx tight enough that only rounding differences pass."""
    return pytest.approx(value, rel=1e-9)


# ---------------------------------------------------------------------------------------------- memory

@pytest.mark.check("accounting.memory.lecture")
def test_8b_bf16_weights_are_16e9_bytes_which_is_14_90_gib(impl):
    n_bytes = impl.accounting.param_bytes(8e9, "bf16")
    assert n_bytes == 16_000_000_000, "8e9 params x 16 bits / 8 = 16e9 bytes"
    assert impl.accounting.bytes_to_gib(n_bytes) == exactly(16e9 / 2**30)   # 14.901161..., not 16


@pytest.mark.check("accounting.memory.lecture")
def test_8b_int4_ideally_packed_is_4e9_bytes(impl):
    assert impl.accounting.param_bytes(8e9, "int4") == 4_000_000_000


@pytest.mark.check("accounting.memory.lecture")
def test_dtype_may_be_a_torch_dtype(impl):
    assert impl.accounting.param_bytes(1000, torch.bfloat16) == 2000
    assert impl.accounting.param_bytes(1000, torch.float32) == 4000


@pytest.mark.check("accounting.memory.lecture")
def test_mixed_precision_adamw_is_2_2_4_8_bytes_per_param(impl):
    parts = impl.accounting.training_bytes_breakdown()
    assert parts == {"weights": 2, "gradients": 2, "master_weights": 4, "optimizer_state": 8}
    assert impl.accounting.training_bytes_per_param() == 16


@pytest.mark.check("accounting.memory.lecture")
def test_training_state_of_an_8b_model_is_128e9_bytes(impl):
    assert impl.accounting.training_memory_bytes(8e9) == 128_000_000_000     # 8e9 x 16


@pytest.mark.check("accounting.memory.lecture")
def test_80gb_card_trains_at_most_5b_params(impl):
    assert impl.accounting.max_trainable_params(80e9) == 5_000_000_000       # 80e9 / 16


@pytest.mark.check("accounting.memory.lecture")
def test_llama3_8b_kv_cache_is_128kib_per_token(impl):
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes
    assert impl.accounting.kv_cache_bytes(32, 8, 128, seq_len=1) == 131_072


@pytest.mark.check("accounting.memory.lecture")
def test_one_4096_square_bf16_attention_matrix_is_32mib(impl):
    assert impl.accounting.attention_matrix_bytes(4096, 4096) == 33_554_432   # 4096**2 x 2


# ----------------------------------------------------------------------------------------------- flops

@pytest.mark.check("accounting.flops.lecture")
def test_8192_cubed_matmul_is_2mkn_flops(impl):
    assert impl.accounting.matmul_flops(8192, 8192, 8192) == 1_099_511_627_776


@pytest.mark.check("accounting.flops.lecture")
def test_ffn_is_4df_and_swiglu_is_6df(impl):
    assert impl.accounting.ffn_flops_per_token(2, 8) == 64
    assert impl.accounting.ffn_flops_per_token(2, 8, swiglu=True) == 96


@pytest.mark.check("accounting.flops.lecture")
def test_llama3_prefill_attention_term_is_4bt2d(impl):
    # B = 1, T = 2048, D = 32 heads x 128 = 4096: 4 x 2048**2 x 4096
    assert impl.accounting.attention_flops(1, 32, 2048, 2048, 128) == 68_719_476_736


@pytest.mark.check("accounting.flops.lecture")
def test_causal_attention_counts_half_the_score_matrix(impl):
    assert impl.accounting.attention_flops(1, 32, 2048, 2048, 128, causal=True) == 34_359_738_368


@pytest.mark.check("accounting.flops.lecture")
def test_llama3_8b_on_15t_tokens_is_6nd(impl):
    assert impl.accounting.training_flops(8.03e9, 15e12) == exactly(7.227e23)


@pytest.mark.check("accounting.flops.lecture")
def test_mfu_of_2048_h100s_for_30_days_is_13_8_percent(impl):
    # available: 2048 x 989e12 x 30 x 86400 = 5.250023e24 FLOPs; needed 7.23e23
    seconds = 30 * 86400
    assert impl.accounting.mfu(7.23e23, 2048, H100_BF16_PEAK, seconds) == exactly(0.13771367127523126)


# -------------------------------------------------------------------------------------------- roofline

@pytest.mark.check("accounting.roofline.lecture")
def test_h100_ridge_point_is_295_flop_per_byte(impl):
    assert impl.accounting.ridge_point(H100_BF16_PEAK, H100_BANDWIDTH) == exactly(989 / 3.35)


@pytest.mark.check("accounting.roofline.lecture")
def test_toy_roofline_ridge_is_100_and_intensity_10_reaches_10_tflops(impl):
    assert impl.accounting.ridge_point(100e12, 1e12) == exactly(100.0)
    assert impl.accounting.attainable_flops(10, 100e12, 1e12) == exactly(1e13)


@pytest.mark.check("accounting.roofline.lecture")
def test_bf16_elementwise_add_intensity_is_one_sixth(impl):
    n = 8192 * 8192
    assert impl.accounting.arithmetic_intensity(n, 3 * n * 2) == exactly(1 / 6)


@pytest.mark.check("accounting.roofline.lecture")
def test_fp32_relu_intensity_is_0_125_not_8(impl):
    # one operation per element; read 4 bytes + write 4 bytes (the slide's "8 FLOP/byte" is inverted)
    n = 1 << 20
    assert impl.accounting.arithmetic_intensity(n, 8 * n) == exactly(0.125)


@pytest.mark.check("accounting.roofline.lecture")
def test_square_bf16_matmul_intensity_is_n_over_3(impl):
    assert impl.accounting.matmul_intensity(8192, 8192, 8192, 2) == exactly(8192 / 3)


@pytest.mark.check("accounting.roofline.lecture")
def test_roofline_time_is_set_by_the_slower_roof(impl):
    # toy hardware: 100e12 FLOP/s, 1e12 bytes/s
    assert impl.accounting.roofline_time(1e12, 1e9, 100e12, 1e12) == exactly(0.01)    # compute: 1e12/1e14
    assert impl.accounting.roofline_time(1e9, 1e12, 100e12, 1e12) == exactly(1.0)     # memory: 1e12/1e12


# ----------------------------------------------------------------------------------------------- waves

@pytest.mark.check("accounting.waves.lecture")
def test_1792_squared_is_98_tiles_in_one_wave_on_108_sms(impl):
    n_tiles = impl.accounting.num_tiles(1792, 1792, 256, 128)
    assert n_tiles == 98                                                       # 7 x 14
    assert impl.accounting.num_waves(n_tiles, 108) == 1


@pytest.mark.check("accounting.waves.lecture")
def test_1793_squared_needs_a_second_wave_of_12_tiles(impl):
    n_tiles = impl.accounting.num_tiles(1793, 1793, 256, 128)
    assert n_tiles == 120                                                      # 8 x 15
    assert impl.accounting.num_waves(n_tiles, 108) == 2
    assert impl.accounting.last_wave_tiles(n_tiles, 108) == 12


@pytest.mark.check("accounting.waves.lecture")
def test_8192_squared_in_128_tiles_is_32_waves_at_0_970_on_132_sms(impl):
    n_tiles = impl.accounting.num_tiles(8192, 8192, 128, 128)
    assert n_tiles == 4096
    assert impl.accounting.num_waves(n_tiles, 132) == 32
    assert impl.accounting.wave_efficiency(n_tiles, 132) == exactly(4096 / (32 * 132))


# ---------------------------------------------------------------------------------------------- energy

@pytest.mark.check("accounting.energy.lecture")
def test_1e18_flops_at_100_tflops_and_1kw_is_2_78_kwh(impl):
    # 1e18 / 100e12 = 10,000 s; x 1000 W = 1e7 J; / 3.6e6 J per kWh
    assert impl.accounting.energy_kwh(1e18, 100e12, 1000) == exactly(1e7 / 3.6e6)


@pytest.mark.check("accounting.energy.lecture")
def test_pue_1_2_multiplies_the_energy(impl):
    assert impl.accounting.energy_kwh(1e18, 100e12, 1000, pue=1.2) == exactly(1.2e7 / 3.6e6)


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
