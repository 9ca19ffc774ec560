"""The accounting problem's classic mistakes, as ratios (got / expected) or wrong values -> cause.

Each cause names the idea to re-read. Tables that depend on a test's inputs are functions of them.
"""

from __future__ import annotations

import math

SIX_ND = {
    1 / 3: "a factor 1/3 means the forward pass only (2ND). Training also runs the backward pass, about "
           "twice the forward (gradients for the activations and for the weights): C = 2ND + 4ND = 6ND.",
    2 / 3: "a factor 2/3 means the backward pass only (4ND); add the forward pass's 2ND.",
}

KV_CACHE = {
    1 / 2: "a factor 1/2 means K or V is missing: the cache holds keys AND values for every layer and "
           "token, hence the leading 2.",
    2: "a factor 2 too many: count keys and values once each (the leading 2), and bytes_per_elem once.",
}

GIB = {
    2**30 / 1e9: "that divides by 1e9 (GB). A GiB is 2**30 = 1,073,741,824 bytes.",
    1e9 / 2**30: "that multiplies GB and GiB the wrong way round: GiB = bytes / 2**30.",
}

CAUSAL = {
    2: "a factor 2 means causal=True was ignored: a causal kernel skips the masked upper triangle, "
       "half of the score matrix.",
}

MIXED_PRECISION_TOTAL = ("16 is the lecture's total for one set of assumptions (bf16 weights and gradients, "
                         "fp32 master copy, fp32 Adam moments). The options change the parts: compute "
                         "each from its dtype and the optimizer instead of returning 16.")

DIVERGENCE = {
    1 / 2: "a factor 1/2: the branches of a divergent warp run one after the other (SIMT), so the "
           "warp pays the sum of every branch some thread takes, not the longest one.",
}

PROJECTIONS = {
    3 / 4: "a factor 3/4 means one projection is missing: Q, K, V and the output O are four matmuls.",
    1 / 2: "a factor 1/2 means a multiply-add was counted as 1 FLOP: the lecture counts 2 (2mkn).",
}

MX_SCALES = {
    2: "a factor 2: the lecture's MXFP8 shares one scale among 32 elements (MXFP4: 16).",
    1 / 2: "a factor 1/2: the lecture's MXFP4 shares one scale among 16 elements, not 32.",
}

PEAK_LADDER = {
    2: "a factor 2 the wrong way: halving the bits doubles the peak (TF32 is half of BF16, FP8 twice).",
    1 / 2: "a factor 1/2 the wrong way: halving the bits doubles the peak (TF32 is half of BF16, FP8 twice).",
    1 / 4: "a factor 1/4: FP8 doubles BF16's peak (and TF32 halves it), it does not divide it.",
    4: "a factor 4: TF32 halves BF16's peak (and FP8 doubles it).",
}

RECOMPUTE = {
    3 / 4: "a ratio of 1 means recomputation was counted as free. Recomputing the forward adds F "
           "to the 3F of forward + backward: 4F / 3F.",
    3 / 2: "that is 4F / 2F: the baseline is the forward F plus a backward of about 2F, 3F in all.",
}


def wave_mistakes(n_tiles: int, slots: int) -> dict:
    """Wrong wave counts for n_tiles on `slots` tile slots: rounded down, or left as a fraction."""
    return {
        n_tiles // slots: "partial waves are dropped (rounded down). A partly filled wave takes as long "
                          "as a full one: round up, ceil(n_tiles / (n_sms x tiles_per_sm)).",
        n_tiles / slots: "a fractional number of waves: a partial wave costs a whole one, so round up.",
    }


def warp_rounding_mistakes(compute: int, latency: int) -> dict:
    """Wrong warp counts for min_warps_to_hide_latency: rounded down, or L / c without the c cycles."""
    return {
        (compute + latency) // compute: "rounded down: with one warp fewer the units idle part of "
                                        "the time. Round up: ceil((c + L) / c).",
        -(-latency // compute): "that is ceil(L / c): a warp's cycle is its c compute cycles plus the "
                                "L-cycle wait, so W >= (c + L) / c.",
    }


def utilization_mistakes(n_warps: int, compute: int, latency: int) -> dict:
    """Wrong utilizations: not capped at 1, or the wait not counted in a warp's cycle."""
    return {
        n_warps * compute / (compute + latency): "a utilization above 1: once enough warps are "
                                                 "resident the units are busy every cycle: min(1, ...).",
        min(1.0, n_warps * compute / latency): "that divides by L: each warp's cycle is c compute cycles "
                                               "plus the L-cycle wait, c + L.",
    }


def intensity_mistakes(expected: float) -> dict:
    """The slide's erratum: bytes per FLOP instead of FLOPs per byte."""
    return {1 / expected: "that is bytes per FLOP, the inverse (the slide's '8 FLOP/byte' erratum): "
                          "intensity is FLOPs / bytes."}


A100_TENSOR_CORES = {
    528: "528 = 132 SMs x 4 is the H100's count (one of the notes gives it to the A100 by mistake): "
         "multiply the SMs you are given by the tensor cores per SM.",
}


def decode_batch_mistakes(ridge: float) -> dict:
    """Wrong compute-bound batches: the notes' rounded figures, and intensity from weights alone."""
    return {
        512: "512 is the notes' rounded figure, not what their model gives: the batch must lift the "
             "intensity (about b in bf16) to the ridge point.",
        256: "256 is the notes' rounded A100 figure, not what their model gives: the batch must lift the "
             "intensity (about b in bf16) to the ridge point.",
        math.ceil(ridge): "that counts only the weight bytes. Count the activations read and written too, "
                          "as matmul_intensity does: 2bd^2 / ((d^2 + 2bd) x bytes).",
    }


def launch_mistakes(n_kernels: int, compute: float, launch: float) -> dict:
    """Wrong launch-bound times: launches overlapped with compute, or launches left out."""
    return {
        max(n_kernels * launch, compute): "launches and kernels overlap here, but in the lecture's model "
                                          "each kernel waits for its launch: n x launch + compute.",
        compute: "the launches are missing: each of the n kernels costs its launch overhead on top.",
    }
