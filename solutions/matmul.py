"""Tiled matrix multiplication in Triton: C = A @ B with tiles of M, N and K.

The lecture's argument, in the order this module follows it:

1. A naive matmul is memory-bound. Each output C[i, j] does 2K FLOPs and reads 2K elements, so its
   arithmetic intensity is 2K / (2K * bytes_per_elem) = 1 / bytes_per_elem FLOP/byte (0.5 in bf16),
   hundreds of times below the H100/H200 ridge point (~295 / ~206 FLOP/byte in dense bf16).
2. Tiling fixes that. One program computes a BLOCK_M x BLOCK_N tile of C and slides along K, loading a
   BLOCK_M x BLOCK_K tile of A and a BLOCK_K x BLOCK_N tile of B per step into on-chip memory. Each step
   does 2 * BM * BN * BK FLOPs for (BM + BN) * BK loaded elements; for a square T x T tile that is
   T / bytes_per_elem FLOP/byte: every element read from HBM is reused T times.
3. Tiles are bounded by on-chip memory: three T x T tiles must fit in the 228 KiB of an H100 SM,
   so T <= 197 in bf16 and T <= 139 in fp32 (`max_square_tile`). Real kernels use rectangles such as
   128 x 256 and keep the C tile in registers, so only the A and B tiles (times the pipeline depth)
   live in shared memory.
4. Tiles that overhang the matrix edge (M, N or K not a multiple of the block) are handled with masks:
   out-of-range loads read 0 (which adds nothing to a dot product) and out-of-range stores are dropped.
5. Tile counts come in waves: a GPU runs about one big tile per SM at a time, so ceil(tiles / SMs)
   waves run, and a last wave that is nearly empty wastes most of the machine. That is why the tile
   shape is best chosen per problem size (autotuning) rather than fixed.

What you write: `check_matmul_inputs`, `matmul` with the Triton kernel it launches (its tile sizes,
launch grid, program order and any autotuning are your design), plus the small analytic functions at
the end. The write-up has optional hints.

Imports: only torch, triton, numpy, einops and Python's standard library (and the other assignment
modules); anything else is refused, as when graded (the write-up, "Handing in", says how).
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""Input dtypes `matmul` accepts. The output has the input dtype; accumulation is always fp32."""

INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
"""True when Triton runs kernels on CPU tensors in its interpreter (set before Triton is imported)."""

SHARED_MEMORY_BYTES = 227 * 1024
"""The most shared memory one Hopper program may use (228 KiB per SM, 1 KiB reserved)."""


# BEGIN SOLUTION
# ----------------------------------------------------------------------------------------------------
# Tile configurations
# ----------------------------------------------------------------------------------------------------

def _config(block_m, block_n, block_k, num_stages, num_warps, group_m=8):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": group_m},
                         num_stages=num_stages, num_warps=num_warps)


HOPPER_CONFIGS = [
    # 2-byte dtypes (bf16, fp16): BLOCK_K = 64 makes each row of a K-slice 128 bytes, one full memory
    # transaction. Intensity per K step is 2*BM*BN / ((BM + BN) * 2 bytes): 85 FLOP/byte for
    # 128 x 256, 64 for 128 x 128. Three to four pipeline stages keep the next tiles loading while the
    # tensor cores work on this one: 3 x (128*64 + 64*256) * 2 B = 144 KiB of shared memory.
    _config(128, 256, 64, num_stages=3, num_warps=8),
    _config(256, 128, 64, num_stages=3, num_warps=8),
    _config(128, 256, 64, num_stages=4, num_warps=8),
    _config(128, 128, 64, num_stages=4, num_warps=4),
    _config(128, 64, 64, num_stages=4, num_warps=4),
    # 4-byte dtype (fp32): the same 128-byte rows need BLOCK_K = 32, and fp32 tiles cost twice the
    # bytes, so the tiles are smaller (the lecture's 139 vs 197 limit). These run on the CUDA cores
    # (input_precision="ieee"), not the tensor cores.
    _config(128, 128, 32, num_stages=3, num_warps=8),
    _config(128, 64, 32, num_stages=4, num_warps=4),
    _config(64, 64, 32, num_stages=4, num_warps=4),
]
"""Autotuning candidates for Hopper (H100/H200). Every one uses GROUP_M = 8 (see `matmul_kernel`)."""

