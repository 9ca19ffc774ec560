"""The worker's GPU memory as the NVIDIA driver reports it to the checker: a figure no code in the
worker can forge (grader.perf.nvml reads it; SECURITY.md, "Worker claims").

`measure(impl, fn, *args)` starts a fresh worker that opens its CUDA context before any student code
runs (the worker imports the student's modules on its first call), and reads the driver's figure for
it then: the baseline. It runs the scenario `fn` once to import, compile and autotune, then again while
a checker thread samples the driver's figure about every millisecond: the peak. Whatever the student's
code holds by then (memory taken at import, a pool kept from the first call) is above the baseline,
so it counts against it.

Which processes are the worker's: the driver lists pids. Where they are this process's own (no pid
namespace, or a driver that translates them) the worker's pid is among them once its context is open,
and its children, found in /proc, count with it. Where they are the host's (under the sandbox's pid
namespace) the worker takes a marker, a random number of MiB, in a harness call before any student code
runs, and hands it back: the one process whose figure rose and fell by exactly that much is the worker.
Only the worker's processes count, never another submission's that starts on the same GPU meanwhile.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

SAMPLE_INTERVAL_S = 0.001
FINAL_TRIES = 3               # the reading after the call: a transient NVML error is retried
MIB = 2**20
# The marker: a random whole number of 2 MiB steps (the caching allocator's rounding) in this range,
# which no other process on the GPU makes by chance in the same half second.
MARKER_STEPS = (32, 160)
MARKER_TOLERANCE = MIB


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
    """Which pids of a driver listing are the worker's: `pids()` gives them (the worker and, where the
    driver lists this namespace's pids, its children), and `how` says how they were found."""

    pids: object           # () -> set of pids, as the driver lists them
    how: str

    def counted(self, usage: dict) -> int:
        total = 0
        for pid in self.pids() & set(usage):
            if usage[pid] is None:
                raise MemoryUnavailable(f"the driver does not report the memory of process {pid}")
            total += usage[pid]
        return total


def attribute(listed: dict, worker_pid: int, find_by_marker) -> Attribution:
    """Tell the worker's processes from the rest, once its context is open and before student code ran:
    nothing the student writes can steer it. `find_by_marker()` gives the worker's pid as the driver
    lists it, where that is not `worker_pid` (pids of another namespace)."""
    if worker_pid in listed:
        from grader.perf.environment import descendants

        return Attribution(lambda: {worker_pid, *descendants(worker_pid)},
                           f"the driver lists the worker as pid {worker_pid}")
    host_pid, marker = find_by_marker()
    return Attribution(lambda: {host_pid},
                       f"the driver reports pids of another pid namespace: the worker is its pid {host_pid}, "
                       f"found by a {marker / MIB:.0f} MiB marker it held before any student code ran")


def marked_pid(before: dict, holding: dict, after: dict, marker: int) -> int:
    """The one pid whose figure rose by `marker` bytes and fell back by as much, or MemoryUnavailable."""
    def stepped(low, high):
        return low is not None and high is not None and abs(high - low - marker) <= MARKER_TOLERANCE

    found = [pid for pid, held in holding.items() if stepped(before.get(pid), held) and stepped(after.get(pid), held)]
    if len(found) != 1:
        raise MemoryUnavailable(f"the driver lists {len(found)} processes that took and gave back the worker's "
                                f"{marker / MIB:.0f} MiB marker, not one: the worker cannot be told apart")
    return found[0]


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
    # The checker's own context first: the device's UUID names the GPU to the driver.
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
    worker_pid = impl.start_fresh_worker(cuda_context=True)
    listed = _usage(reader)
    attribution = attribute(listed, worker_pid, lambda: _find_by_marker(impl, reader, listed))
    baseline = attribution.counted(_usage(reader))
    impl.run(fn, *args, **kwargs)                  # imports the student's modules, compiles, autotunes
    sampler = Sampler(lambda: attribution.counted(_usage(reader)), interval_s)
    with sampler:
        claim = impl.run(fn, *args, **kwargs)
    return WorkerMemory(baseline, max(sampler.peak, baseline), sampler.samples, sampler.interval_ms,
                        attribution.how, claim)


def _find_by_marker(impl, reader, before: dict) -> tuple[int, int]:
    """(the worker's pid as the driver lists it, the marker's bytes): harness calls that touch no student
    module, so no student code has run yet."""
    from grader.perf.in_worker import hold_marker, release_marker

    marker = 2 * MIB * random.SystemRandom().randrange(*MARKER_STEPS)
    impl.run_harness(hold_marker, marker)
    holding = _usage(reader)
    impl.run_harness(release_marker)
    return marked_pid(before, holding, _usage(reader), marker), marker
