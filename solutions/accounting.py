"""Back-of-the-envelope accounting: memory, FLOPs, the roofline, waves, energy, the execution model,
fusion, number formats and inference.

Every number in the lecture that tells you whether a model fits, how long a run takes or which roof a
kernel hits comes from a handful of one-line formulas. This module writes them down, one function each,
so that you can check the lecture's worked examples yourself (8B in BF16 is 14.90 GiB, AdamW costs 16
bytes per parameter, the H100 ridge point is 295 FLOP/byte, 1793x1793 needs a second wave on an A100,
one warp hides 1% of a 400-cycle load, decode at batch 1 makes at most about 220 tokens/s).

Conventions (the same in every function; the tests rely on them):

- Units are SI: bytes, FLOPs (a count), seconds, FLOP/s (a rate), bytes/s. "Giga" and "tera" are
  decimal (1 TB/s = 1e12 bytes/s). Only a function whose name says GiB uses 1 GiB = 2**30 bytes.
- One multiply-add counts as 2 FLOPs, so a [m, k] @ [k, n] matmul costs 2mkn.
- Counts of things (parameters, layers, tokens, tiles) are whole numbers; `8e9` is accepted as the
  whole number 8,000,000,000. Results that are exact whole numbers are returned as `int`.
- Data types are named by strings ("fp32", "bf16", "fp16", "fp8", "int8", "int4", ...) or, if you
  have PyTorch, by torch dtypes (`torch.bfloat16`).
- Bad input (a negative size, an unknown dtype name, a zero bandwidth) raises `ValueError` naming the
  argument and what it accepts. The helpers `_whole`, `_positive`, `_nonnegative`, `dtype_bits` and
  `dtype_bytes` below do the checking for you: call them first in every function you write.

Imports: only torch, triton, numpy, einops and Python's standard library (and the other assignment
modules); anything else is refused, as when graded (the write-up, "Handing in", says how).
"""

from __future__ import annotations

import math
from fractions import Fraction

# ----------------------------------------------------------------------------------------------------
# Input checking (given: use these in your functions)
# ----------------------------------------------------------------------------------------------------

DTYPE_BITS = {
    "fp64": 64, "fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4,
}
"""Storage bits per element. TF32 is a tensor-core compute format: it is stored in 32 bits."""

_DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64",
    "float32": "fp32", "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
    "e4m3": "fp8", "e5m2": "fp8",
    "uint8": "int8",
}

OPTIMIZER_STATES = {"adamw": 2, "adam": 2, "sgd_momentum": 1, "sgd": 0}
"""Number of per-parameter state tensors each optimizer keeps (Adam: first and second moments)."""


def _dtype_name(dtype) -> str:
    """The canonical name ("bf16", ...) of a dtype given as a string or a torch dtype."""
    text = str(dtype)
    if type(dtype).__module__ == "torch" and text.startswith("torch."):
        text = text[len("torch."):]
    elif not isinstance(dtype, str):
        text = ""
    name = _DTYPE_ALIASES.get(text.lower(), text.lower())
    if name not in DTYPE_BITS:
        accepted = ", ".join(DTYPE_BITS)
        raise ValueError(f"dtype must be one of {accepted} (or a torch dtype), got {dtype!r}")
    return name


def dtype_bits(dtype, *, argument: str = "dtype") -> int:
    """Storage bits per element of `dtype`; ValueError naming `argument` if the dtype is unknown."""
    try:
        return DTYPE_BITS[_dtype_name(dtype)]
    except ValueError as error:
        raise ValueError(str(error).replace("dtype must", f"{argument} must", 1)) from None


def dtype_bytes(dtype, *, argument: str = "dtype") -> Fraction:
    """Storage bytes per element (a Fraction: int4 is 1/2 byte)."""
    return Fraction(dtype_bits(dtype, argument=argument), 8)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Fraction)) and not isinstance(value, bool)


def _whole(name: str, value, minimum: int = 0) -> int:
    """`value` as an int if it is a whole number >= minimum (8e9 is fine), else ValueError naming it."""
    if _is_number(value) and math.isfinite(value) and value == int(value) and value >= minimum:
        return int(value)
    raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")


def _nonnegative(name: str, value) -> Fraction:
    """`value` as an exact Fraction if it is a finite number >= 0, else ValueError naming it."""
    if _is_number(value) and math.isfinite(value) and value >= 0:
        return Fraction(value)
    raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _positive(name: str, value) -> Fraction:
    """`value` as an exact Fraction if it is a finite number > 0, else ValueError naming it."""
    if _is_number(value) and math.isfinite(value) and value > 0:
        return Fraction(value)
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _choice(name: str, value, accepted) -> str:
    """`value` if it is one of `accepted` (strings, case-insensitive), else ValueError listing them."""
    if isinstance(value, str) and value.lower() in accepted:
        return value.lower()
    raise ValueError(f"{name} must be one of {', '.join(accepted)}, got {value!r}")


def _exact(value: Fraction) -> int | float:
    """An exact result as an int when it is whole, else as the nearest float."""
    return int(value) if value.denominator == 1 else float(value)


# ----------------------------------------------------------------------------------------------------
# Memory
# ----------------------------------------------------------------------------------------------------

def param_bytes(n_params, dtype) -> int:
    """Bytes to store `n_params` weights in `dtype`: P x bits / 8.

    The lecture's examples: an 8B model in BF16 takes 8e9 x 16 / 8 = 16,000,000,000 bytes, a 27B model
    54e9 bytes, and the same 8B model ideally packed in 4 bits 4e9 bytes. "Ideally packed" ignores the
    quantization scales and zero points, unquantized layers and the KV cache: this is the raw weights
    only. Round up to a whole byte (an odd number of int4 values still needs the last byte).

    Trap: this is bytes, not GiB. 16e9 bytes is 16 GB but only 14.90 GiB (see `bytes_to_gib`).
    Returns an int.
    """
    # BEGIN SOLUTION
    n_params = _whole("n_params", n_params)
    return math.ceil(n_params * dtype_bytes(dtype))
    # END SOLUTION


def bytes_to_gib(n_bytes) -> float:
    """Bytes to GiB: n_bytes / 2**30.

    1 GiB = 1024**3 = 1,073,741,824 bytes, while 1 GB = 1e9 bytes. The trap of the lecture: an 8B BF16
    model is 16e9 bytes = 16 GB, which is 14.90 GiB, not 16 GiB (27B BF16: 54e9 bytes = 50.29 GiB).
    """
    # BEGIN SOLUTION
    return float(_nonnegative("n_bytes", n_bytes) / 2**30)
    # END SOLUTION