INTERPRETER_CONFIGS = [_config(32, 32, 32, num_stages=1, num_warps=4, group_m=4)]
"""One small config for the CPU interpreter: benchmarking candidates there would take minutes.

32 x 32 tiles give small test matrices several tiles per side, so the edge masks and the grouped
order (including a last, shorter group of rows) are exercised even at sizes of 33 to 130."""


def _bytes_per_element(tensor: torch.Tensor) -> int:
    return tensor.element_size()


def _shared_memory_bytes(config: triton.Config, bytes_per_elem: int) -> int:
    """Shared memory of one program: num_stages copies of an A tile and a B tile."""
    kw = config.kwargs
    return config.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * bytes_per_elem


def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def keep_configs_for_problem(configs, named_args, **kwargs):
    """Prune the autotuning candidates before timing them (Triton calls this once per new key).

    - Keep the configs made for this dtype: BLOCK_K * bytes_per_elem == 128 (one 128-byte row per
      K-slice) and a pipeline that fits in shared memory.
    - A problem with fewer 128 x 128 output tiles than the GPU has SMs cannot fill even one wave; it
      is bound by latency, not by the tiles' intensity. Timing candidates there only costs compile
      time, so keep the config with the smallest tiles (the most programs, the most SMs busy).
    """
    a = named_args["a_ptr"]
    bytes_per_elem = _bytes_per_element(a)
    fitting = [c for c in configs
               if c.kwargs["BLOCK_K"] * bytes_per_elem == 128
               and _shared_memory_bytes(c, bytes_per_elem) <= SHARED_MEMORY_BYTES]
    if not fitting:
        fitting = [min(configs, key=lambda c: _shared_memory_bytes(c, bytes_per_elem))]
    M, N = named_args["M"], named_args["N"]
    if triton.cdiv(M, 128) * triton.cdiv(N, 128) < _sm_count(a.device):
        fitting = [min(fitting, key=lambda c: (c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"], -c.num_stages))]
    return fitting
# END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Input checking
# ----------------------------------------------------------------------------------------------------

def check_matmul_inputs(a: torch.Tensor, b: torch.Tensor) -> None:
    """Raise ValueError, naming the shapes or dtypes, unless `a @ b` is something `matmul` computes.

    Accepted: two 2-D tensors a [M, K] and b [K, N] with the same dtype, one of SUPPORTED_DTYPES, on the
    same device. The device must be CUDA, or the CPU when Triton runs in its interpreter
    (TRITON_INTERPRET=1). Any strides are fine; any size, including 0, is fine.
    """
    # BEGIN SOLUTION
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"matmul: {name} must be a torch.Tensor, got {type(t).__name__}")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"matmul: expected 2-D tensors a [M, K] and b [K, N], got a with shape "
                         f"{tuple(a.shape)} and b with shape {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: inner dimensions differ: a is {tuple(a.shape)} (K={a.shape[1]}) but b is "
                         f"{tuple(b.shape)} (K={b.shape[0]})")
    if a.dtype != b.dtype:
        raise ValueError(f"matmul: a and b must have the same dtype, got a {a.dtype} and b {b.dtype}")
    if a.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise ValueError(f"matmul: dtype {a.dtype} is not supported (use one of {names})")
    if a.device != b.device:
        raise ValueError(f"matmul: a is on {a.device} but b is on {b.device}; put both on one device")
    if a.device.type != "cuda" and not INTERPRETING:
        raise ValueError(f"matmul: tensors are on {a.device}; Triton kernels need CUDA tensors "
                         "(or TRITON_INTERPRET=1 to run them on the CPU)")
    # END SOLUTION


# BEGIN SOLUTION
# ----------------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------------

@triton.autotune(
    configs=INTERPRETER_CONFIGS if INTERPRETING else HOPPER_CONFIGS,
    key=["M", "N", "K"],   # Triton adds the argument dtypes to the key
    prune_configs_by={"early_config_prune": keep_configs_for_problem},
)
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """One program computes one BLOCK_M x BLOCK_N tile of C = A @ B, accumulating in fp32.

    Launched on a 1-D grid of cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs. Element (i, j) of A is at
    a_ptr + i * stride_am + j * stride_ak (likewise B and C), so transposed and sliced views work as
    they are, without copies.

    Steps:
    1. Grouped program order (for L2 reuse). Program ids are handed to SMs roughly in order. In plain
       row-major order, the programs running at the same time share one row of A tiles but need a whole
       row of different B tiles. Instead, walk the tiles in groups of GROUP_M tile-rows, column by
       column inside a group: programs running together then share both A rows and B columns, and
       those tiles are re-read from L2 instead of HBM. The last group may have fewer than GROUP_M rows.
    2. Offsets of this tile's rows, columns and K-slice; masks `rows_in_bounds`, `cols_in_bounds`
       for the edge tiles.
    3. Loop over K in steps of BLOCK_K: load the A and B tiles (masked: the K tail and the rows/columns
       past the edge read 0), and accumulate `tl.dot` into an fp32 accumulator. INPUT_PRECISION is
       "ieee" for fp32 inputs (no silent TF32 rounding of the inputs).
    4. Convert the accumulator to C's dtype once, at the end, and store it with the edge mask.
    """
    # 1. Grouped order: program `pid` -> tile (pid_m, pid_n).
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    programs_per_group = GROUP_M * num_pid_n
    group_id = pid // programs_per_group
    first_pid_m = group_id * GROUP_M
    group_rows = min(num_pid_m - first_pid_m, GROUP_M)  # the last group can be shorter
    pid_in_group = pid % programs_per_group
    pid_m = first_pid_m + pid_in_group % group_rows
    pid_n = pid_in_group // group_rows

    # 2. This tile's rows of A and C, columns of B and C, and the first K-slice.
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows_in_bounds = offs_m < M
    cols_in_bounds = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    # 3. Slide along K; the running sum stays in fp32 registers for the whole loop.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        k_in_bounds = offs_k < K - k_start  # false only in the last, partial K-slice
        a_tile = tl.load(a_ptrs, mask=rows_in_bounds[:, None] & k_in_bounds[None, :], other=0.0)
        b_tile = tl.load(b_ptrs, mask=k_in_bounds[:, None] & cols_in_bounds[None, :], other=0.0)
        acc = tl.dot(a_tile, b_tile, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # 4. Round once to the output dtype and write only the part of the tile inside C.
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=rows_in_bounds[:, None] & cols_in_bounds[None, :])
# END SOLUTION


# ----------------------------------------------------------------------------------------------------
# The wrapper
# ----------------------------------------------------------------------------------------------------

def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b for a [M, K] and b [K, N], computed by your Triton kernel; the result is [M, N] in a's dtype.

    - Inputs are checked with `check_matmul_inputs` (ValueError on bad input).
    - Any strides: transposed and sliced views work as they are, without copying to contiguous.
    - Empty problems launch nothing: M == 0 or N == 0 gives an empty [M, N] tensor, and K == 0 gives
      zeros (a sum over nothing).
    - Precision: fp32 inputs are multiplied exactly in fp32 (no TF32 rounding of the inputs); bf16 and
      fp16 inputs accumulate in fp32 and are rounded to the output dtype once, at the end.
    - No torch matmul ops inside (torch.matmul, mm, bmm, einsum, ...): the product runs in Triton.
    - On a GPU it is graded on speed against cuBLAS (torch.matmul) on the same shapes (see the write-up).
    """
    # BEGIN SOLUTION
    # Why autotune per (M, N, K) instead of one fixed tile: wave quantization. On the lecture's A100
    # (108 SMs) with 256 x 128 tiles, a 1792 x 1792 output is 7 x 14 = 98 tiles, one wave; 1793 x 1793 is
    # 8 x 15 = 120 tiles, two waves, the second with 12 tiles: 0.2% more work, nearly twice the time. On
    # the H200's 132 SMs both fit in one wave of 128 x 256 tiles (98 and 120), while 128 x 128 tiles make
    # 196 and 225 tiles (two waves, 74% and 85% full) and 128 x 64 tiles 392 (three waves, 99% full) and
    # 435 (four waves, 82% full). Which is fastest depends on the size, so the autotuner times the
    # candidates once per new shape and dtype and remembers the winner.
    #
    # Measured on an H200 (bf16, this kernel vs cuBLAS): 4096^3 667 vs 691 TFLOP/s, 8192^3 659 vs 681;
    # 1792^3 342 vs 466 (the autotuner picks 128 x 256 tiles: 98 tiles keep 74% of the 132 SMs busy,
    # and 342/466 = 0.73); 1793^3 only 67 vs 102. That last drop is not waves but alignment: a row of
    # 1793 bf16 values is 3586 bytes, not a multiple of 16, so neither kernel can use 16-byte vector
    # loads (the lecture's point that sizes divisible only by 1 or 2 run badly; pad to a multiple of 64).
    check_matmul_inputs(a, b)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_kernel[grid](
        a, b, c,
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
        INPUT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",
    )
    return c
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Analytic companions (pure Python): the lecture's intensity and tile-size arithmetic
# ----------------------------------------------------------------------------------------------------

def _positive_int(name: str, value) -> int:
    """Check that `value` is a whole number > 0 (given: call it first in the functions below)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def naive_matmul_ai(bytes_per_elem: int) -> float:
    """Arithmetic intensity (FLOP/byte) of the naive matmul: one thread per C[i, j].

    It does 2K FLOPs (K multiply-adds) and reads 2K elements (a row of A, a column of B) from HBM:
    2K / (2K * bytes_per_elem). Example: 0.5 in bf16/fp16.
    """
    # BEGIN SOLUTION
    _positive_int("bytes_per_elem", bytes_per_elem)
    return 1.0 / bytes_per_elem
    # END SOLUTION


def tiled_matmul_ai(tile: int, bytes_per_elem: int) -> float:
    """Arithmetic intensity (FLOP/byte) of a matmul tiled in T x T tiles: T / bytes_per_elem.

    Each K-step loads a T x T tile of A and one of B (2T^2 elements) and does 2T^3 FLOPs with them.
    Examples: 16 for T = 32 in bf16; 34.75 for T = 139 in fp32.
    """
    # BEGIN SOLUTION
    _positive_int("tile", tile)
    _positive_int("bytes_per_elem", bytes_per_elem)
    return tile / bytes_per_elem
    # END SOLUTION


def max_square_tile(sram_bytes: int, bytes_per_elem: int, n_tiles: int = 3) -> int:
    """Largest T such that n_tiles T x T tiles (A, B and C) fit in `sram_bytes` of on-chip memory.

    T = floor(sqrt(sram_bytes / (n_tiles * bytes_per_elem))). Example: the H100's 228 KiB per SM gives
    197 in bf16 and 139 in fp32.
    """
    # BEGIN SOLUTION
    _positive_int("sram_bytes", sram_bytes)
    _positive_int("bytes_per_elem", bytes_per_elem)
    _positive_int("n_tiles", n_tiles)
    return math.isqrt(sram_bytes // (n_tiles * bytes_per_elem))
    # END SOLUTION


def global_reads_per_input_element(n: int, tile: int) -> int:
    """How many times each element of A (or B) is read from HBM in an n x n x n matmul with T x T tiles.

    An element of A is needed by every output tile in its tile-row: ceil(n / T) of them (n without
    tiling, T = 1; once if T = n). Example: 4096 -> 32 with T = 128.
    """
    # BEGIN SOLUTION
    _positive_int("n", n)
    _positive_int("tile", tile)
    return -(-n // tile)
    # END SOLUTION


def tiled_matmul_hbm_elements(n: int, tile: int) -> int:
    """Elements moved between HBM and the SMs by an n x n x n matmul with T x T tiles (no cache reuse).

    Reads: A and B (n^2 elements each) are each read ceil(n / T) times; writes: C once (n^2). When T
    divides n this is the lecture's 2n^3 / T + n^2. Example: n = 256, T = 32 -> 1,114,112.
    """
    # BEGIN SOLUTION
    reads_per_element = global_reads_per_input_element(n, tile)
    return 2 * n * n * reads_per_element + n * n
    # END SOLUTION
