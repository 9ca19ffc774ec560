"""Hidden tests for `matmul`: shapes, layouts and traps the public suite never shows.

Every product is computed with PyTorch's matmul ops forbidden and a Triton launch required
(`impl.guards`), so a kernel that falls back to torch.matmul anywhere scores zero on these checks.
What each check catches (the matmul_* variants in tests/broken_variants.py fall into them):
- edge tiles that load past the matrix (no masks): inputs are views whose neighbouring memory is NaN;
- a running sum kept in fp16/bf16 instead of fp32: long K with positive inputs;
- torch.matmul / @ inside `matmul`, or no Triton launch at all;
- results cached by shape: the same shape called again on new inputs;
- strides ignored (inputs assumed contiguous): sliced, stepped and broadcast views.
The perf check times bf16/fp16 4096^3 and 8192^3 against cuBLAS (grader.perf.cases.matmul), with the
same rules in force and every timed output checked.
"""

import pytest
import torch

from grader.perf.cases import matmul as matmul_benchmarks
from grader.perf.measure import measure_graded_case
from grader.references.matmul import assert_matmul_close, describe
from grader.testing import MATMUL_OPS, raises_from_student, randn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LARGEST_BLOCK = 256   # padding past a poisoned view: more than any sensible tile overhangs

# name: ((M, K, N) on a GPU, (M, K, N) on a CPU)
MORE_SHAPES = {
    "q_projection": ((2048, 4096, 4096), (96, 128, 64)),
    "wide_k_narrow_n": ((1000, 2000, 17), (60, 300, 17)),
    "primes": ((127, 131, 137), (37, 41, 43)),
    "one_element": ((1, 1, 1), (1, 1, 1)),
    "tiny_k": ((512, 3, 640), (70, 3, 50)),
    "exact_tiles": ((512, 512, 512), (64, 96, 128)),
    "tall_skinny": ((8191, 64, 24), (300, 16, 24)),
}


# ---------------------------------------------------------------------------------------- helpers


def triton_matmul(impl, a, b):
    """The student's matmul with torch's matmul ops forbidden and a Triton launch required."""
    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        return impl.matmul.matmul(a, b)


def random_pair(M, K, N, dtype, device, gen):
    return (randn((M, K), dtype=dtype, device=device, gen=gen),
            randn((K, N), dtype=dtype, device=device, gen=gen))


def poisoned_view(rows, cols, dtype, device, gen):
    """A [rows, cols] view of random values inside a larger buffer whose other entries are NaN.

    Reading any element past the view's last row or column (an unmasked edge tile) reads NaN, and
    NaN times anything, 0 included, is NaN: the product then shows the overhang."""
    values = randn((rows, cols), dtype=dtype, device=device, gen=gen)
    buffer = torch.full((rows + LARGEST_BLOCK, cols + LARGEST_BLOCK), float("nan"), dtype=dtype, device=device)
    buffer[:rows, :cols] = values
    return buffer[:rows, :cols]


# ---------------------------------------------------------------------------------------- analytic


@pytest.mark.check("matmul.analytic.variants")
def test_tiled_intensity_at_the_largest_tiles_that_fit(impl):
    assert impl.matmul.tiled_matmul_ai(139, 4) == pytest.approx(34.75)
    assert impl.matmul.tiled_matmul_ai(197, 2) == pytest.approx(98.5)
    assert impl.matmul.naive_matmul_ai(1) == pytest.approx(1.0)


@pytest.mark.check("matmul.analytic.variants")
def test_largest_square_tile_on_an_a100_and_with_two_tiles(impl):
    assert impl.matmul.max_square_tile(164 * 1024, 2) == 167
    assert impl.matmul.max_square_tile(228 * 1024, 2, n_tiles=2) == 241   # C kept in registers
    assert impl.matmul.max_square_tile(48, 4, n_tiles=3) == 2


@pytest.mark.check("matmul.analytic.variants")
def test_hbm_traffic_of_a_tiled_matmul(impl):
    assert impl.matmul.tiled_matmul_hbm_elements(256, 32) == 1_114_112
    assert impl.matmul.tiled_matmul_hbm_elements(256, 256) == 3 * 256 * 256    # each element moved once
    assert impl.matmul.global_reads_per_input_element(4096, 4096) == 1
    assert impl.matmul.global_reads_per_input_element(100, 32) == 4             # partial tiles count


@pytest.mark.check("matmul.analytic.variants")
@pytest.mark.parametrize("call", [
    ("tiled_matmul_ai", (0, 2)), ("tiled_matmul_ai", (32, -2)), ("naive_matmul_ai", (0,)),
    ("max_square_tile", (228 * 1024, 0)), ("global_reads_per_input_element", (4096, 0)),
], ids=lambda call: f"{call[0]}{call[1]}")
def test_analytic_functions_reject_non_positive_sizes(impl, call):
    name, args = call
    with raises_from_student(ValueError):
        getattr(impl.matmul, name)(*args)


# ---------------------------------------------------------------------------------------- values