def training_bytes_breakdown(*, weight_dtype="bf16", grad_dtype="bf16", master_weights=True,
                             optimizer="adamw", optimizer_state_dtype="fp32") -> dict:
    """Bytes per parameter of training state, split into its four parts.

    Returns {"weights": ..., "gradients": ..., "master_weights": ..., "optimizer_state": ...} (ints,
    or floats for sub-byte formats). The lecture's typical mixed-precision AdamW accounting is
        2 (BF16 weights) + 2 (BF16 gradients) + 4 (FP32 master weights) + 8 (FP32 first and second
        moments) = 16 bytes per parameter.
    Each part follows from the options:
    - weights: bytes of `weight_dtype`; gradients: bytes of `grad_dtype`.
    - master_weights: an FP32 copy of the weights (4 bytes) that the optimizer updates, because a tiny
      update added to a BF16 weight rounds away (w + delta == w). It is only needed when the weights are
      stored below FP32: FP32 weights are their own master copy, so with weight_dtype="fp32" this part
      is 0 whatever `master_weights` says. With master_weights=False it is 0.
    - optimizer_state: (number of state tensors of `optimizer`) x bytes of `optimizer_state_dtype`.
      Adam and AdamW keep 2 (first and second moments), "sgd_momentum" 1, "sgd" 0.

    Trap: plain FP32 training with Adam is also 16 bytes per parameter, but split 4 + 4 + 0 + 8, not
    2 + 2 + 4 + 8. The total alone does not tell you the assumptions; state them first.
    Activations (which depend on batch and sequence length) are not included.
    """
    # BEGIN SOLUTION
    weight_bits = dtype_bits(weight_dtype, argument="weight_dtype")
    grad_bytes = dtype_bytes(grad_dtype, argument="grad_dtype")
    n_states = OPTIMIZER_STATES[_choice("optimizer", optimizer, OPTIMIZER_STATES)]
    state_bytes = dtype_bytes(optimizer_state_dtype, argument="optimizer_state_dtype")
    needs_master_copy = bool(master_weights) and weight_bits < 32
    parts = {
        "weights": Fraction(weight_bits, 8),
        "gradients": grad_bytes,
        "master_weights": Fraction(4 if needs_master_copy else 0),
        "optimizer_state": n_states * state_bytes,
    }
    return {part: _exact(value) for part, value in parts.items()}
    # END SOLUTION


def training_bytes_per_param(*, weight_dtype="bf16", grad_dtype="bf16", master_weights=True,
                             optimizer="adamw", optimizer_state_dtype="fp32"):
    """Total bytes of training state per parameter: the sum of `training_bytes_breakdown`.

    Defaults give the lecture's 2 + 2 + 4 + 8 = 16. Changing one assumption changes the total: FP32
    gradients give 18, no master copy gives 12. All-FP32 training (weight_dtype="fp32",
    grad_dtype="fp32") also gives 16, from a different split (4 + 4 + 0 + 8): do not hard-code 16.
    Returns an int (a float only for sub-byte formats).
    """
    # BEGIN SOLUTION
    parts = training_bytes_breakdown(weight_dtype=weight_dtype, grad_dtype=grad_dtype,
                                     master_weights=master_weights, optimizer=optimizer,
                                     optimizer_state_dtype=optimizer_state_dtype)
    return _exact(sum(Fraction(value) for value in parts.values()))
    # END SOLUTION


def training_memory_bytes(n_params, **options) -> int:
    """Bytes of training state for `n_params` parameters: n_params x training_bytes_per_param(**options).

    `options` are those of `training_bytes_per_param` (weight_dtype, grad_dtype, master_weights,
    optimizer, optimizer_state_dtype). An 8B model with the default mixed-precision AdamW needs
    8e9 x 16 = 128e9 bytes before a single activation is stored; having memory for the weights alone
    (16e9 bytes) is far from being able to train. Activations are not included. Returns an int.
    """
    # BEGIN SOLUTION
    n_params = _whole("n_params", n_params)
    per_param = Fraction(training_bytes_per_param(**options))
    return math.ceil(n_params * per_param)
    # END SOLUTION


def max_trainable_params(memory_bytes, bytes_per_param=16) -> int:
    """The most parameters whose training state fits in `memory_bytes`: floor(memory / bytes_per_param).

    The lecture: one 80 GB card at 16 bytes per parameter holds at most 80e9 / 16 = 5.0e9 parameters
    (a static bound: activations, workspace and fragmentation make the real number smaller). Note 80 GB
    (decimal) is not 80 GiB: 80 * 2**30 / 16 = 5,368,709,120. Returns an int (rounded down: a model
    that does not fit is no use).
    """
    # BEGIN SOLUTION
    memory = _nonnegative("memory_bytes", memory_bytes)
    per_param = _positive("bytes_per_param", bytes_per_param)
    return math.floor(memory / per_param)
    # END SOLUTION


def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2) -> int:
    """Bytes of the KV cache: 2 x n_layers x n_kv_heads x head_dim x seq_len x batch x bytes_per_elem.

    The leading 2 is for keys AND values, both cached for every layer and token. With grouped-query
    attention only the KV heads are cached (`n_kv_heads`, e.g. 8 for Llama-3 8B), not the 32 query
    heads. The lecture's Llama-3 8B numbers (32 layers, 8 KV heads, head_dim 128, BF16):
    2 x 32 x 8 x 128 x 2 = 131,072 bytes = 128 KiB per token, so batch 256 at context 2048 needs
    64 GiB of KV cache on top of 15 GiB of weights: it does not fit in 80 GB.
    `bytes_per_elem` may be fractional (0.5 for a 4-bit cache). Returns an int.
    """
    # BEGIN SOLUTION
    sizes = [_whole(name, value) for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads),
                                                     ("head_dim", head_dim), ("seq_len", seq_len),
                                                     ("batch", batch))]
    per_elem = _positive("bytes_per_elem", bytes_per_elem)
    return math.ceil(2 * math.prod(sizes) * per_elem)
    # END SOLUTION


def attention_matrix_bytes(n_q, n_k, heads=1, batch=1, bytes_per_elem=2) -> int:
    """Bytes of one materialized attention score matrix S (or P): batch x heads x n_q x n_k x bytes.

    Naive attention writes S = QK^T / sqrt(d) to HBM and reads it back. The lecture: one head at
    N = 4096 in BF16 is 4096**2 x 2 = 33,554,432 bytes (32 MiB, which the notes call "32 MB"); with
    batch x heads = 32 that is 1 GiB, for every layer. FlashAttention never stores it. Returns an int.
    """
    # BEGIN SOLUTION
    sizes = [_whole(name, value) for name, value in (("n_q", n_q), ("n_k", n_k), ("heads", heads),
                                                     ("batch", batch))]
    per_elem = _positive("bytes_per_elem", bytes_per_elem)
    return math.ceil(math.prod(sizes) * per_elem)
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# FLOPs
# ----------------------------------------------------------------------------------------------------

MATMUL_CONVENTIONS = ("2mkn", "exact", "fma")


