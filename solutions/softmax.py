"""Online softmax: softmax built from mergeable running statistics (the lecture's FlashAttention part).

A row's softmax needs its maximum m and its normaliser l = sum_j exp(x_j - m). Both can be built one
block of the row at a time, keeping a small running state per row, even though a later block may raise
the maximum that the earlier terms were computed against: working out how the state stays exact is the
heart of this problem (the lecture's worked example on scores [0, ln2, ln3] walks through it). This is
the statistic FlashAttention carries across key blocks.

Three entry points, all following the same conventions:

* ``online_softmax_update(m, l, acc, scores, values)``: fold one block into the running state.
* ``online_softmax(x, block_size)``: softmax over the last dim in PyTorch, block by block.
* ``softmax_triton(x)``: a Triton row softmax for rows of any length.

Conventions (the same in every function):

* The initial state is m = -inf, l = 0, acc = 0 (``online_softmax_init`` builds it).
* A block whose scores are all -inf (fully masked) leaves the state unchanged and never produces NaN.
* A row whose scores are all -inf has softmax all zeros (not NaN), acc/l = 0 and lse = -inf.
* Math is done in float32 (float64 inputs stay float64); outputs have the input dtype.
* NaN in the input propagates to that row's output.
* Scores may be large (1000 and more): nothing may overflow, in fp32 or fp16 inputs.

Imports: only torch, triton, numpy, einops and Python's standard library (and the other assignment
modules); anything else is refused, as when graded (the write-up, "Handing in", says how).
"""

import torch

try:
    import triton
    import triton.language as tl

    TRITON_AVAILABLE = True
except ImportError:  # no Triton (e.g. macOS): the PyTorch-only functions below still work
    from types import SimpleNamespace

    triton = SimpleNamespace(jit=lambda fn: fn)
    tl = SimpleNamespace(constexpr=None)
    TRITON_AVAILABLE = False

NEG_INF = float("-inf")
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# BEGIN SOLUTION
# Launch settings, chosen from a sweep on an H200 (scripts/measure/reference_softmax.py --sweep, 256 MB tensors).
# Rows whose padded length is at most this many columns are done in one pass, the whole row in
# registers; longer rows use the two-pass online kernel.
ONE_PASS_MAX_COLS = 16384
# The one-pass kernel packs several short rows into one program until its tile holds this many elements.
ONE_PASS_TILE_ELEMS = 8192
# Threads per program follow the tile's bytes: about 64 bytes of input per thread (16 fp32, 32 bf16).
ONE_PASS_BYTES_PER_THREAD = 64
# Column block of the online kernel: how much of a long row one loop iteration reads.
ONLINE_BLOCK_COLS = 8192
ONLINE_NUM_WARPS = 8
# END SOLUTION


# --------------------------------------------------------------------------------------------------
# PyTorch: the running state and its update
# --------------------------------------------------------------------------------------------------


def online_softmax_init(rows_shape, d_values=None, *, device=None, dtype=torch.float32):
    """The empty state: m = -inf, l = 0, acc = 0.

    ``rows_shape`` is the shape of the leading (per-row) dims; acc gets a trailing dim of size
    ``d_values`` (or is a scalar zero when ``d_values`` is None, i.e. no values are tracked).
    """
    rows_shape = tuple(rows_shape)
    m = torch.full(rows_shape, NEG_INF, device=device, dtype=dtype)
    l = torch.zeros(rows_shape, device=device, dtype=dtype)
    acc_shape = rows_shape if d_values is None else rows_shape + (d_values,)
    acc = torch.zeros(acc_shape, device=device, dtype=dtype)
    return m, l, acc


# BEGIN SOLUTION
def _safe_base(m):
    """The exponent base to use for running max m: m itself, or 0 where m is still -inf (nothing seen)."""
    return torch.where(m == NEG_INF, torch.zeros_like(m), m)


def _check_update_shapes(m, l, acc, scores, values):
    rows_shape = scores.shape[:-1]
    if scores.dim() < 1:
        raise ValueError(f"scores must have a block dim [..., b]; got shape {tuple(scores.shape)}")
    if m.shape != rows_shape or l.shape != rows_shape:
        raise ValueError(
            f"m and l must have the scores' row shape {tuple(rows_shape)}; got m {tuple(m.shape)}, "
            f"l {tuple(l.shape)} for scores {tuple(scores.shape)}"
        )
    if values is not None and (values.dim() != scores.dim() + 1 or values.shape[:-1] != scores.shape):
        raise ValueError(
            f"values must have shape [..., b, d] matching scores [..., b]; got values "
            f"{tuple(values.shape)} for scores {tuple(scores.shape)}"
        )
