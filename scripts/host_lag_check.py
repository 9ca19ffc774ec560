"""On a GPU: do busy cores slow an honest kernel's timed calls?

Times the reference's 4096^3 matmuls with the worker's own timing function (grader.timing.time_kernel,
in this process) against cuBLAS timed as the checker times it, alone and while BURNERS processes keep
the other cores busy (Python work and memory traffic, never sleeping). Prints, for each, the host's
time to queue one timed call, and the median and worst over ROUNDS timings of the claimed ms, of its
events and span to a device sync (the worker's account), and of the ratio.

Usage: PYTHONPATH=. python scripts/host_lag_check.py [BURNERS]   (default: every core but one)
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import triton.testing

from grader import timing
from grader.modules import Modules, resolve

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 7


def burn(stop) -> None:
    """A stand-in for a neighbour's compile: interpreter work and memory traffic, never sleeping."""
    import numpy

    block = numpy.ones(8 << 20)
    table: dict = {}
    while not stop.is_set():
        for index in range(20_000):
            table[index % 4096] = str(index)
        block = block[::-1].copy()


def host_ms_per_call(step, refresh, flush, calls: int = 40) -> float:
    """Wall ms the host takes to queue one timed call (refresh, flush, events, launch)."""
    timing.device_synchronize()
    began = time.perf_counter()
    for _ in range(calls):
        refresh()
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
    queued = (time.perf_counter() - began) * 1e3 / calls
    timing.device_synchronize()
    return queued


def measure(modules, dtype, label: str) -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    b = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    flush = torch.empty(timing.L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    modules.matmul.matmul(a, b)
    host = host_ms_per_call(lambda: modules.matmul.matmul(a, b), lambda: timing.refresh_inputs((a, b), 1, 1), flush)
    claims, events, synced, ratios = [], [], [], []
    for seed in range(ROUNDS):
        claim, _, _, account = timing.time_kernel(modules, "matmul.matmul", (a, b), seed=seed)
        baseline = triton.testing.do_bench(lambda: torch.matmul(a, b))
        claims.append(claim)
        events.append(account["events_ms"])
        synced.append(account["synced_ms"])
        ratios.append(baseline / claim)
    spread = lambda values: f"{statistics.median(values):.4f} worst {max(values):.4f}"  # noqa: E731
    print(f"HOST-LAG {label} {str(dtype).split('.')[-1]}: host queues a call in {host:.3f} ms; claimed ms "
          f"median {spread(claims)} (events {spread(events)}, to a device sync {spread(synced)}); ratio median "
          f"{statistics.median(ratios):.3f} worst {min(ratios):.3f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    burners = int(sys.argv[1]) if len(sys.argv) > 1 else len(os.sched_getaffinity(0)) - 1
    timing.capture_device_sync()
    modules = Modules(resolve(str(ROOT / "solutions")))
    for dtype in (torch.bfloat16, torch.float16):
        measure(modules, dtype, "idle")
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    workers = [context.Process(target=burn, args=(stop,), daemon=True) for _ in range(burners)]
    for worker in workers:
        worker.start()
    time.sleep(2.0)
    try:
        for dtype in (torch.bfloat16, torch.float16):
            measure(modules, dtype, f"{burners}-burners")
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