@pytest.mark.triton
@pytest.mark.check("matmul.shapes.variants")
@pytest.mark.parametrize("draw", [0, 1])
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape_name", list(MORE_SHAPES))
def test_more_shapes_match_fp64_reference(impl, device, on_gpu, gen, shape_name, dtype_name, draw):
    M, K, N = MORE_SHAPES[shape_name][0 if on_gpu else 1]
    dtype = DTYPES[dtype_name]
    a, b = random_pair(M, K, N, dtype, device, gen)
    out = triton_matmul(impl, a, b)
    assert_matmul_close(out, a, b, f"{shape_name} draw {draw}: {describe(M, K, N, dtype)}")


def strided_inputs(layout, M, K, N, dtype, device, gen):
    """a [M, K] and b [K, N] as non-contiguous views of the kind `layout` names."""
    def draw(*shape):
        return randn(shape, dtype=dtype, device=device, gen=gen)
    if layout == "every_other_row":
        return draw(2 * M, K)[::2], draw(2 * K, N)[::2]
    if layout == "column_window":
        return draw(M, K + 7)[:, 5:5 + K], draw(K + 3, N + 9)[2:2 + K, 4:4 + N]
    if layout == "steps_in_both_dims":
        return draw(2 * M, 3 * K)[::2, ::3], draw(3 * K, 2 * N)[::3, ::2]
    if layout == "transpose_of_slice":
        return draw(K + 4, M + 6)[3:3 + K, 1:1 + M].t(), draw(2 * N, K)[::2].t()
    if layout == "broadcast_rows":
        return draw(1, K).expand(M, K), draw(K, 1).expand(K, N)
    raise AssertionError(layout)


@pytest.mark.triton
@pytest.mark.check("matmul.layouts.strided")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("layout", ["every_other_row", "column_window", "steps_in_both_dims",
                                    "transpose_of_slice", "broadcast_rows"])
def test_non_contiguous_inputs_are_read_through_their_strides(impl, device, on_gpu, gen, layout, dtype_name):
    M, K, N = (320, 288, 352) if on_gpu else (40, 72, 36)
    dtype = DTYPES[dtype_name]
    a, b = strided_inputs(layout, M, K, N, dtype, device, gen)
    out = triton_matmul(impl, a, b)
    assert_matmul_close(out, a, b, describe(M, K, N, dtype, layout))


@pytest.mark.triton
@pytest.mark.check("matmul.boundary.masked")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("gpu_shape, cpu_shape", [
    ((1793, 1000, 1793), (65, 97, 33)),
    ((129, 77, 257), (33, 45, 70)),
    ((5, 4099, 3), (5, 300, 3)),
], ids=["big_odd", "mid_odd", "tiny_mn_long_k"])
def test_edge_tiles_read_nothing_past_the_matrix(impl, device, on_gpu, gen, gpu_shape, cpu_shape, dtype_name):
    M, K, N = gpu_shape if on_gpu else cpu_shape
    dtype = DTYPES[dtype_name]
    a = poisoned_view(M, K, dtype, device, gen)
    b = poisoned_view(K, N, dtype, device, gen)
    out = triton_matmul(impl, a, b)
    context = describe(M, K, N, dtype, "views with NaN beyond the last row and column")
    assert not bool(out.isnan().any()), (
        f"[{context}] the result has NaN: an edge tile loaded elements past the matrix (mask the loads, "
        "with other=0, in M, N and the last K-slice)")
    assert_matmul_close(out, a, b, context)


@pytest.mark.triton
@pytest.mark.check("matmul.accumulate.fp32")
@pytest.mark.parametrize("dtype_name", ["fp16", "bf16"])
def test_long_k_sums_are_kept_in_fp32(impl, device, on_gpu, gen, dtype_name):
    """Positive inputs make every partial sum grow; rounding it to 16 bits at each K-step loses
    about one unit in the last place per step, far more than rounding the final fp32 sum once."""
    M, K, N = (256, 16384, 256) if on_gpu else (32, 4096, 32)
    dtype = DTYPES[dtype_name]
    a = torch.rand((M, K), generator=gen).to(device=device, dtype=dtype)
    b = torch.rand((K, N), generator=gen).to(device=device, dtype=dtype)
    out = triton_matmul(impl, a, b)
    assert_matmul_close(out, a, b, describe(M, K, N, dtype, "uniform [0, 1) inputs"))


# ---------------------------------------------------------------------------------------- rules


# The rule is judged on its own: at tile-aligned sizes any reasonable kernel supports, and
# whatever the values, so a kernel that is wrong (or crashes on ragged edges elsewhere) but honest keeps
# these points. A torch fallback for other shapes is still found: the static scan reads the whole
# function whatever the shape. A call that raises cannot be observed and fails here too.
RULE_SIZES = {"square": ((256, 256, 256), (64, 64, 64)), "wide": ((128, 512, 384), (64, 128, 128)),
              "transposed": ((192, 128, 64), (64, 64, 32))}