# END SOLUTION


def online_softmax_update(m, l, acc, scores, values=None):
    """Fold one block of scores (and optionally values) into the running softmax state.

    Args:
        m: running max, shape [...] (the scores' row shape); -inf before any score is seen.
        l: running normaliser sum_j exp(s_j - m), shape [...]; 0 initially.
        acc: running weighted sum sum_j exp(s_j - m) * v_j, shape [..., d]; 0 initially.
        scores: this block's scores, shape [..., b].
        values: this block's values, shape [..., b, d], or None.

    Returns:
        (m, l, acc) after the block, with the meanings above for all scores seen so far (this block
        included), whatever order the blocks come in. With ``values=None`` acc is returned unchanged
        (only the statistics m and l are tracked).

    A fully masked block (all -inf) leaves the state unchanged and produces no NaN. Raises ValueError
    when the shapes of m, l, scores and values do not fit together.
    """
    # BEGIN SOLUTION
    _check_update_shapes(m, l, acc, scores, values)
    new_max = torch.maximum(m, scores.amax(dim=-1))
    base = _safe_base(new_max)
    # old terms were taken against m; rebase them onto the new maximum (exp(-inf) = 0 for an empty state)
    rescale = torch.exp(m - base)
    weights = torch.exp(scores - base.unsqueeze(-1))
    new_l = l * rescale + weights.sum(dim=-1)
    if values is None:
        return new_max, new_l, acc
    new_acc = acc * rescale.unsqueeze(-1) + (weights.unsqueeze(-1) * values).sum(dim=-2)
    return new_max, new_l, new_acc
    # END SOLUTION


def online_softmax_finalize(m, l, acc):
    """Turn a final state into (output, lse): the softmax-weighted sum of the values seen, and
    lse = log(sum_j exp(s_j)) over every score seen (the natural-log log-sum-exp, in the state's dtype).

    A row that saw only -inf (l = 0) gives output 0 and lse = -inf, never NaN.
    """
    # BEGIN SOLUTION
    seen = l > 0
    safe_l = torch.where(seen, l, torch.ones_like(l))
    out = acc / safe_l.reshape(safe_l.shape + (1,) * (acc.dim() - l.dim()))
    lse = torch.where(seen, m + torch.log(safe_l), torch.full_like(m, NEG_INF))
    return out, lse
    # END SOLUTION


# BEGIN SOLUTION
def _math_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32
# END SOLUTION


def online_softmax(x, block_size):
    """Softmax over the last dim of x, reading the row ``block_size`` columns at a time (PyTorch only),
    as a kernel whose row does not fit on chip must: never a max or a sum over the whole row at once.

    A row of all -inf gives all zeros. Math in float32 (float64 stays float64); output dtype = x.dtype.
    Raises ValueError for a block_size that is not a positive int or a non-floating x.
    """
    # BEGIN SOLUTION
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int; got {block_size!r}")
    if x.dim() < 1 or not x.is_floating_point():
        raise ValueError(f"x must be a floating tensor with at least one dim; got {x.dtype} {tuple(x.shape)}")
    xf = x.to(_math_dtype(x.dtype))
    n_cols = xf.shape[-1]
    m, l, acc = online_softmax_init(xf.shape[:-1], device=x.device, dtype=xf.dtype)
    for start in range(0, n_cols, block_size):  # pass 1: statistics
        m, l, acc = online_softmax_update(m, l, acc, xf[..., start : start + block_size])
    base = _safe_base(m).unsqueeze(-1)
    inv_l = (1.0 / torch.where(l > 0, l, torch.ones_like(l))).unsqueeze(-1)
    out = torch.empty_like(xf)
    for start in range(0, n_cols, block_size):  # pass 2: normalise
        block = xf[..., start : start + block_size]
        out[..., start : start + block_size] = torch.exp(block - base) * inv_l
    return out.to(x.dtype)
    # END SOLUTION


# --------------------------------------------------------------------------------------------------
# Triton: row softmax for rows of any length
# --------------------------------------------------------------------------------------------------


# BEGIN SOLUTION
@triton.jit
def _softmax_one_pass_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                             BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """BLOCK_ROWS whole rows per program: one read, max, exp, sum, scale, one write."""
    rows = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_COLS)
    in_bounds = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    # padding reads -inf so it adds exp(-inf) = 0 to the sum and never wins the max
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=in_bounds, other=float("-inf"))
    x = x.to(tl.float32)
    row_max = tl.max(x, axis=1)
    base = tl.where(row_max == float("-inf"), 0.0, row_max)  # an all -inf row: avoid -inf - (-inf)
    weights = tl.exp(x - base[:, None])
    row_sum = tl.sum(weights, axis=1)
    inv_sum = 1.0 / tl.where(row_sum > 0, row_sum, 1.0)  # an all -inf row has weights 0: output 0
    y = weights * inv_sum[:, None]
    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=in_bounds)


