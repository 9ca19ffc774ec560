"""One GPU shared by several submissions' checking runs, with every timing round alone on it.

The runner opens two lock files per GPU (in its own scratch, which the sandbox masks) and hands each
checking run on that GPU its own open file descriptions of them, by fd number in GRADER_GPU_LOCK_FDS.
Only checkers take the locks, never workers (they run student code and could hold a lock forever):
- `shared()` around every call into the worker: ordinary GPU work of N submissions overlaps;
- `exclusive()` around a perf check's timing rounds: while it is held, no other submission's checker
  is inside a worker call, so no other submission's kernel is launched (compiles and CPU work go on);
- `set_aside()` while the worker compiles a Triton kernel (it says so, grader.worker.compile_notices): a compile is CPU
  work of seconds, and a hold kept through it made every timing round of the other submissions wait
  for it, which serialised a shared GPU (four references at --per-gpu 4 took longer than one after
  another). The hold is taken again, through the turnstile, before the worker may launch anything.
  Timing rounds keep their exclusive hold through a compile; a perf check's warm-up lends it. A
  compile over within LEND_AFTER_S, a load from Triton's cache, is not lent (`kept_through_compile`):
  taking the hold back would cost a wait behind the turnstile, for milliseconds of work.

A hold ends only once the GPU work it covered has: CUDA queues kernels and returns, so a checker's
fixture or reference maths, or a worker's kernels before a compile, could still run after the lock
moved on, inside a neighbour's timing rounds. Each release first drains the releasing process's
device queue (`drain`); the worker drains before it says it compiles.

flock(2) alone lets a stream of shared holders starve an exclusive waiter, so a second file, the
turnstile, is taken briefly by everyone: a writer keeps it while waiting for the main lock, which
stops new readers from queueing up ahead of it. Every process holds at most one mode at a time (a
shared request inside this process's exclusive hold is a no-op), so no cycle of waits can form. Each
wait is bounded: past its limit the caller goes on without the lock and says so (`Hold.waited_out`),
a perf check then asks for a retry rather than grading on a shared GPU. A killed checker's locks
vanish with its file descriptions, so nothing stale survives a crash.

Each lock keeps its run's timeline (`GpuLock.summary()`: waits, holds and lends, on the host's
monotonic clock, which every process on it shares): the runner keeps it in the result, and
a staff script lays the runs of a batch side by side to say what each one waited for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

FDS_ENV = "GRADER_GPU_LOCK_FDS"
SHARED_WAIT_S = 900.0        # longer than any perf check's rounds, even with a per-call timeout in them
EXCLUSIVE_WAIT_S = 900.0
POLL_S = 0.005
# A compile that ends within this is a load from Triton's cache, not worth lending the hold for (H100, a
# class of references: 92-104 of a submission's 280 compiles took under 50 ms, most others 0.3-20 s).
LEND_AFTER_S = 0.05
MAX_INTERVALS = 20_000       # a timeline's length; a reference's run has about 1,000
INTERVAL_KINDS = ("wait_shared", "wait_alone", "shared", "alone", "lent")


@dataclass
class Hold:
    mode: str                  # "shared", "exclusive", or "none" when no lock is configured
    waited_s: float = 0.0
    waited_out: bool = False   # the wait hit its limit: the work ran without the lock


@dataclass
class Aside:
    """One compile's time without the lock: `rewait_s` is how long taking it back took."""
    rewait_s: float = 0.0


@dataclass
class LockTotals:
    """What the lock cost this checking run, for its log: waits, and time lent to compiles."""
    waited_s: float = 0.0
    waited_alone_s: float = 0.0   # the part of waited_s spent waiting to have the GPU alone
    takes_alone: int = 0
    alone_s: float = 0.0       # held exclusively, lent time excluded: the other submissions waited meanwhile
    lent_s: float = 0.0
    compiles: int = 0          # the worker's compile notices, lent or not
    lends: int = 0             # those the hold was set aside for


