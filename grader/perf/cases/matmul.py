"""Tiled matmul against cuBLAS (`torch.matmul`), bf16 and fp16.

Graded sizes are 4096^3 and 8192^3 (compute-bound: a square matmul does n/3 FLOP per byte, far right
of the ridge). 2048^3, an LLM projection and the wave-quantization pair 1792/1793 are shown too.
The tiny variants (Triton's CPU interpreter) divide every dimension by TINY_DIVISOR, rounding up, so
that 1793 stays odd and its edge tiles stay masked.
"""

from __future__ import annotations

from grader.perf.cases import Benchmark, assert_relative_error, randn

CHECK = "matmul.perf.throughput"
GRADED_SIZES = (4096, 8192)
SQUARE_SIZES = (2048, 4096, 8192, 1792, 1793)
LLM_SHAPE = (8192, 4096, 14336)     # 8192 tokens through a 4096 -> 14336 MLP up-projection (Llama-3 8B)
TINY_DIVISOR = 128


def benchmarks(tiny: bool = False) -> list[Benchmark]:
    import torch

    cases = []
    for dtype, label in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        shapes = [(n, n, n) for n in SQUARE_SIZES] + [LLM_SHAPE]
        for shape in shapes:
            graded = shape[0] == shape[1] == shape[2] and shape[0] in GRADED_SIZES
            square = shape != LLM_SHAPE
            if tiny:
                shape = tuple(-(-size // TINY_DIVISOR) for size in shape)
            cases.append(_case(*shape, dtype, label, CHECK if graded else None, square))
    return cases


def _case(m, k, n, dtype, label, check, square) -> Benchmark:
    bytes_per = 2
    return Benchmark(
        kernel="matmul",
        case=f"{label} {m}x{k}x{n}" + ("" if square else " (LLM up-proj)"),
        target="matmul.matmul",
        make_inputs=lambda gen: (randn((m, k), dtype, gen), randn((k, n), dtype, gen)),
        baselines={"torch.matmul (cuBLAS)": _cublas},
        flops=2.0 * m * k * n,
        bytes_moved=float(bytes_per * (m * k + k * n + m * n)),
        check_output=_check,
        check=check,
    )


def _cublas(a, b):
    import torch

    return lambda: torch.matmul(a, b)


def _check(output, inputs):
    import torch

    a, b = inputs
    assert_relative_error(output, torch.matmul(a, b), 2e-2, f"matmul {tuple(a.shape)}x{tuple(b.shape)}")
