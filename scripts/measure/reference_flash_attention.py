"""Time the reference FlashAttention-2 (solutions/flash_attention.py) against PyTorch's SDPA on one GPU.

    PYTHONPATH=. python scripts/measure/reference_flash_attention.py [--quick] [--sweep] [--json results.jsonl]

The FlashAttention papers' protocol: bf16, 16 heads, B*N = 16k tokens, N in 1k..16k, d in {64, 128},
causal and not. For each case, `triton.testing.do_bench` medians (L2 flushed) of
- fwd: the forward alone;
- bwd: the backward alone (o.backward(do, retain_graph=True), the forward outside the timing);
- fwd+bwd: both;
for the Triton reference, SDPA with the cuDNN backend and SDPA with the flash backend
(torch.nn.attention.sdpa_kernel), plus naive PyTorch attention (materialised scores) at small N.
TFLOP/s count 4*B*H*N^2*d for the forward (halved when causal), 2.5x that for the backward, 3.5x for
both. Ratios are baseline time / Triton time (> 1: Triton is faster). Every case is checked against
cuDNN first, so a fast wrong kernel never shows up.

--sweep times the kernels' candidate tile configs at N = 4096 and prints the best per (d, causal);
the winners are what `_fwd_config` / `_bwd_config` in the solution use.

Measured on an H200 (torch 2.11, Triton 3.6, cuDNN 9.19), bf16, N >= 4096: forward 0.81-0.95x cuDNN and
1.39-1.57x the flash backend; backward 0.66-0.78x cuDNN and 1.06-1.24x flash; causal 1.67-1.85x faster
than non-causal at N = 8192. At N = 1024-2048 with d = 128 the forward drops to 0.66-0.79x cuDNN.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

from solutions import flash_attention as fa

TOKENS = 16384
HEADS = 16
SEQ_LENS = (1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
NAIVE_MAX_N = 4096
MAX_RELATIVE_ERROR = {"o": 1e-2, "dq": 3e-2, "dk": 3e-2, "dv": 3e-2}

# Candidate tile configs for --sweep: forward (BLOCK_M, BLOCK_N, warps, stages) and backward
# (BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, warps, stages).
FWD_CANDIDATES = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3),
                  (128, 32, 4, 4)]
BWD_CANDIDATES = [(64, 128, 128, 64, 8, 3), (64, 128, 128, 64, 8, 2), (32, 128, 128, 32, 4, 5),
                  (32, 128, 128, 32, 4, 3), (64, 64, 64, 64, 4, 3), (32, 64, 64, 32, 4, 4),
                  (64, 128, 128, 64, 4, 3), (128, 128, 128, 128, 8, 2)]


def attention_flops(batch, heads, n, d, causal, mode):
    forward = 4.0 * batch * heads * n * n * d * (0.5 if causal else 1.0)
    return forward * {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[mode]


def relative_error(actual, expected):
    actual, expected = actual.detach().float(), expected.detach().float()
    return float((actual - expected).norm() / expected.norm())


def naive_attention(q, k, v, causal):
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def sdpa(backend):
    def attention(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return attention


IMPLEMENTATIONS = {
    "triton": fa.flash_attention,
    "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    "flash": sdpa(SDPBackend.FLASH_ATTENTION),
    "naive": naive_attention,
}


def make_inputs(batch, heads, n, d, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed + n + d)
    return [torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16, generator=gen)
            for _ in range(4)]


def time_modes(attention, q, k, v, do, causal):
    """{mode: median ms} for fwd, bwd (alone) and fwd+bwd."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    leaves = [q, k, v]
    times = {"fwd": do_bench(lambda: attention(q, k, v, causal), return_mode="median")}
    o = attention(q, k, v, causal)
    times["bwd"] = do_bench(lambda: o.backward(do, retain_graph=True), grad_to_none=leaves,
                            return_mode="median")
    times["fwd+bwd"] = do_bench(lambda: attention(q, k, v, causal).backward(do), grad_to_none=leaves,
                                return_mode="median")
    return times


def check_against_cudnn(q, k, v, do, causal):
    """Relative errors of the Triton o, dq, dk, dv against cuDNN's; raises when too large."""
    results = {}
    for name, attention in (("triton", fa.flash_attention), ("cudnn", IMPLEMENTATIONS["cudnn"])):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        o = attention(*leaves, causal)
        o.backward(do)
        results[name] = [o] + [t.grad for t in leaves]
    errors = {what: relative_error(mine, theirs)
              for what, mine, theirs in zip(("o", "dq", "dk", "dv"), results["triton"], results["cudnn"])}
    bad = {what: err for what, err in errors.items() if not err <= MAX_RELATIVE_ERROR[what]}
    if bad:
        raise AssertionError(f"Triton vs cuDNN relative errors too large: {bad}")
    return errors


