"""On a GPU: what slows the host of an honest kernel's timed calls?

Times the reference's 4096^3 matmuls with the worker's own timing function (grader.perf.in_worker.time_kernel,
in this process, pinned to one core as the grader pins a perf check's rounds) against cuBLAS timed as
the checker times it, under each load in LOADS:
  idle         nothing else runs;
  python       Python work and memory traffic on every other core, never sleeping;
  compile      Triton compiles (LLVM and ptxas, as in a class's compile storm) on every other core;
  compile-smt  the same, sparing the timed core's SMT siblings;
  shared-core  one Python burner on the timed core itself.
Neighbours on the GPU that a batch has and no lock covers (none launch kernels inside a timing round
but `unlocked`, which shows what one that did would cost):
  contexts     eight processes starting CUDA, taking 1 GiB and exiting, over and over (workers starting);
  allocations  four processes taking and handing back 2 GiB of GPU memory, over and over;
  smi          the proofs' nvidia-smi samplers (memory every 0.5 s, processes every 1 s);
  unlocked     one process queueing 50 ms of matmuls every 200 ms, as a neighbour's undrained queue would.
For each it also times the wall window (grader.perf.wall_window) of the online softmax on
512 x 262144 bf16, as in a perf check: 4 sets, 100 ms of calls, in this process and through CUDA IPC
to a child as the checker hands sets to its worker, and the child's fixed cost of 2 calls: H200, eight
references at 4 per GPU, one honest window ran 0.66 ms a call against 0.22 ms events in all three
passes while six checking runs started.
For each it prints the host's time to launch one call (the part the timing would be charged if the GPU
reached a call's start event before the call was queued), then the median and worst over ROUNDS timings
of the events and the span to a device sync (the worker's account, with its count of calls the host may
have delayed), and of the ratio: by each round's own claim, and as graded
(grader.perf.record.graded_claims). Each is timed twice: with the calls queued ahead of the GPU, as
the worker times them, and launched as do_bench launches them (in_worker's pauses set to 0).

The window on the H200 (ms a call, events 0.217-0.234): in-process 0.215-0.234 under every
load; through IPC 0.218-0.220 idle, 0.22-0.45 with contexts starting, 0.37-0.43 with allocations,
and the 2-call pass, all fixed cost, 1.8 ms idle, 10-47 ms and 70-101 ms under those two loads. So
what a window pass loses to neighbours is the transport's CUDA IPC opens and closes, which wait on
other processes' driver memory operations; the calls themselves are not slowed.

No CPU load slowed anything, on either GPU node (16 cores each, no SMT):
  H200: launches 0.07-0.11 ms, events 0.186-0.195 ms, spans 0.185-0.198 ms, ratios 0.98-1.04;
  H100 (idle, compile, shared-core, compile-smt; queued ahead or not): launches 0.14-0.21 ms, events
  0.184-0.197 ms, spans 0.184-0.201 ms, ratios 0.95-1.01 at the worst.
What slowed honest matmuls in a class is not CPU load as such. In a class the GPU reached more calls'
start events before the host had queued them (up to 10 of 100 calls a round, against 0-2 here idle),
and the events read clean once the calls were queued ahead (docs/perf-checks.md, "Calls queued ahead
of the GPU").

Usage: PYTHONPATH=. python scripts/investigations/host_lag_check.py [LOAD ...]   (default: all of LOADS)
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton.testing

from grader.perf import in_worker, record, wall_window
from grader.worker.modules import Modules, resolve

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 5
LOADS = ("idle", "compile", "shared-core", "compile-smt", "python", "contexts", "allocations", "smi", "unlocked")


def burn_python(stop) -> None:
    """Interpreter work and memory traffic, never sleeping."""
    import numpy

    block = numpy.ones(8 << 20)
    table: dict = {}
    while not stop.is_set():
        for index in range(20_000):
            table[index % 4096] = str(index)
        block = block[::-1].copy()


def burn_compile(stop) -> None:
    """Triton compiles without end: a new constant each time, so the cache never answers."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="lag-cache-")
    import triton
    import triton.language as tl

    @triton.jit
    def scaled_sum(x, out, n, scale: tl.constexpr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        values = tl.load(x + offsets, mask=inside, other=0.0)
        tl.store(out + offsets, tl.exp(values * scale) + tl.sum(values, axis=0), mask=inside)

    x = torch.empty(1024, device="cuda")
    step = 0
    while not stop.is_set():
        step += 1
        scaled_sum.warmup(x, x, 1024, scale=float(step) + 0.5, BLOCK=1024, grid=(1,))


def burn_contexts(stop) -> None:
    """A CUDA context started, 1 GiB taken and the process gone, over and over: workers starting."""
    import subprocess

    start = "import torch; x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize()"
    while not stop.is_set():
        subprocess.run([sys.executable, "-c", start], check=False)


def burn_allocations(stop) -> None:
    """2 GiB of GPU memory taken and handed back to the driver, over and over: no kernel launched."""
    while not stop.is_set():
        block = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        del block
        torch.cuda.empty_cache()


def burn_smi(stop) -> None:
    """The samplers scripts/measure/gpu_proofs.sh runs beside a batch."""
    import subprocess

    queries = (["--query-gpu=memory.used", "-lms", "500"], ["--query-compute-apps=pid,used_memory", "-lms", "1000"])
    samplers = [subprocess.Popen(["nvidia-smi", *query, "--format=csv,noheader,nounits"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for query in queries]
    stop.wait()
    for sampler in samplers:
        sampler.kill()


def burn_unlocked(stop) -> None:
    """50 ms of matmuls queued every 200 ms and never waited for: a neighbour whose queue outlives its hold."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(250):
            a @ a
        time.sleep(0.2)


def siblings(core: int) -> set[int]:
    try:
        text = Path(f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list").read_text()
    except OSError:
        return {core}
    found: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


def launch_ms(step, calls: int = 30) -> float:
    """Median wall ms of the host's launch of one call, each from an idle GPU."""
    samples = []
    for _ in range(calls):
        in_worker.device_synchronize()
        began = time.perf_counter()
        step()
        samples.append((time.perf_counter() - began) * 1e3)
    in_worker.device_synchronize()
    return statistics.median(samples)


def measure(modules, dtype, label: str) -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    b = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    modules.matmul.matmul(a, b)
    launch = launch_ms(lambda: modules.matmul.matmul(a, b))
    cublas_launch = launch_ms(lambda: torch.matmul(a, b))
    for queued_ahead in (False, True):
        rounds = []
        for seed in range(ROUNDS):
            with queue_ahead(queued_ahead):
                claim, _, _, account = in_worker.time_kernel(modules, "matmul.matmul", (a, b), seed=seed)
            baseline = triton.testing.do_bench(lambda: torch.matmul(a, b))
            rounds.append(record.Round(claim, {"cuBLAS": baseline}, wall_ms=0.0, account=account))
        report(rounds, f"{label} {str(dtype).split('.')[-1]} {'queued ahead' if queued_ahead else 'as do_bench'}",
               f"launch {launch:.3f} ms (cuBLAS {cublas_launch:.3f})")


PAUSES = ("QUEUE_AHEAD_MS", "MAX_QUEUE_AHEAD_MS", "SPAN_PAUSE_MS", "MAX_SPAN_PAUSE_MS")


@contextlib.contextmanager
def queue_ahead(on: bool):
    """The worker's calls and span samples queued ahead of the GPU (in_worker's pauses), or, with every
    pause 0, launched as do_bench launches them."""
    kept = {name: getattr(in_worker, name) for name in PAUSES}
    if not on:
        for name in PAUSES:
            setattr(in_worker, name, 0.0)
    try:
        yield
    finally:
        for name, value in kept.items():
            setattr(in_worker, name, value)


def report(rounds, label: str, launch: str) -> None:
    def spread(values, worst=max):
        return f"{statistics.median(values):.4f} worst {worst(values):.4f}"

    ratios = [r.baseline_ms["cuBLAS"] / r.submission_ms for r in rounds]
    graded = [r.baseline_ms["cuBLAS"] / ms for r, ms in zip(rounds, record.graded_claims(rounds))]
    delayed = [int(r.account.get("delayed_calls", 0)) for r in rounds]
    print(f"HOST-LAG {label}: {launch}; events {spread([r.account['events_ms'] for r in rounds])} "
          f"(calls delayed by the host per round: {' '.join(map(str, delayed))}), to a device sync "
          f"{spread([r.account['synced_ms'] for r in rounds])}; ratio by each round's claim {spread(ratios, min)}, "
          f"as graded {spread(graded, min)}", flush=True)


WINDOW_SHAPE = (512, 262144)
WINDOW_SETS = 4
WINDOW_PASSES = 8


def window_child(connection) -> None:
    """The worker's side of an IPC window: open the sets, call the kernel, synchronize, say done."""
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    modules = Modules(resolve(str(ROOT / "solutions")))
    while True:
        message = connection.recv()
        if message is None:
            return
        shared, calls = message
        sets = [(rebuild_cuda_tensor(*handle),) for handle in shared]
        in_worker.call_repeatedly(modules, "softmax.softmax_triton", sets, calls)
        del sets
        connection.send(True)


def measure_window(modules, label: str) -> None:
    from torch.multiprocessing.reductions import reduce_tensor

    def fresh():
        return [(torch.randn(*WINDOW_SHAPE, device="cuda", dtype=torch.bfloat16),) for _ in range(WINDOW_SETS)]

    sets = fresh()
    events = triton.testing.do_bench(lambda: modules.softmax.softmax_triton(sets[0][0]), return_mode="median")
    calls = max(2, round(wall_window.WALL_WINDOW_MS / events))
    here, there, fixed = [], [], []
    context = multiprocessing.get_context("spawn")
    parent, child_end = context.Pipe()
    child = context.Process(target=window_child, args=(child_end,), daemon=True)
    child.start()

    def through_ipc(count: int) -> float:
        copies = [inputs[0].clone() for inputs in fresh()]   # the checker hands over copies it owns
        torch.cuda.synchronize()
        began = time.perf_counter()
        parent.send(([reduce_tensor(copy)[1] for copy in copies], count))
        parent.recv()
        torch.cuda.synchronize()
        return (time.perf_counter() - began) * 1e3

    try:
        through_ipc(2)                          # the child's start-up and first compile, untimed
        for _ in range(WINDOW_PASSES):
            sets = fresh()
            torch.cuda.synchronize()
            began = time.perf_counter()
            in_worker.call_repeatedly(modules, "softmax.softmax_triton", sets, calls)
            here.append((time.perf_counter() - began) * 1e3 / calls)
            there.append(through_ipc(calls) / calls)
            fixed.append(through_ipc(2))
    finally:
        parent.send(None)
        child.join(timeout=10)
    print(f"HOST-WINDOW {label}: events {events:.4f} ms, {calls} calls on {WINDOW_SETS} sets; ms a call here "
          + " ".join(f"{ms:.3f}" for ms in here) + "; through IPC " + " ".join(f"{ms:.3f}" for ms in there)
          + "; IPC 2 calls (ms) " + " ".join(f"{ms:.1f}" for ms in fixed), flush=True)


def burners(load: str, timed: int, cores: list[int]) -> list[tuple[object, set[int]]]:
    """(burner, the cores it runs on) for `load`."""
    others = [core for core in cores if core != timed]
    if load == "python":
        return [(burn_python, {core}) for core in others]
    if load == "compile":
        return [(burn_compile, {core}) for core in others]
    if load == "compile-smt":
        return [(burn_compile, {core}) for core in others if core not in siblings(timed)]
    if load == "shared-core":
        return [(burn_python, {timed})]
    neighbours = {"contexts": (burn_contexts, 8), "allocations": (burn_allocations, 4), "smi": (burn_smi, 1),
                  "unlocked": (burn_unlocked, 1)}
    if load in neighbours:
        target, count = neighbours[load]
        return [(target, {core}) for core in others[:count]]
    return []


def run_load(modules, load: str, timed: int, cores: list[int]) -> None:
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    started = []
    for target, where in burners(load, timed, cores):
        process = context.Process(target=target, args=(stop,), daemon=True)
        process.start()
        os.sched_setaffinity(process.pid, where)
        started.append(process)
    time.sleep(8.0 if "compile" in load else 2.0)   # compiles take seconds to reach LLVM and ptxas
    try:
        for dtype in (torch.bfloat16, torch.float16):
            measure(modules, dtype, f"{load}({len(started)})")
        measure_window(modules, f"{load}({len(started)})")
    finally:
        stop.set()
        for process in started:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    loads = sys.argv[1:] or list(LOADS)
    cores = sorted(os.sched_getaffinity(0))
    timed = cores[0]                      # the grader keeps the first core for timing (grader.perf.cores)
    print(f"HOST-LAG cores {len(cores)}, timed on {timed}, its SMT siblings {sorted(siblings(timed))}", flush=True)
    os.sched_setaffinity(0, {timed})
    in_worker.capture_device_sync()
    modules = Modules(resolve(str(ROOT / "solutions")))
    for load in loads:
        run_load(modules, load, timed, cores)
    return 0


if __name__ == "__main__":
    sys.exit(main())
