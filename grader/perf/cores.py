"""Cores kept for timing: a perf check's rounds run where no neighbour's compile can take the CPU.

A Triton kernel's launch is Python on the host. On the H200, eight references at 4 per GPU had up to
45 processes runnable on 16 cores while the GPU's submissions compiled (LLVM and ptxas), and two
honest 0.19 ms bf16 matmuls were timed at 0.22-0.31 ms in their rounds, while cuBLAS, launched from
C++ in the same rounds, kept 0.19 ms. The likeliest cause: the host of a timed call is descheduled,
the GPU's queue runs dry, and the call's events take in the wait. Busy cores alone did not do it:
fifteen busy processes on the sixteen cores, one core left over, slowed nothing
(the staff repo's host-lag probe). Nor did 15 Triton compilers, or a busy process on the timed core
itself (the H200 grading log in the staff repo's history): these cores are kept as a precaution that
measurement has not shown to matter, and cost compiles one core per GPU.

So the runner keeps CORES_PER_GPU cores of each GPU out of every checking run's reach (taskset, before
bubblewrap, so that every process in the run inherits it), and names them to the run's checker in
CORES_ENV. While the checker holds its GPU alone for a perf check's rounds, its threads and its
worker's move onto those cores (`timing_cores`), and back afterwards. Only one run holds a GPU alone
at a time, so the cores are its own, among honest neighbours. Student code may widen its own
affinity onto them (an unprivileged call) and load them while a neighbour times, as it could load any
core before; SECURITY.md lists that as open.

The runner writes the variable (`env_value`), the checker reads it (`from_env`): this module owns it.
"""

from __future__ import annotations

import contextlib
import os
import shutil

CORES_ENV = "GRADER_TIMING_CORES"
# One is enough: the checker and its worker take turns (the worker launches the timed calls while its
# checker waits for the reply; the checker times the baselines while the worker is stopped).
CORES_PER_GPU = 1
MIN_COMPILE_CORES = 2          # fewer left for everything else: no cores are kept


def cores_needed(gpu_count: int) -> int:
    """The fewest cores on which a batch on `gpu_count` GPUs keeps its timing cores."""
    return CORES_PER_GPU * gpu_count + MIN_COMPILE_CORES


def plan(cores: list[int], gpus: list) -> tuple[list[int], dict]:
    """(the cores every checking run gets, {gpu: the cores kept for its timing}) for a batch on `gpus`;
    ([], {}) when the machine has too few cores to keep any."""
    cores, gpus = sorted(cores), list(dict.fromkeys(gpu for gpu in gpus if gpu is not None))
    if not gpus or len(cores) < cores_needed(len(gpus)):
        return [], {}
    kept = CORES_PER_GPU * len(gpus)
    return cores[kept:], {gpu: cores[i * CORES_PER_GPU:(i + 1) * CORES_PER_GPU] for i, gpu in enumerate(gpus)}


def launch_prefix(cores: list[int]) -> list[str]:
    """The argv prefix that starts a checking run on `cores` ([] without them or without taskset)."""
    taskset = shutil.which("taskset")
    if not cores or taskset is None:
        return []
    return [taskset, "--cpu-list", ",".join(str(core) for core in sorted(cores))]


def env_value(cores: list[int]) -> str:
    return ",".join(str(core) for core in sorted(cores))


def from_env(env=None) -> set[int]:
    """The cores kept for this run's timing, or an empty set (none kept, or a value not understood)."""
    value = (os.environ if env is None else env).get(CORES_ENV, "")
    try:
        return {int(core) for core in value.split(",") if core.strip()}
    except ValueError:
        return set()


@contextlib.contextmanager
def timing_cores(impl, cores: set[int] | None = None):
    """Inside the block, this process's threads and those of `impl`'s worker (and its children) run on
    the kept cores; each goes back to its own cores after. A no-op without kept cores, and for any
    thread that cannot be moved (gone, or not ours)."""
    cores = from_env() if cores is None else cores
    moved: list[tuple[int, set[int]]] = []
    if cores:
        pids = [os.getpid()]
        worker = getattr(impl, "worker_pid", None)
        if isinstance(worker, int) and worker > 1 and worker != os.getpid():
            from grader.perf.environment import descendants

            pids += [worker, *descendants(worker)]
        for thread in (tid for pid in pids for tid in _threads(pid)):
            with contextlib.suppress(OSError):
                before = os.sched_getaffinity(thread)
                os.sched_setaffinity(thread, cores)
                moved.append((thread, before))
    try:
        yield bool(moved)
    finally:
        for thread, before in moved:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread, before)


def _threads(pid: int) -> list[int]:
    """Every thread of `pid` (affinity is per thread), or just `pid` where /proc does not say."""
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return [pid]
