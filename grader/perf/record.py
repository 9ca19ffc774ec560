"""What a perf check measured: its rounds, its wall window, the result, and the record the plugin keeps.

`PerfResult.as_record()` is the one writer of the perf record in the results stream (what
`record_perf` receives); `graded_claims` says what each round's claim counts for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.perf import in_worker


@dataclass
class Round:
    submission_ms: float               # claimed by the worker
    baseline_ms: dict[str, float]
    wall_ms: float                     # checker's wall clock around the worker's timing call
    baselines_wall_ms: float = 0.0     # checker's wall clock around the baselines, the worker's pause included
    pause_ms: float = 0.0              # of which: stopping the worker and waiting for a quiet GPU
    round_ms: float = 0.0              # the whole round, fresh inputs and their transport included
    # The worker's own account of its claim, for whoever looks into a low ratio: its calls' median by
    # their events, its span to a device sync (the claim is in_worker.claimed_ms of the two), and how many
    # timed calls its host may have delayed. Unchecked, like the claim itself.
    account: dict[str, float] = field(default_factory=dict)


@dataclass
class WallWindow:
    calls: int
    input_sets: int
    wall_ms: float
    bound_ms: float | None             # lower bound put on the graded time; None when inconclusive
    passes: int = 1                    # windows timed (WALL_PASSES at most); this is the quickest
    timed: list[tuple[int, float]] = field(default_factory=list)   # every pass: (calls, wall ms)

    @property
    def conclusive(self) -> bool:
        return self.bound_ms is not None


@dataclass
class PerfResult:
    baseline_name: str                 # the graded baseline (first of `baselines`)
    claimed_ms: float                  # the quickest of the worker's graded claims over rounds
    submission_ms: float               # graded: max(claim, wall bound)
    baselines_ms: dict[str, float]     # per baseline: its quickest round
    ratios: dict[str, float]           # per baseline: its quickest round / the graded submission time
    rounds: list[Round]
    window: WallWindow | None = None
    retry_reasons: list[str] = field(default_factory=list)
    flops: float | None = None
    bytes_moved: float | None = None
    alone_s: float | None = None       # how long the check held a shared GPU alone (None: not shared)
    alone_phases_s: dict[str, float] | None = None   # that hold by phase: warm_up (lent time out), rounds, ...
    alloc_retries: dict[str, int] = field(default_factory=dict)   # per side, while timing (none: empty)

    @property
    def ratio(self) -> float:
        return self.ratios[self.baseline_name]

    @property
    def baseline_ms(self) -> float:
        return self.baselines_ms[self.baseline_name]

    @property
    def retry(self) -> bool:
        return bool(self.retry_reasons)

    @property
    def bound_applied(self) -> bool:
        return self.submission_ms > self.claimed_ms

    @property
    def tflops(self) -> float | None:
        return throughput(self.flops, self.submission_ms, 1e12)

    @property
    def gbs(self) -> float | None:
        return throughput(self.bytes_moved, self.submission_ms, 1e9)

    def as_record(self) -> dict:
        """The perf record a test hands to the plugin: `record_perf(**result.as_record())`."""
        measured = {
            "submission_ms": round(self.submission_ms, 6),
            "claimed_ms": round(self.claimed_ms, 6),
            "baseline_ms": {name: round(ms, 6) for name, ms in self.baselines_ms.items()},
            "ratios": {name: round(value, 4) for name, value in self.ratios.items()},
            "rounds": [{"claimed_ms": round(r.submission_ms, 6), "graded_ms": round(graded, 6),
                        "wall_ms": round(r.wall_ms, 3),
                        "baseline_ms": {n: round(ms, 6) for n, ms in r.baseline_ms.items()},
                        "baselines_wall_ms": round(r.baselines_wall_ms, 3), "pause_ms": round(r.pause_ms, 3),
                        "round_ms": round(r.round_ms, 3)} | {f"worker_{k}": round(v, 6) for k, v in r.account.items()}
                       for r, graded in zip(self.rounds, graded_claims(self.rounds))],
            "wall_bound_applied": self.bound_applied,
        }
        if self.window is not None:
            measured["wall_window"] = {"calls": self.window.calls, "input_sets": self.window.input_sets,
                                       "wall_ms": round(self.window.wall_ms, 3),
                                       "bound_ms": self.window.bound_ms, "passes": self.window.passes,
                                       "timed": [[calls, round(ms, 3)] for calls, ms in self.window.timed]}
        if self.tflops is not None:
            measured["tflops"] = round(self.tflops, 2)
        if self.gbs is not None:
            measured["gbs"] = round(self.gbs, 1)
        if self.alone_s is not None:
            measured["gpu_alone_s"] = round(self.alone_s, 3)
        if self.alone_phases_s is not None:
            measured["gpu_alone_phases_s"] = {name: round(s, 3) for name, s in self.alone_phases_s.items()}
        if self.alloc_retries:
            measured["alloc_retries"] = dict(self.alloc_retries)
        if self.retry_reasons:
            measured["retry_reasons"] = list(self.retry_reasons)
        return {"ratio": round(self.ratio, 4), "baseline": self.baseline_name, "measured": measured,
                "retry": self.retry}


def throughput(amount: float | None, milliseconds: float, unit: float) -> float | None:
    if amount is None or not milliseconds > 0:
        return None
    return amount / (milliseconds * 1e-3) / unit


def graded_claims(measured: list[Round]) -> list[float]:
    """Per round, the ms it counts for: the worker's claim, with the span to a device sync taken as the
    quickest over all rounds, not the round's own. Work hidden on a side stream is in every span of every
    round; a host slowed by neighbours' compiles only slows some rounds' spans (H200, eight references at
    4 per GPU: an honest 0.19 ms matmul's spans read 0.25-0.28 ms in three rounds of four while its events
    read 0.19). It only ever lowers a claim to what the worker's own account supports; a round without a
    usable account keeps its claim."""
    spans = [r.account["synced_ms"] for r in measured if _usable_account(r)]
    if not spans:
        return [r.submission_ms for r in measured]
    quickest = min(spans)
    return [min(r.submission_ms, in_worker.claimed_ms(r.account["events_ms"], quickest)) if _usable_account(r)
            else r.submission_ms for r in measured]


def _usable_account(r: Round) -> bool:
    return "events_ms" in r.account and "synced_ms" in r.account
