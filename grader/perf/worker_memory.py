"""The worker's GPU memory as the NVIDIA driver reports it to the checker: a figure no code in the
worker can forge (grader.perf.nvml reads it; SECURITY.md, "Worker claims").

`measure(impl, fn, *args)` starts a fresh worker that opens its CUDA context before any student code
runs (the worker imports the student's modules on its first call), and reads the driver's figure for
it then: the baseline. It runs the scenario `fn` once to import, compile and autotune, then again while
a checker thread samples the driver's figure about every millisecond: the peak. Whatever the student's
code holds by then (memory taken at import, a pool kept from the first call) is above the baseline,
so it counts against it.

Which processes are the worker's: the driver lists pids. Where they are this process's own (no pid
namespace, or a driver that translates them) the worker's pid is among them once its context is open.
Where they are the host's (an older driver, under the sandbox's pid namespace) the worker is what
appeared on the GPU after it started; the figures say which way was used. Either way, processes that
appear later (a child of the worker) count too, and the checker's own never does.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

SAMPLE_INTERVAL_S = 0.001
FINAL_TRIES = 3               # the reading after the call: a transient NVML error is retried
MIB = 2**20


class MemoryUnavailable(RuntimeError):
    """The driver's figure cannot be read or attributed here: the check is not run, never failed."""


class ReadingLost(AssertionError):
    """The driver's figure was readable before any student code ran and is not after the call: a failure,
    so that code cannot turn a check it would fail into one not run."""


@dataclass(frozen=True)
class WorkerMemory:
    """The driver's figures for one measured call, in bytes, and the worker's own answer (a claim)."""

    baseline: int          # the worker with its CUDA context open, before any student code ran
    peak: int              # the most it held while the measured call ran
    samples: int
    interval_ms: float     # mean time between samples
    attribution: str       # how the worker's processes were told apart from the others
    claim: object = None   # what the scenario returned in the worker: never trusted

    @property
    def extra(self) -> int:
        """Bytes above the CUDA context: the call's peak with everything held before it."""
        return self.peak - self.baseline

    def describe(self) -> str:
        return (f"{self.extra / MIB:.1f} MiB over a {self.baseline / MIB:.0f} MiB CUDA context (peak of "
                f"{self.samples} samples, one per {self.interval_ms:.2f} ms; {self.attribution})")


@dataclass(frozen=True)
class Attribution:
    """Which pids of a driver listing are the worker's: its own pid when NVML reports pids as this
    process sees them, and every process that appeared on the GPU since it started, but the checker."""

    before: frozenset      # pids on the GPU before the worker started
    worker: int | None     # the worker's pid, when the driver lists pids of this namespace
    checker: int | None
    how: str

    def counted(self, usage: dict) -> int:
        total = 0
        for pid, used in usage.items():
            if pid == self.worker or (pid not in self.before and pid != self.checker):
                if used is None:
                    raise MemoryUnavailable(f"the driver does not report the memory of process {pid}")
                total += used
        return total


def attribute(before: dict, after: dict, worker_pid: int, checker_pid: int) -> Attribution:
    """Tell the worker's processes from the rest, once its context is open and before student code ran:
    nothing the student writes can steer it."""
    if worker_pid in after:
        return Attribution(frozenset(before) - {worker_pid}, worker_pid, checker_pid,
                           f"the driver lists the worker as pid {worker_pid}")
    new = set(after) - set(before)
    if not new:
        raise MemoryUnavailable("the driver lists no process for the worker (pids of another pid namespace, "
                                "and nothing new on the GPU since the worker started)")
    # The checker's own pid means nothing in the driver's namespace: it is in `before` under its host pid.
    return Attribution(frozenset(before), None, None,
                       f"the driver reports pids of another pid namespace: counted the {len(new)} process"
                       f"{'es' if len(new) > 1 else ''} new on the GPU since the worker started")


class Sampler:
    """A checker thread that reads `read()` every `interval_s` while the block runs, and once more after
    it: `peak` is the largest reading. A reading that fails mid-way is counted in `failed`; the last one
    must succeed (FINAL_TRIES tries), else ReadingLost."""

    def __init__(self, read, interval_s: float = SAMPLE_INTERVAL_S, clock=time.monotonic):
        self._read, self._interval, self._clock = read, interval_s, clock
        self.peak, self.samples, self.failed = 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-memory-sampler", daemon=True)
        self._started = self._ended = 0.0

    def __enter__(self):
        self._started = self._clock()
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._ended = self._clock()
        if exc[0] is None:
            self._final()
        return False

    def _final(self) -> None:
        """The reading after the call (what it left held), which must succeed."""
        for attempt in range(FINAL_TRIES):
            try:
                self._record(self._read())
                return
            except (MemoryUnavailable, OSError, RuntimeError) as error:
                if attempt == FINAL_TRIES - 1:
                    raise ReadingLost(f"the GPU memory of the process running your code could not be read "
                                      f"after the call ({error}); it could before your code ran") from None
                time.sleep(0.01)

    @property
    def interval_ms(self) -> float:
        return 1000 * (self._ended - self._started) / max(self.samples - 1, 1)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._take()

    def _take(self) -> None:
        try:
            self._record(self._read())
        except (MemoryUnavailable, OSError, RuntimeError):
            self.failed += 1

    def _record(self, value: int) -> None:
        self.samples += 1
        self.peak = max(self.peak, value)


def open_reader():
    """The driver's per-process figures for the CUDA device this process and its worker use
    (grader.perf.nvml.GpuProcesses), or MemoryUnavailable."""
    from grader.perf import nvml

    try:
        import torch
    except ImportError:
        raise MemoryUnavailable("torch is not installed") from None
    if not torch.cuda.is_available():
        raise MemoryUnavailable("no CUDA device")
    # The checker's own context first: in the host's pid namespace it must be on the GPU before the worker.
    torch.cuda.synchronize()
    try:
        return nvml.open_gpu(_cuda_uuid(torch))
    except nvml.NvmlError as error:
        raise MemoryUnavailable(str(error)) from None


def _cuda_uuid(torch) -> str | None:
    try:
        return str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid) or None
    except (AttributeError, RuntimeError):
        return None


def _usage(reader) -> dict:
    try:
        return reader.usage()
    except RuntimeError as error:   # grader.perf.nvml.NvmlError
        raise MemoryUnavailable(f"NVML: {error}") from None


def measure(impl, fn, *args, reader=None, interval_s: float = SAMPLE_INTERVAL_S, **kwargs) -> WorkerMemory:
    """Run the scenario `fn(modules, *args, **kwargs)` twice in a fresh worker (`impl.start_fresh_worker`)
    and read the driver's figure for it around the second run. MemoryUnavailable when the driver's figure
    cannot be read or attributed here; anything the student's code does reaches the caller as it would
    from `impl.run`."""
    reader = reader if reader is not None else open_reader()
    before = _usage(reader)
    worker_pid = impl.start_fresh_worker(cuda_context=True)
    after = _usage(reader)
    attribution = attribute(before, after, worker_pid, os.getpid())
    baseline = attribution.counted(after)
    impl.run(fn, *args, **kwargs)                  # imports the student's modules, compiles, autotunes
    sampler = Sampler(lambda: attribution.counted(_usage(reader)), interval_s)
    with sampler:
        claim = impl.run(fn, *args, **kwargs)
    return WorkerMemory(baseline, max(sampler.peak, baseline), sampler.samples, sampler.interval_ms,
                        attribution.how, claim)
