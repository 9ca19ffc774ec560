"""How many checking runs may run at once on each GPU, when submissions are checked in parts.

A submission split into parts (grader.grade.parts) used to hold its GPU slot until its slowest part
ended, while the seats of its quicker parts stood empty: on the H200, four references in three parts
each kept 12 runs going for the first ~150 s of a batch, 8 until ~230 s and 4 for the last ~110 s
(parts of 146-163, 192-230 and 321-343 s). Here each part takes
a seat of the GPU for as long as it runs, and a part of the next submission takes it when it is given
back, so a GPU with work queued keeps every seat busy. While submissions are left to be let in, a seat
goes to the earliest submission's part that waits for one, longest part first, so few submissions are
in flight at once and results land in order. Once the last is in, it goes to the longest part waiting
in any submission (longest processing time first): the batch then ends on short parts, not on one
submission's longest part begun late (on the H200, eight references at 4 per GPU ran 575 s, the last
~230 s of it with fewer parts than seats).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time

POLL_S = 0.5                   # how often a waiting part looks at the batch's stop flag
# The first seats are given out this long after the batch starts: by then every submission let in has
# staged its files and its parts wait, so the best-ranked get them, not the first to ask.
SETTLE_S = 1.0


class Seats:
    """`counts[gpu]` seats per GPU (a slot id; None for the CPU). A part's rank is (its submission's place
    in the batch, its place in the submission, longest first): every submission is split the same way,
    so the second number orders parts of different submissions by length too. A seat that comes free
    goes to the waiting part that ranks first, or, once `everyone_in()`, that is longest."""

    def __init__(self, counts: dict, settle_s: float = SETTLE_S, clock=time.monotonic):
        self._free = dict(counts)
        self._waiting: dict = {gpu: [] for gpu in counts}    # ranks of the parts waiting for each GPU
        self._changed = threading.Condition()
        self._everyone_in = False
        self._clock, self._opens_at = clock, clock() + settle_s

    def everyone_in(self) -> None:
        """No submission is left to be let in: free seats go to the longest waiting parts from now on."""
        with self._changed:
            self._everyone_in = True
            self._changed.notify_all()

    @contextlib.contextmanager
    def seat(self, gpu, rank: tuple, stopping: threading.Event | None = None):
        """Hold one of `gpu`'s seats for the block; yields False, without a seat, when the batch is
        stopping before one came free."""
        taken = self._take(gpu, rank, stopping)
        try:
            yield taken
        finally:
            if taken:
                with self._changed:
                    self._free[gpu] += 1
                    self._changed.notify_all()

    def _take(self, gpu, rank: tuple, stopping) -> bool:
        with self._changed:
            waiting = self._waiting[gpu]
            waiting.append(rank)
            try:
                while self._first(waiting) != rank or self._free[gpu] == 0 or self._clock() < self._opens_at:
                    if stopping is not None and stopping.is_set():
                        return False
                    self._changed.wait(POLL_S)
                self._free[gpu] -= 1
                return True
            finally:
                waiting.remove(rank)
                self._changed.notify_all()    # the next in rank may now be first

    def _first(self, waiting: list) -> tuple:
        if self._everyone_in:
            return min(waiting, key=lambda rank: (rank[1], rank[0]))
        return min(waiting)

    def free(self, gpu) -> int:
        with self._changed:
            return self._free[gpu]


def admissions(slots: list, parts_each: int) -> list:
    """The submissions let in at once, one list entry (its GPU) each: as many per GPU as it has seats,
    so that a seat given back always finds a part waiting for it while submissions are left to grade."""
    return [slot for _ in range(max(1, parts_each)) for slot in slots]   # GPUs interleaved, as the slots are


def counts(slots: list, parts_each: int) -> dict:
    """Seats per GPU: its slots (submissions at once, --per-gpu) times the parts of each, which is what
    it admits."""
    return dict(collections.Counter(admissions(slots, parts_each)))