class GpuLock:
    """The two flock'ed files of one GPU, as file descriptors owned by this process."""

    def __init__(self, main_fd: int, turnstile_fd: int, clock=time.monotonic, sleep=time.sleep, drain=None):
        self.main_fd, self.turnstile_fd = main_fd, turnstile_fd
        self.clock, self.sleep = clock, sleep
        self.drain = drain or drain_this_process
        self._exclusive_depth = 0
        self._shared_depth = 0
        self._held = 0             # the flock mode actually held (LOCK_SH or LOCK_EX), 0 for none
        self._lends = True         # whether the outermost hold may be set aside for a compile
        self._held_since = 0.0     # when the mode now held was taken
        self.totals = LockTotals()
        self.intervals: list[tuple[str, float, float]] = []   # (one of INTERVAL_KINDS, start, end)

    lends_compiles = True          # the worker should say when it compiles (grader.worker.compile_notices)

    @contextlib.contextmanager
    def shared(self, wait_s: float = SHARED_WAIT_S):
        if self._exclusive_depth or self._shared_depth:     # already covered by what we hold
            self._shared_depth += 1
            try:
                yield Hold("shared")
            finally:
                self._shared_depth -= 1
            return
        start = self.clock()
        got = self._through_turnstile(fcntl.LOCK_SH, start + wait_s)
        self._shared_depth += 1
        self._lends = True
        try:
            yield Hold("shared", self.clock() - start, not got)
        finally:
            self._shared_depth -= 1
            self._release()

    @contextlib.contextmanager
    def exclusive(self, wait_s: float = EXCLUSIVE_WAIT_S, lend_for_compiles: bool = False):
        """The GPU alone. `lend_for_compiles`: let it go while this run's worker compiles (a perf check's
        warm-up, whose autotuning must time alone but whose compiles need no GPU); timing rounds do not."""
        if self._exclusive_depth:
            self._exclusive_depth += 1
            try:
                yield Hold("exclusive")
            finally:
                self._exclusive_depth -= 1
            return
        if self._shared_depth:
            raise RuntimeError("exclusive GPU lock asked for inside a shared hold: it would wait for itself")
        start = self.clock()
        got = self._through_turnstile(fcntl.LOCK_EX, start + wait_s)
        self._exclusive_depth += 1
        self._lends = lend_for_compiles
        try:
            yield Hold("exclusive", self.clock() - start, not got)
        finally:
            self._exclusive_depth -= 1
            self._release()

    @contextlib.contextmanager
    def keep_through_compiles(self):
        """Within a hold that lends: lend no more until the block ends (a perf check's timing rounds,
        after its warm-up, in the same exclusive hold so the GPU is queued for once per check)."""
        lends, self._lends = self._lends, False
        try:
            yield
        finally:
            self._lends = lends

    @property
    def alone_now(self) -> bool:
        """Whether this run holds the GPU alone at this moment (a take past its limit goes on without)."""
        return self._held == fcntl.LOCK_EX

    @contextlib.contextmanager
    def set_aside(self, wait_s: float = SHARED_WAIT_S):
        """Let go of this run's hold while its worker compiles; take the same mode back on leaving."""
        mode = self._held
        if not mode or not self._lends:
            yield Aside()
            return
        self._release()
        aside = Aside()
        start = self.clock()
        try:
            yield aside
        finally:
            back = self.clock()
            self._through_turnstile(mode, back + wait_s)   # past the limit: on without it, as for a first take
            aside.rewait_s = self.clock() - back
            self.totals.lent_s += back - start
            self.totals.compiles += 1
            self.totals.lends += 1
            self._note("lent", start, back)

    def kept_through_compile(self) -> None:
        """A compile that ended before it was worth lending the hold for (LEND_AFTER_S)."""
        self.totals.compiles += 1

    def _through_turnstile(self, mode: int, deadline: float) -> bool:
        """Take the main lock in `mode` behind anyone already waiting for it exclusively."""
        start, got = self.clock(), False
        if self._take(self.turnstile_fd, fcntl.LOCK_EX, deadline):
            try:
                got = self._take(self.main_fd, mode, deadline)
            finally:
                fcntl.flock(self.turnstile_fd, fcntl.LOCK_UN)
        self._held = mode if got else 0
        now = self.clock()
        self.totals.waited_s += now - start
        if mode == fcntl.LOCK_EX:
            self.totals.waited_alone_s += now - start
            self.totals.takes_alone += 1
        self._note("wait_alone" if mode == fcntl.LOCK_EX else "wait_shared", start, now)
        self._held_since = now
        return got

    def _release(self) -> None:
        if self._held:
            with contextlib.suppress(Exception):   # a broken context is the work's error, not the lock's
                self.drain()    # queued kernels outlive the hold: finish them before a neighbour times alone
            fcntl.flock(self.main_fd, fcntl.LOCK_UN)
            now = self.clock()
            if self._held == fcntl.LOCK_EX:
                self.totals.alone_s += now - self._held_since
            self._note("alone" if self._held == fcntl.LOCK_EX else "shared", self._held_since, now)
            self._held = 0

    @property
    def held_exclusively(self) -> bool:
        return self._exclusive_depth > 0

    def summary(self) -> dict:
        """What the lock cost this run and its timeline, for the results stream (grader.results): each
        interval one string, "kind start end" (seconds), so that result.json keeps it a line apiece."""
        return {"totals": {name: round(value, 3) for name, value in vars(self.totals).items()},
                "intervals": [f"{kind} {start:.3f} {end:.3f}" for kind, start, end in self.intervals]}

    def _note(self, kind: str, start: float, end: float) -> None:
        # a wait that found the lock free is no event; a timeline past its cap keeps its totals only
        if (not kind.startswith("wait") or end - start >= POLL_S) and len(self.intervals) < MAX_INTERVALS:
            self.intervals.append((kind, start, end))

    def _take(self, fd: int, mode: int, deadline: float) -> bool:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if self.clock() >= deadline:
                    return False
                self.sleep(POLL_S)


