"""Time the reference Triton matmul (solutions/matmul.py) against cuBLAS (torch.matmul) on one GPU.

    PYTHONPATH=. python scripts/measure/reference_matmul.py [--json results.jsonl] [--rounds 2]

For each shape and dtype: one call that autotunes and is checked against torch.matmul, then
`triton.testing.do_bench` medians (L2 flushed between repetitions) of the two, alternating which goes
first, over --rounds rounds. Prints TFLOP/s (2*M*K*N / time), the ratio cuBLAS time / Triton time
(> 1 means Triton is faster), the tile config the autotuner chose and every candidate's tuning time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton
from triton.testing import do_bench

from solutions import matmul as reference

# (M, K, N): a [M, K] @ b [K, N]
SHAPES = [
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 4096, 14336),   # 8192 tokens through a 4096 -> 14336 MLP up-projection
    (1792, 1792, 1792),    # the lecture's wave-quantization pair
    (1793, 1793, 1793),
]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MAX_RELATIVE_ERROR = 1e-2


def relative_error(actual, expected) -> float:
    return float((actual.float() - expected.float()).norm() / expected.float().norm())


def config_text(config) -> str:
    kw = config.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} g{kw['GROUP_M']} "
            f"s{config.num_stages} w{config.num_warps}")


def bench_case(M, K, N, dtype_name, rounds):
    dtype = DTYPES[dtype_name]
    gen = torch.Generator(device="cuda").manual_seed(M * 31 + K * 7 + N)
    a = torch.randn((M, K), device="cuda", dtype=dtype, generator=gen)
    b = torch.randn((K, N), device="cuda", dtype=dtype, generator=gen)
    out = reference.matmul(a, b)            # autotunes here, outside the timing
    error = relative_error(out, torch.matmul(a, b))
    if not error <= MAX_RELATIVE_ERROR:
        raise AssertionError(f"{dtype_name} {M}x{K}x{N}: relative error {error:.2e} vs torch.matmul")
    kernel = reference.matmul_kernel
    chosen = config_text(kernel.best_config)
    tuning = {config_text(c): round(t[0], 4) for c, t in getattr(kernel, "configs_timings", {}).items()}

    triton_ms, torch_ms = [], []
    for index in range(rounds):
        order = [("triton", lambda: reference.matmul(a, b)), ("torch", lambda: torch.matmul(a, b))]
        if index % 2:
            order.reverse()
        for name, fn in order:
            (triton_ms if name == "triton" else torch_ms).append(do_bench(fn, return_mode="median"))
    flops = 2.0 * M * K * N
    t_triton, t_torch = statistics.median(triton_ms), statistics.median(torch_ms)
    return {
        "shape": f"{M}x{K}x{N}", "dtype": dtype_name,
        "triton_ms": round(t_triton, 4), "torch_ms": round(t_torch, 4),
        "triton_tflops": round(flops / t_triton / 1e9, 1), "torch_tflops": round(flops / t_torch / 1e9, 1),
        "ratio": round(t_torch / t_triton, 3),
        "rounds": [[round(x, 4), round(y, 4)] for x, y in zip(triton_ms, torch_ms)],
        "relative_error": float(f"{error:.2e}"), "config": chosen, "tuning_ms": tuning,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write one JSON line per case to this file")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_matmul: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"{'dtype':<5} {'M x K x N':<17} {'triton TF/s':>11} {'cuBLAS TF/s':>11} {'ratio':>6}  config")
    sink = open(args.json, "w") if args.json else None  # noqa: SIM115 - written through the loop, closed after it
    failures = 0
    for dtype_name in DTYPES:
        for M, K, N in SHAPES:
            try:
                row = bench_case(M, K, N, dtype_name, args.rounds)
            except Exception as error:  # noqa: BLE001 - report and go on to the next shape
                failures += 1
                print(f"{dtype_name:<5} {M}x{K}x{N}: FAILED {type(error).__name__}: {error}", flush=True)
                continue
            print(f"{dtype_name:<5} {row['shape']:<17} {row['triton_tflops']:>11.1f} {row['torch_tflops']:>11.1f} "
                  f"{row['ratio']:>6.3f}  {row['config']}  err {row['relative_error']:.1e}", flush=True)
            if sink:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
    if sink:
        sink.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