def bench_case(n, d, causal):
    batch = TOKENS // n
    q, k, v, do = make_inputs(batch, HEADS, n, d)
    errors = check_against_cudnn(q, k, v, do, causal)
    times = {}
    for name, attention in IMPLEMENTATIONS.items():
        if name == "naive" and n > NAIVE_MAX_N:
            continue
        times[name] = time_modes(attention, q, k, v, do, causal)
    return {"n": n, "batch": batch, "heads": HEADS, "d": d, "causal": causal, "errors": errors, "ms": times}


def print_case(result):
    b, h, n, d, causal = result["batch"], result["heads"], result["n"], result["d"], result["causal"]
    label = f"B{b:<2} H{h} N{n:<5} d{d:<3} {'causal' if causal else 'full  '}"
    for mode in ("fwd", "bwd", "fwd+bwd"):
        flops = attention_flops(b, h, n, d, causal, mode)
        tflops = {name: flops / (ms[mode] * 1e-3) / 1e12 for name, ms in result["ms"].items()}
        ours = result["ms"]["triton"][mode]
        ratios = {name: ms[mode] / ours for name, ms in result["ms"].items() if name != "triton"}
        cells = "  ".join(f"{name} {tflops[name]:6.1f}" for name in result["ms"])
        ratio_cells = "  ".join(f"x{name} {ratio:5.2f}" for name, ratio in ratios.items())
        print(f"{label} {mode:<8} TFLOP/s: {cells} | {ratio_cells}", flush=True)


def causal_speedups(results):
    """Non-causal time / causal time of the Triton kernels, per (n, d, mode)."""
    by_key = {(r["n"], r["d"], r["causal"]): r for r in results}
    lines = []
    for (n, d, causal), r in sorted(by_key.items()):
        if causal or (n, d, True) not in by_key:
            continue
        full, masked = r["ms"]["triton"], by_key[(n, d, True)]["ms"]["triton"]
        lines.append(f"N{n} d{d} causal speed-up: " + "  ".join(
            f"{mode} {full[mode] / masked[mode]:.2f}x" for mode in ("fwd", "bwd", "fwd+bwd")))
    return lines


def sweep(n=4096):
    """Best tile configs at N = n for each (d, causal), timed with the private launchers."""
    batch = TOKENS // n
    for d in HEAD_DIMS:
        for causal in (False, True):
            q, k, v, do = make_inputs(batch, HEADS, n, d)
            o_ref, lse_ref = fa._launch_fwd(q, k, v, causal)
            for cand in FWD_CANDIDATES:
                cfg = dict(BLOCK_M=cand[0], BLOCK_N=cand[1], num_warps=cand[2], num_stages=cand[3])
                try:
                    o, _ = fa._launch_fwd(q, k, v, causal, cfg)
                    err = relative_error(o, o_ref)
                    ms = do_bench(lambda: fa._launch_fwd(q, k, v, causal, cfg), return_mode="median")
                except Exception as error:  # noqa: BLE001 - out of shared memory etc.: report, go on
                    print(f"sweep fwd d{d} causal={causal} {cand}: {type(error).__name__}", flush=True)
                    continue
                tflops = attention_flops(batch, HEADS, n, d, causal, "fwd") / (ms * 1e-3) / 1e12
                print(f"sweep fwd d{d} causal={causal} {cand}: {ms:.3f} ms {tflops:6.1f} TFLOP/s err {err:.1e}",
                      flush=True)
            grads_ref = fa._launch_bwd(q, k, v, o_ref, lse_ref, do, causal)
            for cand in BWD_CANDIDATES:
                cfg = dict(zip(("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2", "num_warps", "num_stages"), cand))
                try:
                    grads = fa._launch_bwd(q, k, v, o_ref, lse_ref, do, causal, cfg)
                    err = max(relative_error(g, r) for g, r in zip(grads, grads_ref))
                    ms = do_bench(lambda: fa._launch_bwd(q, k, v, o_ref, lse_ref, do, causal, cfg),
                                  return_mode="median")
                except Exception as error:  # noqa: BLE001
                    print(f"sweep bwd d{d} causal={causal} {cand}: {type(error).__name__}", flush=True)
                    continue
                tflops = attention_flops(batch, HEADS, n, d, causal, "bwd") / (ms * 1e-3) / 1e12
                print(f"sweep bwd d{d} causal={causal} {cand}: {ms:.3f} ms {tflops:6.1f} TFLOP/s err {err:.1e}",
                      flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N in {4096, 8192} only")
    parser.add_argument("--sweep", action="store_true", help="time candidate tile configs first")
    parser.add_argument("--no-table", action="store_true", help="skip the main table")
    parser.add_argument("--json", default=None, help="append one JSON line per case to this file")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("bench_flash_attention needs a CUDA GPU")
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
          flush=True)
    if args.sweep:
        sweep()
    if args.no_table:
        return
    results = []
    for n in ((4096, 8192) if args.quick else SEQ_LENS):
        for d in HEAD_DIMS:
            for causal in (False, True):
                result = bench_case(n, d, causal)
                print_case(result)
                results.append(result)
                if args.json:
                    with open(args.json, "a") as handle:
                        handle.write(json.dumps(result) + "\n")
    for line in causal_speedups(results):
        print(line)


if __name__ == "__main__":
    main()
