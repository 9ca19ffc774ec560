"""Stop the worker (and every process it started) while the checker times its baselines.

Student code may leave a thread behind that loads the GPU, say saturating HBM, whenever the checker
times the baseline, so that the baseline looks slow and the ratio good. SIGSTOP stops every thread of
the worker and of its descendants; kernels they queued before still run, so the checker waits until a
short copy probe runs at half the GPU's norm or more (at most QUIET_WAIT_S) before it times anything.
SIGCONT in every case afterwards, even when the timing fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from grader.perf.environment import descendants

QUIET_WAIT_S = 2.0
QUIET_FRACTION = 0.5          # probe bandwidth at or above this fraction of the norm: the GPU is ours
PROBE_BYTES = 256 << 20       # 4 copies of 256 MB: long enough (~0.5 ms) that launches do not dominate


@contextlib.contextmanager
def paused_worker(impl, kill=os.kill, quiet=None, settle=None):
    """Keep `impl`'s worker process tree stopped inside the block (no-op for an in-process impl)."""
    pid = getattr(impl, "worker_pid", None)
    if not isinstance(pid, int) or pid <= 1 or pid == os.getpid():
        yield []
        return
    stopped = []
    try:
        for _ in range(3):               # a child forked while we scanned is caught on the next pass
            new = [p for p in [pid, *descendants(pid)] if p not in stopped and p not in _ancestors()]
            if not new:
                break
            for target in new:
                try:
                    kill(target, signal.SIGSTOP)
                    stopped.append(target)
                except ProcessLookupError:
                    continue
        (settle or wait_until_stopped)(stopped)     # SIGSTOP lands asynchronously
        (quiet or wait_until_gpu_quiet)()
        yield stopped
    finally:
        for target in stopped:
            try:
                kill(target, signal.SIGCONT)
            except ProcessLookupError:
                continue
        rest = getattr(impl, "rest_worker", None)
        if rest is not None:
            rest()                       # no call is in flight: the worker's group stays stopped


def wait_until_stopped(pids: list[int], timeout_s: float = 0.5) -> None:
    """Return once every process in `pids` is in the stopped state (or gone), or after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        waiting = [pid for pid in waiting if _state(pid) not in ("T", "t", "X", "Z", None)]
        if waiting:
            time.sleep(0.001)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _ancestors() -> set[int]:
    """This process and its parents: never stopped, whatever the worker's pid claims."""
    chain, pid = set(), os.getpid()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return chain


def wait_until_gpu_quiet(clock=time.monotonic, sleep=time.sleep) -> bool:
    """Wait until work queued by the stopped processes has drained: a 256 MB copy runs at half the norm.
    True when it did within QUIET_WAIT_S (or there is no GPU or no norm to compare with)."""
    import torch

    if not torch.cuda.is_available():
        return True
    from grader.perf.environment import norm_for

    norm = norm_for(torch.cuda.get_device_name())
    if norm is None:
        return True
    source = torch.empty(PROBE_BYTES // 4, device="cuda")
    target = torch.empty_like(source)
    target.copy_(source)
    deadline = clock() + QUIET_WAIT_S
    while True:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(4):
            target.copy_(source)
        end.record()
        end.synchronize()
        gbs = 4 * 2 * PROBE_BYTES / (start.elapsed_time(end) * 1e-3) / 1e9
        if gbs >= QUIET_FRACTION * norm["copy_gbs"] or clock() >= deadline:
            return gbs >= QUIET_FRACTION * norm["copy_gbs"]
        sleep(0.01)