def drain_this_process() -> None:
    """Wait for this process's GPU work (all its streams) to finish, if it has started CUDA at all."""
    from grader.worker.guarded_call import synchronize

    synchronize()


class _NoLock:
    """A GPU not shared with other submissions (or no GPU): nothing to wait for."""

    held_exclusively = False
    lends_compiles = False
    totals = None

    def summary(self) -> None:
        return None

    @contextlib.contextmanager
    def shared(self, wait_s: float = 0.0):
        yield Hold("none")

    @contextlib.contextmanager
    def exclusive(self, wait_s: float = 0.0, lend_for_compiles: bool = False):
        yield Hold("none")

    @contextlib.contextmanager
    def set_aside(self, wait_s: float = 0.0):
        yield Aside()

    def kept_through_compile(self) -> None:
        pass

    @contextlib.contextmanager
    def keep_through_compiles(self):
        yield

    alone_now = True               # nobody else on this GPU to share it with


# --- the runner's side -------------------------------------------------------------------------------


def lock_paths(folder: Path, gpu: str) -> tuple[Path, Path]:
    return folder / f"gpu{gpu}.lock", folder / f"gpu{gpu}.turnstile"


def open_for_child(folder: Path, gpu: str) -> tuple[int, int]:
    """Fresh open file descriptions of GPU `gpu`'s lock files, for one checking run (close after)."""
    folder.mkdir(parents=True, exist_ok=True)
    return tuple(os.open(path, os.O_RDWR | os.O_CREAT, 0o600) for path in lock_paths(folder, gpu))


def env_value(fds: tuple[int, int]) -> str:
    return f"{fds[0]},{fds[1]}"


# --- the checker's side ------------------------------------------------------------------------------

_current: GpuLock | _NoLock | None = None


def current() -> GpuLock | _NoLock:
    """This checking run's GPU lock, from GRADER_GPU_LOCK_FDS (no lock when it is not set)."""
    global _current
    if _current is None:
        _current = from_env(os.environ)
    return _current


def from_env(env) -> GpuLock | _NoLock:
    text = env.get(FDS_ENV, "")
    try:
        main_fd, turnstile_fd = (int(part) for part in text.split(","))
        for fd in (main_fd, turnstile_fd):
            os.fstat(fd)
            os.set_inheritable(fd, False)      # the worker, spawned later, must never get them
    except (ValueError, OSError):
        return _NoLock()
    return GpuLock(main_fd, turnstile_fd)


def shared():
    return current().shared()


def exclusive():
    return current().exclusive()
