"""Public tests for the `matmul` problem: the analytic companions and the tiled Triton matmul.

Each product is checked against an fp64 reference, allowed twice the error that the plain computation
makes in the same precision (docs/numerics.md): torch.matmul for fp16/bf16, and for fp32 the textbook
loop of fp32 multiply-adds. A kernel that accumulates in fp32 and rounds once passes; one that rounds on
the way does not. TF32 products on fp32 inputs cost `matmul.fp32.ieee` alone: every other check allows
the error a TF32 product makes, so one missing input_precision="ieee" is charged once.
On a GPU the shapes are the lecture's (1792^3 and 1793^3 for wave quantization, 257^3 for edge tiles);
on a CPU, where Triton's interpreter is slow, smaller shapes with the same edge cases are used.
"""

import pytest
import torch

from grader.references.matmul import assert_matmul_close, describe
from grader.testing import MATMUL_OPS, raises_from_student, randn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# name: ((M, K, N) on a GPU, (M, K, N) on a CPU)
LECTURE_SHAPES = {
    "square_1792": ((1792, 1792, 1792), (64, 64, 64)),
    "square_1793": ((1793, 1793, 1793), (65, 65, 65)),
    "square_257": ((257, 257, 257), (257, 257, 257)),
    "k_1000": ((1024, 1000, 768), (48, 1000, 40)),
    "row_1_by_n": ((1, 4096, 4096), (1, 100, 130)),
    "column_n_by_1": ((4096, 4096, 1), (130, 100, 1)),
}


# ---------------------------------------------------------------------------------------- helpers


def random_pair(M, K, N, dtype, device, gen):
    a = randn((M, K), dtype=dtype, device=device, gen=gen)
    b = randn((K, N), dtype=dtype, device=device, gen=gen)
    return a, b


# ---------------------------------------------------------------------------------------- analytic


@pytest.mark.check("matmul.analytic.lecture")
def test_naive_matmul_intensity_is_half_a_flop_per_byte_in_bf16(impl):
    assert impl.matmul.naive_matmul_ai(2) == pytest.approx(0.5)
    assert impl.matmul.naive_matmul_ai(4) == pytest.approx(0.25)


@pytest.mark.check("matmul.analytic.lecture")
def test_tiled_matmul_intensity_grows_with_the_tile(impl):
    assert impl.matmul.tiled_matmul_ai(32, 2) == pytest.approx(16.0)
    assert impl.matmul.tiled_matmul_ai(128, 2) == pytest.approx(64.0)


@pytest.mark.check("matmul.analytic.lecture")
def test_largest_square_tile_in_h100_shared_memory(impl):
    assert impl.matmul.max_square_tile(228 * 1024, 2) == 197
    assert impl.matmul.max_square_tile(228 * 1024, 4) == 139


@pytest.mark.check("matmul.analytic.lecture")
def test_tiling_divides_global_reads_per_element_by_the_tile(impl):
    assert impl.matmul.global_reads_per_input_element(4096, 1) == 4096
    assert impl.matmul.global_reads_per_input_element(4096, 128) == 32


# ---------------------------------------------------------------------------------------- values


@pytest.mark.triton
@pytest.mark.check("matmul.shapes.lecture")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape_name", list(LECTURE_SHAPES))
def test_lecture_shapes_match_fp64_reference(impl, device, on_gpu, gen, shape_name, dtype_name):
    M, K, N = LECTURE_SHAPES[shape_name][0 if on_gpu else 1]
    dtype = DTYPES[dtype_name]
    a, b = random_pair(M, K, N, dtype, device, gen)
    out = impl.matmul.matmul(a, b)
    assert_matmul_close(out, a, b, f"{shape_name}: {describe(M, K, N, dtype)}")