@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_COLS: tl.constexpr):
    """One row per program, BLOCK_COLS columns at a time: pass 1 builds (m, l), pass 2 normalises."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_COLS)
    running_max = tl.full((), float("-inf"), tl.float32)
    running_sum = tl.full((), 0.0, tl.float32)
    # pass 1: statistics; keep x in L2 for pass 2
    for start in range(0, n_cols, BLOCK_COLS):
        in_row = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=in_row, other=float("-inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        base = tl.where(new_max == float("-inf"), 0.0, new_max)  # fully masked so far: avoid -inf - (-inf)
        # rescale the old sum from the old maximum to the new one, then add this block's terms
        running_sum = running_sum * tl.exp(running_max - base) + tl.sum(tl.exp(x - base), axis=0)
        running_max = new_max
    base = tl.where(running_max == float("-inf"), 0.0, running_max)
    inv_sum = 1.0 / tl.where(running_sum > 0, running_sum, 1.0)
    # pass 2: normalise, walking back from the row's end: the blocks read last are likeliest still in L2
    last_start = ((n_cols - 1) // BLOCK_COLS) * BLOCK_COLS
    for offset in range(0, n_cols, BLOCK_COLS):
        start = last_start - offset
        in_row = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=in_row, other=float("-inf"), eviction_policy="evict_first")
        y = tl.exp(x.to(tl.float32) - base) * inv_sum
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def _next_power_of_2(n):
    return 1 << max(0, n - 1).bit_length()


def _one_pass_launch(n_rows, n_cols, element_size):
    """(grid, BLOCK_ROWS, BLOCK_COLS, num_warps) for the one-pass kernel: ~ONE_PASS_TILE_ELEMS per program."""
    block_cols = _next_power_of_2(n_cols)
    block_rows = max(1, min(32, ONE_PASS_TILE_ELEMS // block_cols))
    tile_bytes = block_rows * block_cols * element_size
    num_warps = max(1, min(16, tile_bytes // (32 * ONE_PASS_BYTES_PER_THREAD)))
    grid = (triton.cdiv(n_rows, block_rows),)
    return grid, block_rows, block_cols, num_warps
# END SOLUTION


def softmax_triton(x):
    """Softmax over the last dim of x computed by your Triton kernel(s) (x: [..., n], any leading dims).

    Rows of any length: short ones (1, 37, ...) and rows far longer than fit on chip (the tests use
    20,000 and more). Any strides. Math in float32; the output has x's dtype and shape (float32,
    float16 or bfloat16 inputs; ValueError for other dtypes). A row of all -inf gives all zeros.
    No torch softmax/exp/sum inside: the computation must run in Triton. On a GPU it is graded on
    bandwidth, against a device-to-device copy of the same bytes (see the write-up).
    """
    if not TRITON_AVAILABLE:
        raise RuntimeError("softmax_triton needs Triton, which is not installed")
    # BEGIN SOLUTION
    if not isinstance(x, torch.Tensor) or x.dtype not in SUPPORTED_DTYPES or x.dim() < 1:
        raise ValueError(
            f"softmax_triton takes a float32/float16/bfloat16 tensor with at least one dim; "
            f"got {getattr(x, 'dtype', type(x))} {tuple(getattr(x, 'shape', ()))}"
        )
    n_cols = x.shape[-1]
    x2d = x.reshape(-1, n_cols) if n_cols > 0 else x.reshape(0, 0)
    if x2d.numel() == 0:
        return torch.empty_like(x)
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    n_rows = x2d.shape[0]
    y2d = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if _next_power_of_2(n_cols) <= ONE_PASS_MAX_COLS:
        grid, block_rows, block_cols, num_warps = _one_pass_launch(n_rows, n_cols, x.element_size())
        _softmax_one_pass_kernel[grid](x2d, y2d, n_rows, n_cols, x2d.stride(0), y2d.stride(0),
                                       BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, num_warps=num_warps)
    else:
        _softmax_online_kernel[(n_rows,)](x2d, y2d, n_cols, x2d.stride(0), y2d.stride(0),
                                          BLOCK_COLS=ONLINE_BLOCK_COLS, num_warps=ONLINE_NUM_WARPS)
    return y2d.reshape(x.shape)
    # END SOLUTION