@pytest.mark.triton
@pytest.mark.check("matmul.rules.no_torch")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape_name", list(RULE_SIZES))
def test_every_dtype_and_shape_is_computed_by_triton(impl, device, on_gpu, gen, shape_name, dtype_name):
    M, K, N = RULE_SIZES[shape_name][0 if on_gpu else 1]
    a, b = random_pair(M, K, N, DTYPES[dtype_name], device, gen)
    if shape_name == "transposed":
        a, b = a.t().contiguous().t(), b.t().contiguous().t()
    triton_matmul(impl, a, b)


@pytest.mark.triton
@pytest.mark.check("matmul.rules.fresh_inputs")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_same_shape_on_new_inputs_gives_the_new_product(impl, device, on_gpu, gen, dtype_name):
    M, K, N = (384, 512, 256) if on_gpu else (48, 64, 32)
    dtype = DTYPES[dtype_name]
    first = random_pair(M, K, N, dtype, device, gen)
    second = random_pair(M, K, N, dtype, device, gen)
    out_first = triton_matmul(impl, *first)
    out_second = triton_matmul(impl, *second)
    assert_matmul_close(out_first, *first, describe(M, K, N, dtype, "first call"))
    assert_matmul_close(out_second, *second, describe(M, K, N, dtype, "second call, same shape, new values"))
    a, b = first
    a.mul_(-2.0)   # same tensors, new values in place
    out_third = triton_matmul(impl, a, b)
    assert_matmul_close(out_third, a, b, describe(M, K, N, dtype, "first inputs changed in place"))


# ---------------------------------------------------------------------------------------- errors


@pytest.mark.triton
@pytest.mark.check("matmul.errors.variants")
@pytest.mark.parametrize("case", [
    ("vector_a", (7,), (7, 3), torch.float32, torch.float32, r"\(7,\)|1-D|2-D|dim|rank"),
    ("scalar_b", (4, 7), (), torch.float32, torch.float32, r"\(\)|0-D|2-D|dim|rank"),
    ("inner_dims", (4, 7), (8, 3), torch.float16, torch.float16, r"7"),
    ("float64", (4, 7), (7, 3), torch.float64, torch.float64, r"float64|double"),
    ("int64", (4, 7), (7, 3), torch.int64, torch.int64, r"int64|long"),
    ("mixed_fp32_fp16", (4, 7), (7, 3), torch.float32, torch.float16, r"float32|float16"),
], ids=lambda case: case[0])
def test_bad_input_raises_value_error_naming_it(impl, device, case):
    _, shape_a, shape_b, dtype_a, dtype_b, pattern = case
    a = torch.ones(shape_a, dtype=dtype_a, device=device)
    b = torch.ones(shape_b, dtype=dtype_b, device=device)
    with raises_from_student(ValueError, match=pattern):
        impl.matmul.matmul(a, b)


@pytest.mark.gpu_only
@pytest.mark.triton
@pytest.mark.check("matmul.errors.variants")
def test_tensors_on_different_devices_raise_value_error(impl):
    a = torch.ones((4, 7), device="cuda")
    b = torch.ones((7, 3), device="cpu")
    with raises_from_student(ValueError, match=r"cuda|cpu|device"):
        impl.matmul.matmul(a, b)


@pytest.mark.triton
@pytest.mark.check("matmul.empty.variants")
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("M, K, N", [(0, 0, 0), (0, 32, 16), (16, 32, 0), (48, 0, 40)],
                         ids=["all_zero", "M=0", "N=0", "K=0"])
def test_empty_problems_in_every_dtype(impl, device, M, K, N, dtype_name):
    dtype = DTYPES[dtype_name]
    a = torch.full((M, K + 5), float("nan"), dtype=dtype, device=device)[:, 5:]   # an empty or NaN-backed view
    b = torch.full((K, N), float("nan"), dtype=dtype, device=device)
    out = impl.matmul.matmul(a, b)
    assert tuple(out.shape) == (M, N), f"M={M} K={K} N={N}: result shape {tuple(out.shape)}, expected {(M, N)}"
    assert out.dtype == dtype, f"M={M} K={K} N={N}: result dtype {out.dtype}, expected {dtype}"
    assert bool((out == 0).all()), f"M={M} K={K} N={N} {dtype}: a sum over K = 0 terms is 0, got {out}"


# ---------------------------------------------------------------------------------------- performance

GRADED_BENCHMARKS = [case for case in matmul_benchmarks.benchmarks() if case.check == matmul_benchmarks.CHECK]


@pytest.mark.perf(matmul_benchmarks.CHECK)
@pytest.mark.triton
@pytest.mark.parametrize("case", GRADED_BENCHMARKS, ids=[case.case.replace(" ", "_") for case in GRADED_BENCHMARKS])
def test_throughput_against_cublas(impl, record_perf, case):
    gen = torch.Generator(device="cuda").manual_seed(1234 + len(case.case))
    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        result = measure_graded_case(impl, case, gen)
    record_perf(**result.as_record())