def matmul_flops(m, k, n, convention="2mkn") -> int:
    """FLOPs of [m, k] @ [k, n] -> [m, n].

    Each of the m x n outputs takes k multiplies and k - 1 adds. The lecture's convention (the default,
    "2mkn") counts a multiply-add as 2 FLOPs: 2mkn. Two other conventions exist, so say which you use:
    "exact" counts the adds exactly, m x n x (2k - 1); "fma" counts one fused multiply-add as 1, mkn.
    For m = k = n = 2: 16 ("2mkn"), 12 ("exact"), 8 ("fma"). An 8192^3 matmul is 2 x 8192^3 =
    1,099,511,627,776 FLOPs (about 1.1e12). Returns an int.
    """
    # BEGIN SOLUTION
    m, k, n = _whole("m", m), _whole("k", k), _whole("n", n)
    convention = _choice("convention", convention, MATMUL_CONVENTIONS)
    if convention == "exact":
        return m * n * max(2 * k - 1, 0)
    return (2 if convention == "2mkn" else 1) * m * k * n
    # END SOLUTION


def ffn_flops_per_token(d_model, d_ff, swiglu=False) -> int:
    """Forward FLOPs of one token through a feed-forward block without biases.

    A plain FFN is two matmuls, D -> F -> D: 2DF + 2DF = 4DF. SwiGLU has three weight matrices (gate,
    up, down): 6DF. The activation function itself is ignored. Example: D = 2, F = 8 gives 64 (96 with
    SwiGLU). Returns an int.
    """
    # BEGIN SOLUTION
    d_model, d_ff = _whole("d_model", d_model), _whole("d_ff", d_ff)
    n_matrices = 3 if swiglu else 2
    return 2 * n_matrices * d_model * d_ff
    # END SOLUTION


def attention_flops(batch, heads, n_q, n_k, head_dim, causal=False, backward=False) -> int:
    """FLOPs of the two attention matmuls, S = Q K^T and O = P V (projections not included).

    Forward: each matmul is 2 x n_q x n_k x head_dim per head, so 4 x batch x heads x n_q x n_k x
    head_dim in all; with D = heads x head_dim and T = n_q = n_k this is the lecture's 4BT^2D. Llama-3 8B
    at T = 2048 (32 heads of 128): 68,719,476,736 per layer, 2.2e12 over its 32 layers.
    causal=True: the convention is exactly half, assuming the kernel skips the masked upper triangle
    (the lecture: causality "roughly halves" this term, if the implementation really skips it).
    backward=True: the FLOPs of the backward pass alone, 2.5 x the forward, because it does five
    matmuls of the same size instead of two (recompute S = QK^T, then dV = P^T dO, dP = dO V^T,
    dQ = dS K, dK = dS^T Q). This is the convention FlashAttention-2 uses to report throughput.
    The softmax's exponentials are not counted. Returns an int.
    """
    # BEGIN SOLUTION
    sizes = [_whole(name, value) for name, value in (("batch", batch), ("heads", heads), ("n_q", n_q),
                                                     ("n_k", n_k), ("head_dim", head_dim))]
    flops = 4 * Fraction(math.prod(sizes))
    if backward:
        flops *= Fraction(5, 2)
    if causal:
        flops /= 2
    return math.ceil(flops)
    # END SOLUTION


def training_flops(n_params, n_tokens):
    """Training compute C = 6 N D: 6 x n_params x n_tokens FLOPs.

    The forward pass costs 2 FLOPs per parameter per token (one multiply-add); the backward pass about
    4 (gradients with respect to the activations and to the weights, 2 each). It ignores the attention
    T^2 term, embeddings, recomputation and communication, so it is an estimate, not an identity.
    N is the parameter count you pass in: this function does not subtract embeddings. (The lecture
    notes disagree: one set counts "non-embedding dense parameters", the Llama-3 worked example uses
    the total 8.03e9.) For an MoE pass the active parameters. Llama-3 8B on 15T tokens:
    6 x 8.03e9 x 15e12 = 7.227e23 FLOPs. Returns an int for whole inputs.
    """
    # BEGIN SOLUTION
    n_params = _nonnegative("n_params", n_params)
    n_tokens = _nonnegative("n_tokens", n_tokens)
    return _exact(6 * n_params * n_tokens)
    # END SOLUTION


def mfu(model_flops, n_gpus, peak_flops_per_gpu, seconds) -> float:
    """Model FLOPs utilization: useful FLOPs / (n_gpus x peak FLOP/s per GPU x seconds).

    A fraction in [0, 1] for real runs (large training runs reach 0.3 to 0.5). `model_flops` are the
    FLOPs the model needs (e.g. 6ND), not what the hardware executed (recomputation does not count).
    The lecture's exercise: 7.23e23 FLOPs on 2048 H100s (989e12 FLOP/s BF16 dense) in 30 days is an
    MFU of 0.1377.
    """
    # BEGIN SOLUTION
    flops = _nonnegative("model_flops", model_flops)
    n_gpus = _whole("n_gpus", n_gpus, minimum=1)
    peak = _positive("peak_flops_per_gpu", peak_flops_per_gpu)
    seconds = _positive("seconds", seconds)
    return float(flops / (n_gpus * peak * seconds))
    # END SOLUTION


def training_days(model_flops, n_gpus, peak_flops_per_gpu, mfu) -> float:
    """Wall-clock days to do `model_flops` on `n_gpus` at a given MFU: C / (n x peak x MFU) / 86400.

    The lecture: 7.23e23 FLOPs on 2048 H100s at 40% MFU takes 10.33 days; on 1000 H100s, about three
    weeks (21.1 days).
    """
    # BEGIN SOLUTION
    flops = _nonnegative("model_flops", model_flops)
    n_gpus = _whole("n_gpus", n_gpus, minimum=1)
    peak = _positive("peak_flops_per_gpu", peak_flops_per_gpu)
    utilization = _positive("mfu", mfu)
    if utilization > 1:
        raise ValueError(f"mfu must be a fraction in (0, 1], got {mfu!r}")
    return float(flops / (n_gpus * peak * utilization) / 86400)
    # END SOLUTION


def gpu_hours(model_flops, peak_flops_per_gpu, mfu) -> float:
    """GPU-hours to do `model_flops` at a given MFU: C / (peak x MFU) / 3600.

    The lecture: Llama-3 8B on 15T tokens (7.227e23 FLOPs) at 40% MFU on H100s is about 507,000
    H100-hours ("about 500k").
    """
    # BEGIN SOLUTION
    return training_days(model_flops, 1, peak_flops_per_gpu, mfu) * 24
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Energy
# ----------------------------------------------------------------------------------------------------