@pytest.mark.triton
@pytest.mark.check("matmul.layouts.transposed")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("layout", ["a.T", "b.T", "a.T and b.T"])
def test_transposed_inputs_are_read_through_their_strides(impl, device, on_gpu, gen, layout, dtype_name):
    M, K, N = (384, 320, 448) if on_gpu else (40, 72, 56)
    dtype = DTYPES[dtype_name]
    a = randn((K, M), dtype=dtype, device=device, gen=gen).t() if "a.T" in layout else \
        randn((M, K), dtype=dtype, device=device, gen=gen)
    b = randn((N, K), dtype=dtype, device=device, gen=gen).t() if "b.T" in layout else \
        randn((K, N), dtype=dtype, device=device, gen=gen)
    out = impl.matmul.matmul(a, b)
    assert_matmul_close(out, a, b, describe(M, K, N, dtype, layout))


@pytest.mark.triton
@pytest.mark.check("matmul.fp32.ieee")
def test_fp32_inputs_are_not_rounded_to_tf32(impl, device, on_gpu, gen):
    """TF32 keeps 10 mantissa bits: at K = 2048 its error is ~100x that of exact fp32 multiply-adds.

    (On a CPU the interpreter always multiplies in fp32, so this check only bites on a GPU.)"""
    M, K, N = (512, 2048, 512) if on_gpu else (32, 512, 48)
    a, b = random_pair(M, K, N, torch.float32, device, gen)
    out = impl.matmul.matmul(a, b)
    assert_matmul_close(out, a, b, describe(M, K, N, torch.float32), allow_tf32=False)


@pytest.mark.triton
@pytest.mark.check("matmul.empty.lecture")
@pytest.mark.parametrize("M, K, N", [(0, 16, 8), (8, 16, 0), (8, 0, 16)], ids=["M=0", "N=0", "K=0"])
def test_empty_problems_return_empty_or_zero_results(impl, device, M, K, N):
    a = torch.ones((M, K), dtype=torch.float16, device=device)
    b = torch.ones((K, N), dtype=torch.float16, device=device)
    out = impl.matmul.matmul(a, b)
    assert tuple(out.shape) == (M, N), f"M={M} K={K} N={N}: result shape {tuple(out.shape)}, expected {(M, N)}"
    assert out.dtype == torch.float16
    assert bool((out == 0).all()), f"M={M} K={K} N={N}: a sum over K = 0 terms is 0"


# ---------------------------------------------------------------------------------------- rules


@pytest.mark.triton
@pytest.mark.check("matmul.rules.triton_only")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_matmul_runs_a_triton_kernel_without_torch_matmul(impl, device, gen, dtype_name):
    dtype = DTYPES[dtype_name]
    a, b = random_pair(33, 40, 17, dtype, device, gen)
    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        out = impl.matmul.matmul(a, b)
    assert_matmul_close(out, a, b, describe(33, 40, 17, dtype))


# ---------------------------------------------------------------------------------------- errors


@pytest.mark.triton
@pytest.mark.check("matmul.errors.bad_input")
def test_mismatched_inner_dimensions_raise_value_error(impl, device):
    a = torch.ones((4, 5), device=device)
    b = torch.ones((6, 3), device=device)
    with raises_from_student(ValueError, match=r"5|6"):
        impl.matmul.matmul(a, b)


@pytest.mark.triton
@pytest.mark.check("matmul.errors.bad_input")
def test_mixed_dtypes_raise_value_error(impl, device):
    a = torch.ones((4, 5), dtype=torch.float16, device=device)
    b = torch.ones((5, 3), dtype=torch.bfloat16, device=device)
    with raises_from_student(ValueError, match=r"float16|bfloat16|dtype"):
        impl.matmul.matmul(a, b)


@pytest.mark.triton
@pytest.mark.check("matmul.errors.bad_input")
def test_unsupported_dtype_raises_value_error(impl, device):
    a = torch.ones((4, 5), dtype=torch.int32, device=device)
    b = torch.ones((5, 3), dtype=torch.int32, device=device)
    with raises_from_student(ValueError, match=r"int32|dtype"):
        impl.matmul.matmul(a, b)


@pytest.mark.triton
@pytest.mark.check("matmul.errors.bad_input")
def test_one_dimensional_input_raises_value_error(impl, device):
    a = torch.ones((5,), device=device)
    b = torch.ones((5, 3), device=device)
    with raises_from_student(ValueError, match=r"2-D|2D|dim|rank|shape"):
        impl.matmul.matmul(a, b)
