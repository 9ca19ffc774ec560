"""Time the reference Triton row softmax (solutions/softmax.py) against a copy and torch.softmax.

    PYTHONPATH=. python scripts/measure/reference_softmax.py [--json results.jsonl] [--rounds 2] [--sweep]

Softmax is memory-bound, so its honest denominator is the memory system itself: a device-to-device
copy of the same tensor (y.copy_(x), read + write), timed here with the same `do_bench` (median, L2
flushed). Every tensor is 256 MB (>= 4x L2) so nothing is served from cache between repetitions.
Bandwidth counts the compulsory bytes, one read of x and one write of y, for every kernel; the
online path (rows longer than ONE_PASS_MAX_COLS) reads x twice, so its ceiling is about 2/3 of copy
unless the second read hits L2. Prints GB/s and the ratios softmax_triton / copy and / torch.softmax
(both > 1 mean the Triton kernel is faster). --sweep instead times a few launch configurations per
path (tile size, threads per program, online block and warps) to inform the defaults.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton
from triton.testing import do_bench

from solutions import softmax as reference

TENSOR_BYTES = 256 << 20
ONE_PASS_COLS = (1024, 2048, 4096, 8192, 16384)
ONLINE_COLS = (32768, 65536, 131072)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
MAX_ABS_ERROR = {"fp32": 1e-5, "bf16": 1e-2}

# --sweep: module constants of solutions.softmax to vary, per path
ONE_PASS_SWEEP = [{"ONE_PASS_TILE_ELEMS": tile, "ONE_PASS_BYTES_PER_THREAD": bpt}
                  for tile in (4096, 8192, 16384) for bpt in (32, 64, 128)]
ONLINE_SWEEP = [{"ONLINE_BLOCK_COLS": block, "ONLINE_NUM_WARPS": warps}
                for block in (2048, 4096, 8192) for warps in (4, 8, 16)]


def make_input(cols, dtype):
    rows = TENSOR_BYTES // (cols * torch.tensor([], dtype=dtype).element_size())
    gen = torch.Generator(device="cuda").manual_seed(rows * 7 + cols)
    return torch.randn((rows, cols), device="cuda", dtype=dtype, generator=gen)


def check(x, dtype_name):
    out = reference.softmax_triton(x)
    error = float((out.float() - torch.softmax(x.float(), dim=-1)).abs().max())
    if not error <= MAX_ABS_ERROR[dtype_name]:
        raise AssertionError(f"{dtype_name} {tuple(x.shape)}: max abs error {error:.2e} vs torch.softmax")
    return error


def timed(fns, rounds):
    """{name: median ms} over `rounds` rounds of do_bench, rotating which function goes first."""
    times = {name: [] for name in fns}
    names = list(fns)
    for index in range(rounds):
        for name in names[index % len(names):] + names[:index % len(names)]:
            times[name].append(do_bench(fns[name], return_mode="median"))
    return {name: statistics.median(values) for name, values in times.items()}


def bench_case(cols, dtype_name, rounds):
    x = make_input(cols, DTYPES[dtype_name])
    y = torch.empty_like(x)
    error = check(x, dtype_name)
    ms = timed({"triton": lambda: reference.softmax_triton(x), "copy": lambda: y.copy_(x),
                "torch": lambda: torch.softmax(x, dim=-1)}, rounds)
    moved = 2 * x.numel() * x.element_size()
    path = "one-pass" if triton.next_power_of_2(cols) <= reference.ONE_PASS_MAX_COLS else "online"
    return {
        "dtype": dtype_name, "shape": f"{x.shape[0]}x{cols}", "path": path,
        "triton_gbs": round(moved / ms["triton"] / 1e6, 1), "copy_gbs": round(moved / ms["copy"] / 1e6, 1),
        "torch_gbs": round(moved / ms["torch"] / 1e6, 1),
        "vs_copy": round(ms["copy"] / ms["triton"], 3), "vs_torch": round(ms["torch"] / ms["triton"], 3),
        "max_abs_error": float(f"{error:.2e}"),
    }


def sweep_case(cols, dtype_name, settings):
    """Copy / softmax time ratio for each setting of the module constants (restored afterwards)."""
    x = make_input(cols, DTYPES[dtype_name])
    y = torch.empty_like(x)
    copy_ms = do_bench(lambda: y.copy_(x), return_mode="median")
    rows = []
    for setting in settings:
        saved = {name: getattr(reference, name) for name in setting}
        try:
            for name, value in setting.items():
                setattr(reference, name, value)
            check(x, dtype_name)
            ms = do_bench(lambda: reference.softmax_triton(x), return_mode="median")
            rows.append({"dtype": dtype_name, "cols": cols, **setting, "vs_copy": round(copy_ms / ms, 3)})
        except Exception as error:  # noqa: BLE001 - a config that fails to compile is reported, not fatal
            rows.append({"dtype": dtype_name, "cols": cols, **setting, "error": f"{type(error).__name__}: {error}"})
        finally:
            for name, value in saved.items():
                setattr(reference, name, value)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write one JSON line per case to this file")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sweep", action="store_true", help="time alternative launch configurations instead")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_softmax: needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}  "
          f"tensors {TENSOR_BYTES >> 20} MB")
    print(f"{'dtype':<5} {'rows x cols':<14} {'path':<8} {'triton GB/s':>11} {'copy GB/s':>10} {'torch GB/s':>10} "
          f"{'/copy':>6} {'/torch':>6}")
    sink = open(args.json, "w") if args.json else None  # noqa: SIM115 - written through the loop, closed after it
    failures = 0
    for dtype_name in DTYPES if not args.sweep else ():
        for cols in ONE_PASS_COLS + ONLINE_COLS:
            try:
                row = bench_case(cols, dtype_name, args.rounds)
            except Exception as error:  # noqa: BLE001 - report and go on to the next shape
                failures += 1
                print(f"{dtype_name:<5} cols={cols}: FAILED {type(error).__name__}: {error}", flush=True)
                continue
            print(f"{dtype_name:<5} {row['shape']:<14} {row['path']:<8} {row['triton_gbs']:>11.1f} "
                  f"{row['copy_gbs']:>10.1f} {row['torch_gbs']:>10.1f} {row['vs_copy']:>6.3f} {row['vs_torch']:>6.3f}",
                  flush=True)
            if sink:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
    if args.sweep:
        print("# sweep: copy time / softmax time per launch configuration")
        for dtype_name in DTYPES:
            for cols, settings in [(1024, ONE_PASS_SWEEP), (4096, ONE_PASS_SWEEP),
                                   (16384, [s for s in ONE_PASS_SWEEP if s["ONE_PASS_TILE_ELEMS"] == 16384]),
                                   (65536, ONLINE_SWEEP), (131072, ONLINE_SWEEP)]:
                for row in sweep_case(cols, dtype_name, settings):
                    print("sweep " + json.dumps(row), flush=True)
                    if sink:
                        sink.write(json.dumps({"sweep": True, **row}) + "\n")
                        sink.flush()
    if sink:
        sink.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