def energy_kwh(total_flops, effective_flops_per_s, avg_power_watts, pue=1.0) -> float:
    """Energy in kWh: time = C / R, energy = time x W x PUE, and 1 kWh = 3.6e6 J.

    The lecture: C = 1e18 FLOPs at an effective R = 100e12 FLOP/s takes 10,000 s = 2.7778 h; at an
    average 1 kW that is 2.7778 kWh, and a data-center PUE of 1.2 makes it 3.3333 kWh.
    Trap: R must be the throughput you actually achieve, not the advertised peak (at 50% of 100e12 the
    same job takes twice as long and twice the energy). W must say what it covers (one GPU or the whole
    machine). PUE (power usage effectiveness) is >= 1 by definition.
    """
    # BEGIN SOLUTION
    flops = _nonnegative("total_flops", total_flops)
    rate = _positive("effective_flops_per_s", effective_flops_per_s)
    watts = _nonnegative("avg_power_watts", avg_power_watts)
    overhead = _positive("pue", pue)
    if overhead < 1:
        raise ValueError(f"pue must be a number >= 1 (facility power / IT power), got {pue!r}")
    joules = flops / rate * watts * overhead
    return float(joules / 3_600_000)
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Arithmetic intensity and the roofline
# ----------------------------------------------------------------------------------------------------

def arithmetic_intensity(flops, bytes_moved) -> float:
    """Arithmetic intensity I = FLOPs / bytes moved, in FLOP/byte (at a stated memory level, e.g. HBM).

    Examples from the lecture: an 8192^2 BF16 elementwise add does 8192^2 FLOPs and moves 3 x 8192^2 x 2
    bytes: I = 1/6. ReLU in FP32 reads 4 bytes and writes 4 bytes per element for 1 operation:
    I = 1/8 = 0.125 (FP16: 0.25).
    Trap: the slide says ReLU is "8 FLOP/byte"; that is bytes per FLOP, the inverse. Intensity is
    operations on top, bytes below, and elementwise ops sit far below 1.
    """
    # BEGIN SOLUTION
    flops = _nonnegative("flops", flops)
    moved = _positive("bytes_moved", bytes_moved)
    return float(flops / moved)
    # END SOLUTION


def matmul_intensity(m, k, n, bytes_per_elem=2) -> float:
    """Intensity of [m, k] @ [k, n] if A and B are read once and C written once:
    2mkn / ((mk + kn + mn) x bytes_per_elem).

    Square N x N in BF16: 2N^3 / (3N^2 x 2) = N / 3, so 8192^3 gives 2730.67 FLOP/byte (about 16,000
    times the elementwise add on the same bytes). The prefill Q projection ([2048, 4096] @ [4096, 4096],
    BF16) gives 1024. This is the best case: a kernel that rereads its inputs moves more bytes.
    """
    # BEGIN SOLUTION
    m, k, n = _whole("m", m, minimum=1), _whole("k", k, minimum=1), _whole("n", n, minimum=1)
    per_elem = _positive("bytes_per_elem", bytes_per_elem)
    return float(Fraction(2 * m * k * n) / ((m * k + k * n + m * n) * per_elem))
    # END SOLUTION


def ridge_point(peak_flops, bandwidth) -> float:
    """The roofline's ridge point AI* = peak FLOP/s / bandwidth bytes/s, in FLOP/byte.

    Below it a kernel is memory-bound, above it compute-bound. H100 BF16: 989e12 / 3.35e12 = 295.2;
    A100 BF16: 312e12 / 2.039e12 = 153.0; A100 FP32 (no tensor cores): 19.5e12 / 2.039e12 = 9.56.
    """
    # BEGIN SOLUTION
    peak = _positive("peak_flops", peak_flops)
    bandwidth = _positive("bandwidth", bandwidth)
    return float(peak / bandwidth)
    # END SOLUTION


def attainable_flops(intensity, peak_flops, bandwidth) -> float:
    """The roofline: attainable FLOP/s P = min(peak, bandwidth x intensity).

    Toy hardware from the lecture, 100e12 FLOP/s and 1e12 bytes/s: the ridge is at 100 FLOP/byte, and a
    kernel of intensity 10 can reach at most 1e13 FLOP/s (10 TFLOP/s), a tenth of the peak. It is an
    upper bound; real kernels reach less.
    """
    # BEGIN SOLUTION
    intensity = _nonnegative("intensity", intensity)
    peak = _positive("peak_flops", peak_flops)
    bandwidth = _positive("bandwidth", bandwidth)
    return float(min(peak, bandwidth * intensity))
    # END SOLUTION


def roofline_time(flops, bytes_moved, peak_flops, bandwidth) -> float:
    """Lower bound on a kernel's time, in seconds: max(flops / peak, bytes / bandwidth).

    Compute and memory traffic overlap, so the slower of the two sets the time. The lecture's FP32 4096^3
    matmul on an A100's FP32 units (19.5e12 FLOP/s, 2.039e12 bytes/s): 7.05 ms, compute-bound; the same
    in BF16 on tensor cores (312e12) takes 0.44 ms. RMSNorm over 5.37e8 BF16 elements on an H100 (read 2
    bytes, write 2 bytes each) is memory-bound: 0.641 ms.
    """
    # BEGIN SOLUTION
    flops = _nonnegative("flops", flops)
    moved = _nonnegative("bytes_moved", bytes_moved)
    peak = _positive("peak_flops", peak_flops)
    bandwidth = _positive("bandwidth", bandwidth)
    return float(max(flops / peak, moved / bandwidth))
    # END SOLUTION


def roofline_bound(intensity, peak_flops, bandwidth) -> str:
    """Which roof limits a kernel: "memory" if intensity < ridge point, else "compute".

    ReLU (0.125 FLOP/byte) on an H100 (ridge 295) is "memory"; an 8192^3 BF16 matmul (2731) is
    "compute". A kernel exactly at the ridge reaches the peak, so it counts as "compute".
    """
    # BEGIN SOLUTION
    intensity = _nonnegative("intensity", intensity)
    ridge = _positive("peak_flops", peak_flops) / _positive("bandwidth", bandwidth)
    return "memory" if intensity < ridge else "compute"
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Tiles and waves
# ----------------------------------------------------------------------------------------------------

