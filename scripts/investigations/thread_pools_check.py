"""What math libraries' thread pools cost checking runs that share a machine's cores.

Starts RUNS processes at once, each doing what the PyTorch FlashAttention's value checks do on the CPU
(the reference's tiled forward and backward at the GPU suite's shapes, fp32, bf16 and fp16), first
with the share of the cores the grader gives each (grader.grade.sizing.thread_pool_env), then with each
library's default pool (every core this process may use, as a checking run had before it was given
its share). Prints each process's seconds and the ratio of the slowest, default over share; the
default pools' processes are stopped after LIMIT_S, and the ratio is then a lower bound.

    PYTHONPATH=. python scripts/investigations/thread_pools_check.py [RUNS]   (default: 2 per core)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPEATS = 5
LIMIT_S = 120.0
CHILD = r"""
import sys, time, torch
sys.path.insert(0, "solutions")
import flash_attention
generator = torch.Generator().manual_seed(0)
start = time.perf_counter()
for _ in range({repeats}):
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        q, k, v = (torch.randn(2, 4, 256, 64, generator=generator).to(dtype).requires_grad_() for _ in range(3))
        flash_attention.FlashAttentionPyTorch.apply(q, k, v, True).float().sum().backward()
print(f"{{time.perf_counter() - start:.2f}} {{torch.get_num_threads()}}")
"""


def run_at_once(runs: int, pools: dict[str, str], pool_names) -> tuple[list[float], int]:
    """Seconds of each of `runs` processes started together with the `pools` environment (LIMIT_S for
    any not done by then), and the threads each had."""
    env = {name: value for name, value in os.environ.items() if name not in pool_names} | pools
    code = CHILD.format(repeats=REPEATS)
    children = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
                for _ in range(runs)]
    deadline, seconds, threads = time.monotonic() + LIMIT_S, [], 0
    for child in children:
        try:
            out, _ = child.communicate(timeout=max(0.0, deadline - time.monotonic()))
            took, threads = out.split()
            seconds.append(float(took))
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            seconds.append(LIMIT_S)
    return seconds, int(threads)


def main() -> None:
    os.chdir(Path(__file__).resolve().parents[2])
    sys.path.insert(0, os.getcwd())
    from grader.grade.sizing import THREAD_POOL_ENV, thread_pool_env

    cores = len(os.sched_getaffinity(0))
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2 * cores
    slowest = []
    for label, pools in (("the grader's share", thread_pool_env(cores, runs)), ("default pools", {})):
        seconds, threads = run_at_once(runs, pools, THREAD_POOL_ENV)
        slowest.append(max(seconds))
        cut = sum(took >= LIMIT_S for took in seconds)
        print(f"{label}: {runs} processes on {cores} cores, {threads or 'default'} threads each: "
              f"{min(seconds):.2f}-{slowest[-1]:.2f} s each" + (f", {cut} stopped at {LIMIT_S:.0f} s" if cut else ""),
              flush=True)
    bound = "at least " if slowest[1] >= LIMIT_S else ""
    print(f"slowest process, default pools over the share: {bound}{slowest[1] / slowest[0]:.1f}x")


if __name__ == "__main__":
    main()
