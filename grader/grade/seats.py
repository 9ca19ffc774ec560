"""How many checking runs may run at once on each GPU, when submissions are checked in parts.

A submission split into parts (grader.grade.parts) that held its GPU slot until its slowest part
ended would leave the seats of its quicker parts empty: on the H200, four references in three parts
each held that way kept 12 runs going for the first ~150 s of a batch, 8 until ~230 s and 4 for the last ~110 s
(parts of 146-163, 192-230 and 321-343 s). Here each part takes
a seat of the GPU for as long as it runs, and a part of the next submission takes it when it is given
back, so a GPU with work queued keeps every seat busy. A seat goes to the earliest submission's part
that waits for one, longest part first, so few submissions are in flight at once and results land in
order. Not the longest waiting part of any submission (longest processing time first): on the H200,
eight references at 4 per GPU then all ran at once, their FlashAttention parts together took the GPU's
memory to 138.8 of its 140 GiB (76-103 GiB in this order), and one of the eight was done by 565 s,
where this order, with the same parts, had all eight done by 538 s.
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
    """`counts[gpu]` seats per GPU (a slot id; None for the CPU). A seat that comes free goes to the waiting
    part that ranks first: (the submission's place in the batch, the part's place in it)."""

    def __init__(self, counts: dict, settle_s: float = SETTLE_S):
        self._free = dict(counts)
        self._waiting: dict = {gpu: [] for gpu in counts}    # ranks of the parts waiting for each GPU
        self._changed = threading.Condition()
        self._opens_at = time.monotonic() + settle_s

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
                while min(waiting) != rank or self._free[gpu] == 0 or time.monotonic() < self._opens_at:
                    if stopping is not None and stopping.is_set():
                        return False
                    self._changed.wait(POLL_S)
                self._free[gpu] -= 1
                return True
            finally:
                waiting.remove(rank)
                self._changed.notify_all()    # the next in rank may now be first

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
