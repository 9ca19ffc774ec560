"""Row softmax against the measured device-to-device copy, and `torch.softmax` as a sanity check.

Softmax does a handful of FLOPs per element (max, subtract, exp, add, divide) for 4 bytes moved in
bf16: about one FLOP per byte, two orders of magnitude left of the ridge, so it is memory-bound at
every size and graded in GB/s against the best the memory system does: a plain copy of the same
bytes (read x, write y). Each input is 256 MB (>= 4x L2), so the L2 flush cannot flatter it. The tiny
variants (Triton's CPU interpreter) keep the row lengths, so that each kernel path is the same, with
fewer rows (one at least).
"""

from __future__ import annotations

from grader.perf.cases import Benchmark, assert_relative_error, randn

CHECK = "softmax.perf.bandwidth"
CHECK_ONLINE = "softmax.perf.online"
ELEMENTS = 1 << 27                    # 2^27 bf16 = 256 MB per tensor
TINY_ELEMENTS = 1 << 15
ROW_LENGTHS = (1024, 4096, 16384)     # rows that fit on chip: one pass
LONG_ROW_LENGTHS = (65536, 262144)    # longer rows: the online (two-read) kernel
FLOPS_PER_ELEMENT = 5


def benchmarks(tiny: bool = False) -> list[Benchmark]:
    elements = TINY_ELEMENTS if tiny else ELEMENTS
    return [_case(n, elements, check=CHECK if n in ROW_LENGTHS else CHECK_ONLINE)
            for n in ROW_LENGTHS + LONG_ROW_LENGTHS]


def _case(n_cols, elements, check) -> Benchmark:
    import torch

    rows = max(1, elements // n_cols)
    return Benchmark(
        kernel="softmax",
        case=f"bf16 {rows}x{n_cols}" + (" (online)" if n_cols in LONG_ROW_LENGTHS else ""),
        target="softmax.softmax_triton",
        make_inputs=lambda gen: (randn((rows, n_cols), torch.bfloat16, gen),),
        baselines={"D2D copy": _copy, "torch.softmax": _torch_softmax},
        flops=float(FLOPS_PER_ELEMENT * rows * n_cols),
        bytes_moved=float(2 * 2 * rows * n_cols),          # read x and write y, 2 bytes each
        check_output=_check,
        check=check,
        unit="GB/s",
    )


def _copy(x):
    import torch

    return lambda: torch.empty_like(x).copy_(x)


def _torch_softmax(x):
    import torch

    return lambda: torch.softmax(x, dim=-1)


def _check(output, inputs):
    import torch

    (x,) = inputs
    assert_relative_error(output, torch.softmax(x.float(), dim=-1), 1e-2, f"softmax {tuple(x.shape)}")
