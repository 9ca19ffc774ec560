"""Timing a kernel where it runs: the submission in its worker, the baselines in the checker.

`time_kernel` is what the checker asks the worker to run (`impl.run(time_kernel, ...)`, see
grader.perf.measure): the median of the calls by CUDA events with the L2 flushed and the inputs
refreshed between calls (`fresh_bench`, do_bench's loop with the refresh beside the flush), the first
call outside the timing so that compile and autotune are excluded. `bench_median` is
`triton.testing.do_bench`, which the checker times the baselines with, and `call_repeatedly` is the
worker's half of the wall window (grader.perf.wall_window). Without CUDA the wall clock stands in for
the events, so the same code paths run everywhere; CPU times are never graded.

The worker runs student code, which may patch do_bench, CUDA events or this module: its time is a
claim. One cheat the claim itself defends against is work on a side stream, which the timed stream's
events never see: the claim is at least the time from a call's start to a device-wide synchronize
(torch's own, captured before student code runs), less an empty call's, with a slack for the
synchronize that only the work the events saw earns (`synced_call_ms`, `span_floor_ms`). A back-to-back
span would charge host launch overhead the baseline never pays: the first H200 run of it put the
reference's 4096^3 matmul at 0.47 of cuBLAS instead of about 0.95.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import statistics
import sys
import time

from grader.perf.refresh import clone_inputs, refresh_inputs

# Captured at import so that code patching `time` later cannot change the checker's clock.
wall_clock = time.perf_counter
DEFAULT_WARMUP_MS = 25
# do_bench repeats for this long. Each side's quickest round counts, so a round need only pin its median
# down: on the H200 a reference's 18 perf checks held the GPU alone 30 s at 100 ms, every other
# submission on it waiting, with the rounds agreeing to 1-3%.
DEFAULT_REP_MS = 50
L2_FLUSH_BYTES = 256 << 20     # what do_bench zeroes between calls: larger than any L2
# Time spent on calls closed by a device-wide synchronize, the quickest of which counts: 10 ms is 50 of
# them for a 0.2 ms kernel (and never fewer than 5). At 20 ms the spans were 5.1 s of the 35 s a
# reference holds a shared H200 alone, every other submission on it waiting.
SYNC_SPAN_MS = 10.0
MAX_SYNC_CALLS = 200
SYNC_SLACK = 1.1               # the span may exceed the events' time by this factor for free (span_floor_ms)
SYNC_AGREE = 1.05              # a pass within this factor of the event timing needs no second look
SYNC_PASSES = 3
MAX_FRESH_CALLS = 100          # a median of 100 calls; each also pays a refresh and an L2 flush
MAX_FRESH_WARMUP_CALLS = 50
# The host queues timed calls ahead of the GPU: a pause on the GPU before every QUEUE_AHEAD_CALLS calls,
# doubled after a call whose start the GPU reached before the call was queued. Without it, a host slower
# to launch a call than the GPU is to refresh and flush lets the queue run dry between a call's start
# event and its kernel, and the idle time counts as the kernel's: on an H100 at two per GPU the
# reference's 4096^3 matmul read 0.25-0.39 ms by its events in rounds where cuBLAS read 0.19, and
# 0.183-0.189 in every round of nine copies with its calls queued ahead.
QUEUE_AHEAD_CALLS = 10
QUEUE_AHEAD_MS = 0.5
MAX_QUEUE_AHEAD_MS = 4.0
# The span to a device sync pauses the GPU before each of its calls for the same reason, from this and up
# to the most; host time the pause hides from the span is bounded by the wall window
# (grader.perf.wall_window), so the pause stays short.
SPAN_PAUSE_MS = 0.25
MAX_SPAN_PAUSE_MS = 2.0


def resolve_target(modules, target: str, inputs: tuple):
    """A zero-argument callable running the kernel once on `inputs`.

    `target` is either "module.function" (the student's function, called as function(*inputs)) or
    "grader.some.module:factory", a harness function called as factory(modules, *inputs) that returns
    the zero-argument callable (for work that needs setup, like a forward before a timed backward).
    """
    if ":" in target:
        module_name, factory_name = target.split(":", 1)
        if not module_name.startswith("grader."):
            raise ValueError(f"timing target {target!r}: factories must live in grader/")
        factory = getattr(importlib.import_module(module_name), factory_name)
        return factory(modules, *inputs)
    module_name, _, function_name = target.partition(".")
    if not function_name:
        raise ValueError(f"timing target {target!r}: expected 'module.function' or 'grader.x:factory'")
    function = getattr(getattr(modules, module_name), function_name)
    return lambda: function(*inputs)


def time_kernel(modules, target: str, inputs: tuple, warmup_ms: float = DEFAULT_WARMUP_MS,
                rep_ms: float = DEFAULT_REP_MS, seed: int | None = None):
    """Worker side: (ms of one call, the output of the last timed call, refreshes before that call, how the
    ms came about: {"events_ms": the calls' median, "synced_ms": the span to a device sync or None,
    "delayed_calls": timed calls the host may have delayed}).

    With a `seed` (and a "module.function" target), every timed call sees new values: the inputs are
    rolled and sign-flipped in place between calls (`refresh_inputs`), outside the timed part, so an
    output memoised on an address, a layout or a sample of values is never the right answer. The
    checker replays the same refreshes on its copy of the inputs and checks the last output.
    The time is max(median of the calls, span_floor_ms of it and the span to a device sync): work left
    on a side stream, which the timed stream's events never see, is in the span.
    """
    began = wall_clock()
    fresh = seed is not None and ":" not in target
    if fresh:
        inputs = clone_inputs(inputs)   # ours to refresh, whatever memory the transport mapped them in
    step = resolve_target(modules, target, inputs)
    cloned = wall_clock()
    last = [step()]                # compile and autotune happen here, outside the timing
    first = wall_clock()
    count = [0]

    def refresh():
        if fresh:
            count[0] += 1
            refresh_inputs(inputs, seed, count[0])

    def timed():
        last[0] = step()

    milliseconds, delayed = fresh_bench(timed, refresh, warmup_ms, rep_ms)
    benched = wall_clock()
    synced = synced_call_ms(timed, refresh, milliseconds)
    if os.environ.get("GRADER_TIMING_DEBUG"):   # staff diagnosis: which measure decides, and what took how long
        print(f"timing {target}: events {milliseconds:.4f} ms ({delayed} calls delayed by the host), to a "
              f"device sync {synced} ms; wall ms: clone "
              f"{(cloned - began) * 1e3:.1f}, first call {(first - cloned) * 1e3:.1f}, bench "
              f"{(benched - first) * 1e3:.1f}, sync span {(wall_clock() - benched) * 1e3:.1f}", file=sys.stderr)
    account = {"events_ms": float(milliseconds), "synced_ms": None if synced is None else float(synced),
               "delayed_calls": delayed}
    milliseconds = claimed_ms(milliseconds, synced)
    device_synchronize()           # the output is complete on every stream before it leaves
    return float(milliseconds), last[0], count[0], account


def claimed_ms(events_ms: float, synced_ms: float | None) -> float:
    """What a call's time is claimed to be: its events' median, raised to the span's floor where a span
    was measured (on a GPU)."""
    return events_ms if synced_ms is None else max(events_ms, span_floor_ms(events_ms, synced_ms))


def span_floor_ms(events_ms: float, synced_ms: float) -> float:
    """The least a call may count for, given its span to a device-wide synchronize: the span less
    SYNC_SLACK - 1 of the work its events saw. The slack absorbs the synchronize's wake-up around honest
    work (H100: spans 1.01-1.08x the events); work hidden from the events, on a side stream, gets none,
    so a call whose events see nothing counts for its whole span."""
    return synced_ms - (SYNC_SLACK - 1) * events_ms


def fresh_bench(call, refresh, warmup_ms: float = DEFAULT_WARMUP_MS,
                rep_ms: float = DEFAULT_REP_MS) -> tuple[float, int]:
    """(median ms of call(), timed calls the host may have delayed), with refresh() and (on a GPU) an L2
    flush before each call, both untimed.

    This is do_bench's loop (per-call CUDA events, L2 flushed) with the refresh beside the flush, and the
    calls queued ahead of the GPU (`_event_times`). Without CUDA the wall clock stands in through
    bench_median, refresh included (CPU times are never graded).
    """
    import torch

    if not torch.cuda.is_available():
        def refreshed():
            refresh()
            call()
        return bench_median(refreshed, warmup_ms, rep_ms), 0
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    device_synchronize()
    estimate, _ = _event_times(call, refresh, flush, 5)
    per_call = max(statistics.median(estimate), 1e-3)
    # Capped call counts: each call also pays a refresh and a flush (~0.5 ms for 256 MB inputs), and this
    # runs while the GPU is held alone; 200 samples pin a median down well enough.
    warm = clamp(math.ceil(warmup_ms / per_call), 1, MAX_FRESH_WARMUP_CALLS)
    _event_times(call, refresh, flush, warm)
    times, delayed = _event_times(call, refresh, flush, clamp(math.ceil(rep_ms / per_call), 5, MAX_FRESH_CALLS))
    return statistics.median(times), delayed


def _event_times(call, refresh, flush, n, event=None, pause=None) -> tuple[list[float], int]:
    """(each of n calls' ms by its events, how many the host may have delayed).

    A call is delayed when the GPU had reached its start event before the host had queued its end: the
    GPU may then have idled inside the call's events, waiting for the host. Each such call doubles the
    pause that lets the host queue the next QUEUE_AHEAD_CALLS calls before the GPU gets to them.
    """
    event = event or _timing_event
    pause = pause or gpu_pause
    starts = [event() for _ in range(n)]
    ends = [event() for _ in range(n)]
    ahead_ms, delayed = QUEUE_AHEAD_MS, 0
    for index, (start, end) in enumerate(zip(starts, ends)):
        if index % QUEUE_AHEAD_CALLS == 0:
            pause(ahead_ms)
        refresh()
        flush.zero_()
        start.record()
        call()
        end.record()
        if start.query():
            delayed += 1
            ahead_ms = min(2 * ahead_ms, MAX_QUEUE_AHEAD_MS)
    device_synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)], delayed


SLEEP_CALIBRATION_CYCLES = 2_000_000


def gpu_pause(ms: float) -> None:
    """Keep the current stream busy for about `ms` without touching memory (torch's spin kernel)."""
    import torch

    torch.cuda._sleep(int(ms * _sleep_cycles_per_ms()))


@functools.cache
def _sleep_cycles_per_ms() -> float:
    """The spin kernel's cycles per ms, timed after an untimed launch: the first launch loads the kernel's
    module, and timing it would make every later pause a fraction of its length."""
    import torch

    torch.cuda._sleep(1000)
    device_synchronize()
    start, end = _timing_event(), _timing_event()
    start.record()
    torch.cuda._sleep(SLEEP_CALIBRATION_CYCLES)
    end.record()
    end.synchronize()
    return SLEEP_CALIBRATION_CYCLES / max(start.elapsed_time(end), 1e-3)


def synced_call_ms(call, refresh, per_call_ms: float) -> float | None:
    """Quickest ms of call() up to a device-wide synchronize, less that synchronize's own cost (None on
    the CPU). Work the call left on a side stream, which the timed stream's events never see, is inside.

    Each sample (`_quickest_span_ms`): a pause on the GPU, refresh, flush L2, start event, call,
    synchronize every stream, end event. The pause lets the host queue the call before the GPU reaches
    the start event, so the host's launch is not charged, as do_bench's events do not charge it; the
    wake-up of the synchronize and the end event's launch are, and the same loop around an empty call
    measures them. The quickest sample, not the median: every sample ends at a device-wide synchronize,
    so hidden work is in each one, while a host descheduled by other submissions' compiles (`--per-gpu`)
    only ever adds to some. On the H200 the median put a correct matmul at 0.66 of cuBLAS in half its
    rounds beside two compiling neighbours, against 1.01 by its events.
    """
    if not cuda_available():
        return None
    import torch

    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda") if torch.cuda.is_available() else None
    n = clamp(math.ceil(SYNC_SPAN_MS / max(per_call_ms, 1e-3)), 5, MAX_SYNC_CALLS)
    empty = _quickest_span_ms(lambda: None, lambda: None, flush, n, pause=lambda ms: None)
    # A pass that disagrees with the event timing is measured again and the quickest pass kept: on the
    # H200 a worker's first pass ran ~40% slow while later ones matched the events to 2%, whereas work
    # hidden on a side stream shows in every pass.
    best = math.inf
    for _ in range(SYNC_PASSES):
        best = min(best, max(0.0, _quickest_span_ms(call, refresh, flush, n) - empty))
        if best <= per_call_ms * SYNC_AGREE:
            break
    return best


def _quickest_span_ms(call, refresh, flush, n, event=None, pause=None, synchronize=None) -> float:
    """The quickest of n spans from call()'s start event to an event recorded after a device-wide
    synchronize. A sample whose start the GPU reached before the call was queued doubles the pause before
    the next, up to MAX_SPAN_PAUSE_MS."""
    event, pause = event or _timing_event, pause or gpu_pause
    synchronize = synchronize or device_synchronize
    samples, pause_ms = [], SPAN_PAUSE_MS
    for _ in range(n):
        pause(pause_ms)
        refresh()
        if flush is not None:
            flush.zero_()
        start, end = event(), event()
        start.record()
        call()
        if start.query():
            pause_ms = min(2 * pause_ms, MAX_SPAN_PAUSE_MS)
        synchronize()
        end.record()
        synchronize()
        samples.append(start.elapsed_time(end))
    return min(samples)


def _timing_event():
    import torch

    return torch.cuda.Event(enable_timing=True)


def warm_up(modules, target: str, inputs: tuple) -> None:
    """Worker side: one untimed call, so compiling and autotuning happen before the GPU is held alone."""
    resolve_target(modules, target, inputs)()
    synchronize()


def release_cached_memory(modules) -> None:
    """Either side: hand the memory a perf check used back to the GPU, for the other submissions on it.
    Tensors only cycles still hold go first; then blocks lent to the other process over CUDA IPC, which
    stay allocated here until collected; then the caching allocator's free blocks."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.ipc_collect()
        torch.cuda.empty_cache()


_MARKER: list = []   # memory held between hold_marker and release_marker (grader.perf.worker_memory)


def hold_marker(modules, nbytes: int) -> bool:
    """Worker side, before any student code: take `nbytes` of GPU memory and keep them, so that the checker
    finds this process in the driver's list by the step it makes there (grader.perf.worker_memory)."""
    import torch

    _MARKER.append(torch.empty(int(nbytes), dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    return True


def release_marker(modules) -> bool:
    """Worker side: hand the marker's memory back to the driver."""
    import torch

    _MARKER.clear()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return True


def alloc_retries(modules) -> int:
    """Either side: how often this process's caching allocator found the GPU's memory short, freed its
    cache (synchronising the device) and tried again. Inside a timing that is a stall no kernel caused."""
    import torch

    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.memory_stats().get("num_alloc_retries", 0))


def call_repeatedly(modules, target: str, input_sets: list, calls: int):
    """Worker side of the wall-clock window: `calls` calls cycling over the sets, then a synchronize.

    Returns the last output computed for each input set.
    """
    steps = [resolve_target(modules, target, tuple(inputs)) for inputs in input_sets]
    outputs = [None] * len(steps)
    for index in range(calls):
        outputs[index % len(steps)] = steps[index % len(steps)]()
    synchronize()
    return outputs


def bench_median(fn, warmup_ms: float = DEFAULT_WARMUP_MS, rep_ms: float = DEFAULT_REP_MS) -> float:
    """Median ms of fn() by triton.testing.do_bench (L2 flushed before each rep).

    Without CUDA (CPU tests, Triton's interpreter) there is no L2 to flush and no events: the median of
    wall-clock calls stands in, so the same code paths run everywhere.
    """
    import torch

    if not torch.cuda.is_available():
        return _wall_clock_median(fn, rep_ms)
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def _wall_clock_median(fn, rep_ms: float, min_calls: int = 3, max_calls: int = 1000) -> float:
    fn()
    times = []
    while len(times) < min_calls or (sum(times) < rep_ms and len(times) < max_calls):
        start = wall_clock()
        fn()
        times.append((wall_clock() - start) * 1e3)
    return statistics.median(times)


def synchronize() -> None:
    device_synchronize()


_captured_sync = None


def capture_device_sync() -> None:
    """Keep torch's own device-wide synchronize, before any student code can rebind it (the worker calls
    this at start-up; code patching torch.cuda.synchronize later does not reach this reference)."""
    global _captured_sync
    if _captured_sync is not None:
        return
    import torch

    if not torch.cuda.is_available():
        _captured_sync = lambda: None  # noqa: E731
        return
    raw, lazy_init = getattr(torch._C, "_cuda_synchronize", None), getattr(torch.cuda, "_lazy_init", None)
    if raw is None or lazy_init is None:     # another torch layout: its public function, kept as it is now
        _captured_sync = torch.cuda.synchronize
        return

    def sync():
        lazy_init()
        raw()

    _captured_sync = sync


def device_synchronize() -> None:
    """Wait for every stream of this process's device."""
    capture_device_sync()
    _captured_sync()


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def clamp(value, low, high):
    return max(low, min(high, int(value)))