def num_tiles(m, n, tile_m, tile_n) -> int:
    """Output tiles of an m x n result cut into tile_m x tile_n blocks: ceil(m / tile_m) x ceil(n / tile_n).

    Boundary tiles count as whole tiles even when mostly masked off. The lecture (tile 256 x 128):
    1792^2 needs 7 x 14 = 98 tiles; 1793^2 needs 8 x 15 = 120, a whole extra row and column of tiles
    for one extra element. 256^2 in 128^2 tiles is 4 tiles; 257^2 is 9.
    """
    # BEGIN SOLUTION
    m, n = _whole("m", m), _whole("n", n)
    tile_m, tile_n = _whole("tile_m", tile_m, minimum=1), _whole("tile_n", tile_n, minimum=1)
    return -(-m // tile_m) * -(-n // tile_n)
    # END SOLUTION


def num_waves(n_tiles, n_sms, tiles_per_sm=1) -> int:
    """Waves needed to run `n_tiles` when each of `n_sms` SMs holds `tiles_per_sm` tiles at once:
    ceil(n_tiles / (n_sms x tiles_per_sm)).

    A partly filled wave takes as long as a full one. The lecture (A100, 108 SMs, 1 tile per SM): 98
    tiles fit in 1 wave, 120 tiles need 2, and the second runs only 12 tiles. Trap: 120 / 108 = 1.11
    is not "1.11 waves of time"; round up.
    """
    # BEGIN SOLUTION
    n_tiles = _whole("n_tiles", n_tiles)
    slots = _whole("n_sms", n_sms, minimum=1) * _whole("tiles_per_sm", tiles_per_sm, minimum=1)
    return -(-n_tiles // slots)
    # END SOLUTION


def last_wave_tiles(n_tiles, n_sms, tiles_per_sm=1) -> int:
    """Tiles running in the last wave (a full wave's worth when it divides evenly; 0 for no tiles).

    120 tiles on 108 SMs: the last wave runs 12 tiles while 96 SMs sit idle.
    """
    # BEGIN SOLUTION
    n_tiles = _whole("n_tiles", n_tiles)
    slots = _whole("n_sms", n_sms, minimum=1) * _whole("tiles_per_sm", tiles_per_sm, minimum=1)
    return n_tiles - (num_waves(n_tiles, n_sms, tiles_per_sm) - 1) * slots if n_tiles else 0
    # END SOLUTION


def wave_efficiency(n_tiles, n_sms, tiles_per_sm=1) -> float:
    """Fraction of SM slots doing useful work: n_tiles / (waves x n_sms x tiles_per_sm).

    The lecture: 98 tiles on 108 SMs is 98 / 108 = 0.907; 120 tiles needs two waves, 120 / 216 = 0.556,
    so 22% more tiles cost 100% more time. On an H100 (132 SMs) an 8192^2 output in 128^2 tiles is
    4096 tiles, 32 waves, 4096 / (32 x 132) = 0.970. Needs at least one tile.
    """
    # BEGIN SOLUTION
    n_tiles = _whole("n_tiles", n_tiles, minimum=1)
    waves = num_waves(n_tiles, n_sms, tiles_per_sm)
    return n_tiles / (waves * int(n_sms) * int(tiles_per_sm))
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# The execution model: warps, latency hiding, divergence, coalescing
# ----------------------------------------------------------------------------------------------------

def gpu_unit_counts(n_sms, fp32_cores_per_sm=128, tensor_cores_per_sm=4) -> dict:
    """Whole-chip counts of FP32 CUDA cores and tensor cores: per-SM counts x n_sms.

    Returns {"fp32_cores": ..., "tensor_cores": ...} (ints). The lecture's H100: 132 SMs of 128 FP32
    cores and 4 tensor cores each, so 16,896 FP32 cores and 528 tensor cores. (One of the notes
    attributes the 528 matrix units to the A100; 528 = 132 x 4 is the H100's count. An A100 has
    108 SMs of 64 FP32 cores and 4 tensor cores: 6,912 and 432.)
    """
    # BEGIN SOLUTION
    n_sms = _whole("n_sms", n_sms, minimum=1)
    cores = _whole("fp32_cores_per_sm", fp32_cores_per_sm)
    tensor = _whole("tensor_cores_per_sm", tensor_cores_per_sm)
    return {"fp32_cores": n_sms * cores, "tensor_cores": n_sms * tensor}
    # END SOLUTION


def latency_hiding_utilization(n_warps, compute_per_load, mem_latency=400) -> float:
    """Fraction of cycles an SM's compute units are busy: min(1, W x c / (c + L)).

    The lecture's model: each of `n_warps` (W) resident warps repeats "issue `compute_per_load` (c)
    compute instructions, then one memory load that takes `mem_latency` (L) cycles"; the scheduler
    issues one ready instruction per cycle, so while one warp waits the others compute. One warp with
    c = 4 and L = 400 is busy 4 of every 404 cycles: 0.0099 (1%). Even the maximum of 64 resident warps
    only reaches 64 x 4 / 404 = 0.634 (64%); with c = 64, 8 warps already saturate it. A float in [0, 1].
    """
    # BEGIN SOLUTION
    warps = _whole("n_warps", n_warps)
    compute = _positive("compute_per_load", compute_per_load)
    latency = _nonnegative("mem_latency", mem_latency)
    return float(min(Fraction(1), warps * compute / (compute + latency)))
    # END SOLUTION


def min_warps_to_hide_latency(compute_per_load, mem_latency=400) -> int:
    """The fewest resident warps that keep the compute units busy every cycle: ceil((c + L) / c).

    The lecture's exercise: c = 8 compute instructions per load and L = 400 cycles need
    408 / 8 = 51 warps, within the H100's limit of 64 per SM (if registers and shared memory allow
    that many). c = 64 needs only 8: more work per byte loaded means less parallelism needed.
    Round up: 50 warps would leave the units idle 2% of the time. Returns an int.
    """
    # BEGIN SOLUTION
    compute = _positive("compute_per_load", compute_per_load)
    latency = _nonnegative("mem_latency", mem_latency)
    return math.ceil((compute + latency) / compute)
    # END SOLUTION


def divergent_warp_cycles(thread_branches, branch_cycles) -> int:
    """Cycles a warp spends on an if/else (or switch) when its threads take `thread_branches`.

    `thread_branches` holds, for each thread of the warp (at most 32), the index of the branch it
    takes; `branch_cycles[i]` is the cost of branch i. All threads of a warp execute one instruction at
    a time (SIMT), so every branch that at least one thread takes runs, with the other threads masked
    off: the warp pays the sum over the distinct branches taken. The lecture: two branches of 10
    cycles each cost 10 when all 32 threads agree, and 20 as soon as one thread disagrees. Returns an int.
    """
    # BEGIN SOLUTION
    costs = [_whole(f"branch_cycles[{i}]", c) for i, c in enumerate(branch_cycles)]
    branches = list(thread_branches)
    if not 1 <= len(branches) <= 32:
        raise ValueError(f"thread_branches must hold 1 to 32 entries (one per thread of a warp), got {len(branches)}")
    for branch in branches:
        if not (isinstance(branch, int) and 0 <= branch < len(costs)):
            raise ValueError(f"thread_branches entries must be branch indices in [0, {len(costs)}), got {branch!r}")
    return sum(costs[branch] for branch in set(branches))
    # END SOLUTION


def warp_transactions(byte_addresses, access_bytes=4, line_bytes=128) -> int:
    """Memory transactions one warp's loads need: the number of distinct aligned `line_bytes` lines
    touched by the accesses [address, address + access_bytes) of its threads.

    DRAM is read in aligned lines (bursts) of 128 bytes, and the hardware merges a warp's accesses
    that fall in the same line. The lecture: 32 threads reading consecutive fp32 values (addresses 0, 4,
    ..., 124) need 1 transaction; reading A[0], A[1000], A[2000], ... (4,000 bytes apart) needs 32.
    An access that straddles a line boundary touches both lines. Returns an int.
    """
    # BEGIN SOLUTION
    size = _whole("access_bytes", access_bytes, minimum=1)
    line = _whole("line_bytes", line_bytes, minimum=1)
    lines = set()
    for address in byte_addresses:
        start = _whole("byte_addresses", address)
        lines.update(range(start // line, (start + size - 1) // line + 1))
    return len(lines)
    # END SOLUTION


def coalescing_efficiency(byte_addresses, access_bytes=4, line_bytes=128) -> float:
    """Fraction of the bytes transferred that the warp asked for:
    (number of accesses x access_bytes) / (warp_transactions x line_bytes).

    The lecture: consecutive fp32 loads use 128 of 128 bytes (1.0); loads 4,000 bytes apart use 4 of
    every 128 (32 x 4 / (32 x 128) = 0.03125, "3%"). Needs at least one access.
    """
    # BEGIN SOLUTION
    addresses = list(byte_addresses)
    if not addresses:
        raise ValueError("byte_addresses must hold at least one address")
    transactions = warp_transactions(addresses, access_bytes, line_bytes)
    return len(addresses) * int(access_bytes) / (transactions * int(line_bytes))
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Fusion and recomputation
# ----------------------------------------------------------------------------------------------------

def elementwise_chain_bytes(n_ops, tensor_bytes, fused=False) -> int:
    """HBM traffic of a chain of `n_ops` elementwise operations on a tensor of `tensor_bytes` bytes.

    Unfused, every operation is its own kernel: it reads its input from HBM and writes its output back,
    2 x n_ops x tensor_bytes in all. Fused into one kernel, the chain reads the input once and writes the
    output once (the intermediates stay in registers): 2 x tensor_bytes. The lecture: LayerNorm ->
    GELU -> dropout moves 6 x size(x) unfused and 2 x size(x) fused, a third of the traffic, so a
    memory-bound chain runs about 3x faster. (LayerNorm's row reduction is treated as one pass.)
    Returns an int.
    """
    # BEGIN SOLUTION
    n_ops = _whole("n_ops", n_ops, minimum=1)
    size = _whole("tensor_bytes", tensor_bytes)
    return 2 * size * (1 if fused else n_ops)
    # END SOLUTION


def memory_bound_speedup(bytes_before, bytes_after) -> float:
    """Speedup of a memory-bound kernel whose HBM traffic drops from `bytes_before` to `bytes_after`:
    bytes_before / bytes_after (its time is bytes / bandwidth, whatever the FLOPs).

    The lecture's exercise: RMSNorm (read 2 + write 2 bytes per BF16 element) after a residual add
    (read 2 + 2, write 2) moves 10 bytes per element; fused into one kernel (read both inputs, write
    one output) it moves 6: 10 / 6 = 1.67x (1.60 ms -> 0.96 ms on a [16, 4096, 8192] tensor on an H100).
    """
    # BEGIN SOLUTION
    return float(_nonnegative("bytes_before", bytes_before) / _positive("bytes_after", bytes_after))
    # END SOLUTION


def sigmoid_chain_accesses(n_sigmoids=3, recompute=False) -> int:
    """Memory reads and writes (whole tensors) of forward + backward through y = sigmoid(...sigmoid(x)).

    The lecture's example with 3 sigmoids. Stored activations: the forward reads x and writes each of
    the n outputs (the backward needs them), the backward reads them back and writes dx: 2n + 2 = 8.
    Recomputed: the forward reads x and writes only the final output; the backward reads x and
    d(out), recomputes the activations on chip and writes dx: 5 accesses whatever n, for a little
    extra compute (the forward is done twice). Returns an int.
    """
    # BEGIN SOLUTION
    n = _whole("n_sigmoids", n_sigmoids, minimum=1)
    if recompute:
        return 2 + 3
    return (1 + n) + (n + 1)
    # END SOLUTION


def recompute_flops_ratio(recomputed_fraction=1.0, backward_factor=2) -> float:
    """Training FLOPs with activation recomputation over training FLOPs without it.

    Without it: forward F + backward `backward_factor` x F (about 2F: gradients with respect to the
    inputs and to the weights) = 3F. Recomputing `recomputed_fraction` of the forward during the
    backward adds that much of F: (1 + backward_factor + recomputed_fraction) / (1 + backward_factor).
    The lecture: recomputing the whole forward costs at most 4F / 3F = 1.33 (33% more FLOPs), in
    exchange for activation memory O(L / k) or O(sqrt(L)) instead of O(L). Recomputation adds FLOPs;
    it never makes them "unchanged".
    """
    # BEGIN SOLUTION
    fraction = _nonnegative("recomputed_fraction", recomputed_fraction)
    if fraction > 1:
        raise ValueError(f"recomputed_fraction must be in [0, 1], got {recomputed_fraction!r}")
    backward = _nonnegative("backward_factor", backward_factor)
    return float((1 + backward + fraction) / (1 + backward))
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Number formats
# ----------------------------------------------------------------------------------------------------

EXPONENT_BITS = {"fp64": 11, "fp32": 8, "tf32": 8, "bf16": 8, "fp16": 5, "e5m2": 5, "e4m3": 4}
"""Exponent bits of each floating-point format (IEEE-style: bias = 2**(bits - 1) - 1)."""


def tensor_core_peak(dtype, bf16_peak) -> float:
    """Dense tensor-core peak FLOP/s in `dtype`, given the BF16 peak `bf16_peak`.

    The lecture's ladder on an H100: BF16 989 TFLOP/s is twice TF32 (494.5) and half FP8 (1979; the
    exact ratio is 2, the spec sheet rounds 2 x 989.4). Each halving of the bits doubles the peak (and
    halves the bytes moved): tf32 runs at half the BF16 peak, bf16 and fp16 at the BF16 peak, fp8 and
    int8 at twice it. Any other format (fp32, fp64, int4: no tensor-core path here) raises ValueError
    naming `dtype`.
    """
    # BEGIN SOLUTION
    speedup = {"tf32": Fraction(1, 2), "bf16": Fraction(1), "fp16": Fraction(1), "fp8": Fraction(2),
               "int8": Fraction(2)}
    name = _dtype_name(dtype)
    if name not in speedup:
        raise ValueError(f"dtype must be one of {', '.join(speedup)} (a tensor-core format), got {dtype!r}")
    return float(_positive("bf16_peak", bf16_peak) * speedup[name])
    # END SOLUTION


def smallest_normal(fmt) -> float:
    """The smallest positive normal number of a floating-point format: 2 ** (1 - bias), where
    bias = 2 ** (exponent bits - 1) - 1 (see EXPONENT_BITS).

    fp16 (5 exponent bits, bias 15): 2**-14 = 6.1e-5; bf16 (8 bits, bias 127): 2**-126 = 1.2e-38,
    fp32's range, which is why bf16 needs no loss scaling. Below it numbers lose precision
    (subnormals) and then flush to 0. Accepts the names of EXPONENT_BITS (or a torch dtype).
    """
    # BEGIN SOLUTION
    name = fmt.lower() if isinstance(fmt, str) else None
    if name not in EXPONENT_BITS:
        try:
            name = _dtype_name(fmt)      # torch.float16 and the aliases of dtype_bits
        except ValueError:
            name = None
    if name not in EXPONENT_BITS:
        raise ValueError(f"fmt must be one of {', '.join(EXPONENT_BITS)} (or a torch dtype), got {fmt!r}")
    bias = 2 ** (EXPONENT_BITS[name] - 1) - 1
    return math.ldexp(1.0, 1 - bias)
    # END SOLUTION


def min_loss_scale(smallest_gradient, fmt="fp16") -> int:
    """The smallest power-of-two loss scale s >= 1 that lifts a gradient of magnitude
    `smallest_gradient` to a normal number of `fmt`: s x |g| >= smallest_normal(fmt).

    Multiplying the loss by s multiplies every gradient by s (the chain rule is linear), so gradients
    that would underflow in fp16 survive; the optimizer divides by s before the update. The lecture
    uses a static scale such as 512: exactly what a gradient of 2**-23 (1.2e-7) needs in fp16
    (2**-14 / 2**-23 = 2**9). bf16 has fp32's range, so it needs s = 1 for any gradient fp32 can hold.
    Powers of two, because scaling by them is exact. Returns an int.
    """
    # BEGIN SOLUTION
    gradient = _positive("smallest_gradient", smallest_gradient)
    floor = Fraction(smallest_normal(fmt))
    scale = 1
    while scale * gradient < floor:
        scale *= 2
    return scale
    # END SOLUTION


MX_FORMATS = ("mxfp8", "mxfp4")


def mx_num_scales(n_elements, fmt) -> int:
    """Scales needed to store `n_elements` values in a microscaling format: ceil(n / block).

    The lecture: MXFP8 shares one E8M0 (power-of-two) scale among 32 elements; its MXFP4 shares one
    E4M3 scale among 16 (values in -6..6). 4,096 elements need 128 scales in MXFP8 and 256 in MXFP4.
    `fmt` is "mxfp8" or "mxfp4" (ValueError naming fmt otherwise).
    (What the lecture calls MXFP4 with 16-element E4M3 scales is NVIDIA's NVFP4; the OCP MXFP4 standard
    uses 32-element E8M0 blocks. The tests use the lecture's numbers.) A partial last block still needs
    its scale. Returns an int.
    """
    # BEGIN SOLUTION
    n = _whole("n_elements", n_elements)
    block = {"mxfp8": 32, "mxfp4": 16}[_choice("fmt", fmt, MX_FORMATS)]
    return -(-n // block)
    # END SOLUTION


def mx_storage_bytes(n_elements, fmt, keep_transpose=False) -> int:
    """Bytes to store `n_elements` in a microscaling format: the packed elements (8 or 4 bits each,
    rounded up to a whole byte) plus one byte per scale (mx_num_scales).

    4,096 elements: MXFP8 4,096 + 128 = 4,224 bytes; MXFP4 2,048 + 256 = 2,304. The scales run along
    one axis, so the transpose needs re-quantizing: training keeps both copies of a quantized matrix
    (keep_transpose=True doubles the bytes). Returns an int.
    """
    # BEGIN SOLUTION
    n = _whole("n_elements", n_elements)
    element_bits = {"mxfp8": 8, "mxfp4": 4}[_choice("fmt", fmt, MX_FORMATS)]
    one_copy = -(-n * element_bits // 8) + mx_num_scales(n, fmt)
    return one_copy * (2 if keep_transpose else 1)
    # END SOLUTION


def round_up_to_multiple(n, multiple=64) -> int:
    """The smallest multiple of `multiple` that is >= n (n itself if it already is one).

    Padding a dimension so that tiles divide it evenly avoids a ragged last tile. The lecture: nanoGPT
    pads GPT-2's vocabulary from 50,257 to 50,304 (a multiple of 64), for about 25% speed; the 47
    extra logits are never used. Returns an int.
    """
    # BEGIN SOLUTION
    n = _whole("n", n)
    multiple = _whole("multiple", multiple, minimum=1)
    return -(-n // multiple) * multiple
    # END SOLUTION


# ----------------------------------------------------------------------------------------------------
# Inference: prefill, decode, the KV cache and launch overhead
# ----------------------------------------------------------------------------------------------------

def non_embedding_params(n_params, vocab_size, d_model) -> int:
    """Parameters left after removing the token-embedding table: n_params - vocab_size x d_model.

    The embedding table is looked up (one row per token), never multiplied, so decode does not read
    it. The lecture's Llama-3 8B (8.03e9 parameters, vocabulary 128,256, d_model 4,096): 8.03e9 -
    525,336,576 = 7,504,663,424, i.e. 14.0 GiB in BF16 out of 15 GiB (14.96 GiB) in total. Returns an int.
    """
    # BEGIN SOLUTION
    n_params = _whole("n_params", n_params)
    table = _whole("vocab_size", vocab_size) * _whole("d_model", d_model)
    if table > n_params:
        raise ValueError(f"vocab_size x d_model ({table}) exceeds n_params ({n_params})")
    return n_params - table
    # END SOLUTION


def decode_step_time(weight_bytes, bandwidth, kv_cache_bytes=0) -> float:
    """Lower bound on one decode step, in seconds: (weight_bytes + kv_cache_bytes) / bandwidth.

    Each step produces one token per sequence and must read every weight (and every sequence's KV
    cache) from HBM once, while doing only about 2 FLOPs per weight per sequence: decode at small batch
    is memory-bound, and the time is bytes over bandwidth whatever the FLOPs. The lecture: Llama-3 8B at
    batch 1 reads 14.0 GiB per step on an H100 (3.35e12 bytes/s): 4.49 ms. Llama-3 70B in INT4
    (70.6e9 x 0.5 = 35.3e9 bytes): 10.5 ms.
    """
    # BEGIN SOLUTION
    weights = _nonnegative("weight_bytes", weight_bytes)
    cache = _nonnegative("kv_cache_bytes", kv_cache_bytes)
    return float((weights + cache) / _positive("bandwidth", bandwidth))
    # END SOLUTION


def decode_tokens_per_second(weight_bytes, bandwidth, kv_cache_bytes=0, batch=1) -> float:
    """Upper bound on tokens generated per second: batch / decode_step_time(...).

    Every step yields one token for each of the `batch` sequences, and `kv_cache_bytes` is the cache of
    the whole batch. The lecture: batch 1 on Llama-3 8B (14.0 GiB of weights, H100) gives at most about
    220 tokens/s (222.9), and Llama-3 70B in INT4 about 95 (94.9), however many FLOP/s the GPU has.
    Batching shares one read of the weights among many sequences.
    """
    # BEGIN SOLUTION
    batch = _whole("batch", batch, minimum=1)
    return batch / decode_step_time(weight_bytes, bandwidth, kv_cache_bytes)
    # END SOLUTION


def kv_weight_crossover_tokens(weight_bytes, kv_bytes_per_token, batch=1) -> float:
    """Context length at which a decode step reads as many KV-cache bytes as weight bytes:
    weight_bytes / (kv_bytes_per_token x batch).

    Beyond it the KV cache, not the weights, dominates the traffic. The lecture's Llama-3 8B (14.0 GiB
    of weights, 128 KiB of KV cache per token): 14 x 2**30 / 2**17 = 114,688 tokens at batch 1, and
    3,584 at batch 32, because every sequence of the batch reads its own cache. An int when exact.
    """
    # BEGIN SOLUTION
    weights = _nonnegative("weight_bytes", weight_bytes)
    per_token = _positive("kv_bytes_per_token", kv_bytes_per_token)
    batch = _whole("batch", batch, minimum=1)
    return _exact(weights / (per_token * batch))
    # END SOLUTION


def prefill_flops(matmul_params, n_tokens, attention_flops=0):
    """Forward FLOPs of a prefill: 2 x matmul_params x n_tokens + attention_flops.

    Every weight that multiplies activations does one multiply-add per token; the attention term (the
    4BT^2D of `attention_flops`, over all layers) comes on top. `matmul_params` excludes the embedding
    table (a lookup) and, when only the last token's logits are needed, the output head. The lecture's
    Llama-3 8B at 2,048 tokens: 6,979,326,848 such parameters and 2.2e12 attention FLOPs give 30.8e12
    FLOPs: 31.1 ms at the H100's 989e12 FLOP/s, so a 43 ms run reaches 72% of the peak. An int for
    whole inputs.
    """
    # BEGIN SOLUTION
    params = _nonnegative("matmul_params", matmul_params)
    tokens = _whole("n_tokens", n_tokens)
    attention = _nonnegative("attention_flops", attention_flops)
    return _exact(2 * params * tokens + attention)
    # END SOLUTION


def attention_projection_flops(batch, seq_len, d_model, kv_dim=None) -> int:
    """Forward FLOPs of one attention layer's four projections (Q, K, V and the output O).

    Each is a [batch x seq_len, d_model] @ [d_model, width] matmul, 2 x B x T x d_model x width FLOPs;
    Q and O have width d_model, K and V have width `kv_dim` (= d_model for multi-head attention, the
    default; n_kv_heads x head_dim with grouped-query attention). For multi-head attention this is the
    lecture's 8BTD^2: B = 1, T = 2,048, D = 4,096 gives 274,877,906,944 per layer. Returns an int.
    """
    # BEGIN SOLUTION
    batch, seq_len = _whole("batch", batch), _whole("seq_len", seq_len)
    d_model = _whole("d_model", d_model)
    kv_dim = d_model if kv_dim is None else _whole("kv_dim", kv_dim)
    return 2 * batch * seq_len * d_model * (2 * d_model + 2 * kv_dim)
    # END SOLUTION


def decode_batch_for_compute_bound(d_model, peak_flops, bandwidth, bytes_per_elem=2) -> int:
    """The smallest batch at which a decode step's [batch, d] @ [d, d] matmul is compute-bound:
    the least b with matmul_intensity(b, d, d, bytes_per_elem) >= ridge_point(peak_flops, bandwidth).

    At batch b the weight is read once for b tokens: intensity = 2bd^2 / ((d^2 + 2bd) x bytes), which
    is about b in BF16 (1 at batch 1: a matrix-vector product). So the batch must reach about the ridge
    point: d = 4,096 in BF16 needs 345 on an H100 (ridge 295) and 166 on an A100 (ridge 153). The notes
    quote "about 512" and "about 256": rounder numbers that their own model (AI ~ b) does not give.
    If d_model <= ridge x bytes_per_elem no batch is enough: ValueError naming d_model. Returns an int.
    """
    # BEGIN SOLUTION
    d = _whole("d_model", d_model, minimum=1)
    ridge = _positive("peak_flops", peak_flops) / _positive("bandwidth", bandwidth)
    per_elem = _positive("bytes_per_elem", bytes_per_elem)
    # 2 b d^2 >= ridge x bytes x (d^2 + 2 b d)  <=>  b (2d - 2 ridge bytes) >= ridge bytes d
    margin = 2 * d - 2 * ridge * per_elem
    if margin <= 0:
        raise ValueError(f"d_model must exceed ridge x bytes_per_elem ({float(ridge * per_elem):.1f}): "
                         f"with d_model={d} no batch is compute-bound")
    return max(1, math.ceil(ridge * per_elem * d / margin))
    # END SOLUTION


def launch_bound_time(n_kernels, compute_seconds, launch_seconds) -> float:
    """Time of a sequence of `n_kernels` kernels doing `compute_seconds` of GPU work in all, when each
    launch costs `launch_seconds` and waits for the previous kernel: n_kernels x launch + compute.

    The lecture's exercise: 200 kernels of 1 us each with 5 us launches take 1,200 us; CUDA Graphs
    (0.5 us per launch) 300 us; fusing into 20 kernels 300 us; both 210 us. When launches dominate,
    making each kernel faster barely matters.
    """
    # BEGIN SOLUTION
    n = _whole("n_kernels", n_kernels)
    compute = _nonnegative("compute_seconds", compute_seconds)
    launch = _nonnegative("launch_seconds", launch_seconds)
    return float(n * launch + compute)
    # END SOLUTION


def gpu_busy_fraction(n_kernels, compute_seconds, launch_seconds) -> float:
    """Fraction of `launch_bound_time` the GPU spends computing: compute / total.

    200 kernels of 1 us with 5 us launches: 200 / 1,200 = 0.167; the GPU idles 83% of the time.
    """
    # BEGIN SOLUTION
    total = launch_bound_time(n_kernels, compute_seconds, launch_seconds)
    if total == 0:
        raise ValueError("compute_seconds and launch_seconds cannot both be 0")
    return float(Fraction(compute_seconds) / Fraction(total))
    # END SOLUTION
