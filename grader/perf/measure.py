"""Timing a submission against its baseline: alternated rounds, each side's quickest, a ratio, an outside bound.

`measure_ratio` is what a perf test (and `grader bench`) calls. Each round draws fresh random inputs,
times the submission in its worker (`time_kernel`, run there through `impl.run`,
grader.perf.in_worker) and the baselines here with `triton.testing.do_bench` (median, L2 flushed, the
first call outside the timing so compile and autotune are excluded), alternating which side goes
first. The output of the timed calls is checked by the test's `check` callback: correctness gates
timing. The score is the baseline's quickest round over the submission's quickest graded round
(`quickest_ratio`). Noise only ever slows a round (a neighbour's kernels, a host descheduled by
compiles, a clock), while a kernel's own work is in every round: on the H200, eight references at 4 per
GPU, an honest 0.19 ms fp16 matmul read 0.23-0.29 ms by its events in five rounds of seven, and the
median of the rounds cost it points. What bounds a forged claim (the wall window,
grader.perf.wall_window) bounds every round the same way, so the quickest round gains a cheat nothing.

Cheats the claim defends against: memoised outputs (grader.perf.refresh), work on a side stream (the
span to a device sync, grader.perf.in_worker, the quickest span over all rounds counting for each:
`graded_claims`), and a worker thread loading the GPU while the baseline is timed: the worker's process
tree is stopped meanwhile (grader.perf.pausing).

On a GPU shared with other submissions (`grade --per-gpu`), the untimed warm-up call (compile,
autotune) and the rounds and window run in one hold of the GPU's exclusive lock (grader.perf.gpu_lock),
so no other submission's code is in a call while we time; the warm-up lends the lock out while it
compiles. Only timing happens in that hold: the clock ramp and each baseline's first, untimed call
(cuDNN builds its plans there) before it and the output checks after it share the GPU, because every
second held alone is a second all the other submissions on it wait. More rounds are timed, up to
MAX_ROUNDS, until all but one agree within STABLE_SPREAD, so that a slow streak is timed on until a
clean round comes; then each side's quickest counts. Only the graded (first) baseline is timed in every
round; the others, shown for comparison, in the first.

A run whose environment is off (copy bandwidth or matmul throughput far below the GPU's norm, another
process on the GPU: `grader.perf.environment.retry_reasons`), whose rounds disagree by more than
UNSTABLE_SPREAD, or during whose timing either side's caching allocator ran short of GPU memory (the
retry frees the cache and synchronises the device: a stall no kernel caused, likelier with neighbours
on the GPU) is flagged `retry` rather than graded low.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
from dataclasses import dataclass

from grader.perf.in_worker import (
    DEFAULT_REP_MS,
    DEFAULT_WARMUP_MS,
    alloc_retries,
    bench_median,
    cuda_available,
    device_synchronize,
    release_cached_memory,
    synchronize,
    time_kernel,
    wall_clock,
    warm_up,
)
from grader.perf.record import PerfResult, Round, graded_claims
from grader.perf.refresh import clone_inputs, replay_refreshes
from grader.perf.wall_window import wall_window

# Rounds after the first warm up for less: the kernel is compiled, and the GPU's clocks are up from the
# round before it (each round's warm-up runs while the GPU is held alone).
LATER_ROUND_WARMUP_MS = 5
MAX_REFRESHES = 100_000        # more refreshes than any timing could do: a reply claiming more is forged
# max/min - 1 of the per-round ratios above which we ask for a retry. On a healthy H200 the baselines
# (cuBLAS, cuDNN) drift 10-21% between rounds while the ratio reproduces within ~4% run to run.
UNSTABLE_SPREAD = 0.25
# More rounds (up to MAX_ROUNDS) until all but one agree within this (`_settled`): rounds slowed by
# noise disagree with a clean one, and each more round is another chance of a clean one.
STABLE_SPREAD = 0.08
# Two rounds, one with each side first, that agree this closely settle a check before `rounds`: a third
# round could move its quickest by less than that, and the hold of the GPU alone is every neighbour's wait.
EARLY_SPREAD = 0.02
GRADED_MIN_ROUNDS = 2
MAX_ROUNDS = 7
RAMP_MS = 150.0
WARMUP_ENV = "GRADER_PERF_WARMUP"   # "shared": warm up and autotune beside other submissions' work


def measure_ratio(impl, target: str, make_inputs, baselines: dict, *, check=None, rounds: int = 3,
                  min_rounds: int | None = None,
                  flops: float | None = None, bytes_moved: float | None = None,
                  warmup_ms: float = DEFAULT_WARMUP_MS, rep_ms: float = DEFAULT_REP_MS,
                  wall_check: bool = True, environment=None, bench=None,
                  clock=wall_clock, sync=None, pause=None, lock=None, ramp=None) -> PerfResult:
    """Time `target` in the impl's worker against `baselines` here; return the ratios.

    Args:
        impl: the `impl` fixture (or anything with `run(fn, *args)` calling fn(modules, *args)).
        target: what to time in the worker, see `resolve_target`.
        make_inputs: () -> tuple of fresh random inputs; called once per round and per window set.
        baselines: {name: factory(*inputs) -> zero-argument callable}; the first one is graded.
        check: check(output, inputs) raises AssertionError when the output is wrong.
        rounds, min_rounds: rounds timed at least while they disagree; `min_rounds` that agree within
            EARLY_SPREAD are enough (default: `rounds`).
        flops, bytes_moved: per call, for TFLOP/s and GB/s in the record.
        environment: () -> list of reasons the environment is off (default: the GPU's norms, cached).
        bench, clock, sync: injectable for tests (do_bench median, perf_counter, cuda synchronize).
        pause: (impl) -> context manager stopping the worker while baselines run (default:
            `grader.perf.pausing.paused_worker`); lock: the GPU lock (default: this run's, grader.perf.gpu_lock);
            ramp: () -> None, brings the GPU's clocks up before the warm-up (default: `ramp_clocks`).
    """
    if not baselines:
        raise ValueError("measure_ratio needs at least one baseline")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    from grader.perf import gpu_lock

    bench, sync = bench or bench_median, sync or synchronize
    lock = gpu_lock.current() if lock is None else lock
    check_plan = _Check(impl, target, make_inputs, baselines, check, rounds, min_rounds, bench, warmup_ms, rep_ms,
                        clock, sync, pause, audits=[])
    # Compile and autotune once, untimed, with the clocks already up (an autotuner timing configs on an
    # idle GPU's ramping clocks picks a different config from run to run). With the GPU alone by
    # default, so an autotuner's own timings are not a neighbour's noise; its compiles, CPU work, lend
    # the lock to the other submissions on this GPU (grader.worker.compile_notices).
    warm_shared = os.environ.get(WARMUP_ENV, "exclusive") == "shared"
    reasons, phases = [], {}
    alone_before = _lock_total(lock, "alone_s")
    try:
        with lock.shared():                # busy work: a neighbour's work keeps the clocks up as well
            (ramp or ramp_clocks)()
            _set_up_baselines(baselines, make_inputs, sync)
            if warm_shared:
                impl.run(warm_up, target, tuple(make_inputs()))
        measured, window, retries = _hold_alone(check_plan, lock, not warm_shared, wall_check, environment,
                                                reasons, phases)
        alone_s = None if alone_before is None else _lock_total(lock, "alone_s") - alone_before
        _audit_outputs(check_plan, lock)
    except BaseException:
        check_plan.audits.clear()
        with contextlib.suppress(Exception):   # a dead worker has nothing to hand back; the failure stands
            _hand_back_memory(impl, lock)
        raise
    return _perf_result(check_plan, measured, window, reasons, retries, flops=flops, bytes_moved=bytes_moved,
                        alone_s=alone_s, phases=phases)


def _audit_outputs(plan, lock) -> None:
    """Check the timed calls' outputs, the checker's GPU work, never timed; then hand back the memory."""
    with lock.shared():
        for audit in plan.audits:
            audit()
    plan.audits.clear()                    # they hold the outputs: released below only once unreferenced
    _hand_back_memory(plan.impl, lock)


@dataclass
class _Check:
    """One perf check's parts, as `measure_ratio` was given them."""
    impl: object
    target: str
    make_inputs: object
    baselines: dict
    check: object
    rounds: int
    min_rounds: int | None
    bench: object
    warmup_ms: float
    rep_ms: float
    clock: object
    sync: object
    pause: object
    audits: list                          # the outputs' checks, run once the GPU is given back


def _hold_alone(plan: _Check, lock, warm_up_here: bool, wall_check: bool, environment, reasons: list,
                phases: dict):
    """The check's one hold of the GPU alone: the warm-up (lent to others while it compiles) unless it
    ran shared, then the rounds and window, lent to no one."""
    from grader.perf.cores import timing_cores

    clock = plan.clock
    with lock.exclusive(lend_for_compiles=True) as hold:
        phase_start, not_alone_before = clock(), _lent_or_waiting(lock)
        if warm_up_here:
            plan.impl.run(warm_up, plan.target, tuple(plan.make_inputs()))
        phases["warm_up"] = clock() - phase_start - (_lent_or_waiting(lock) - not_alone_before)
        with lock.keep_through_compiles(), timing_cores(plan.impl):
            if hold.waited_out or not lock.alone_now:
                reasons.append(f"the GPU could not be had alone (waited {hold.waited_s:.0f} s for other "
                               "submissions)")
            return _timed_alone(plan, wall_check, environment, reasons, phases)


def _timed_alone(plan: _Check, wall_check: bool, environment, reasons: list, phases: dict):
    """What runs while the GPU is held alone: the rounds, the wall window and the environment's check.
    Returns (the rounds, the window or None, the allocators' retries meanwhile per side)."""
    clock = plan.clock
    retries_before = _alloc_retries(plan.impl)
    phase_start = clock()
    measured = []
    while len(measured) < max(plan.rounds, MAX_ROUNDS) and not _settled(measured, plan.baselines, plan.rounds,
                                                                        plan.min_rounds):
        measured.append(_one_round(plan.impl, plan.target, plan.make_inputs, plan.baselines, plan.check,
                                   len(measured), plan.bench, plan.warmup_ms, plan.rep_ms, clock, plan.sync,
                                   plan.pause, plan.audits))
    claimed = min(graded_claims(measured))
    phases["rounds"], phase_start = clock() - phase_start, clock()
    window = (wall_window(plan.impl, plan.target, plan.make_inputs, claimed, plan.check, clock, plan.sync, plan.audits)
              if wall_check else None)
    phases["window"], phase_start = clock() - phase_start, clock()
    reasons += list((environment or _default_environment)())   # while the GPU is ours alone
    phases["environment"] = clock() - phase_start
    retries = {side: after - before
               for side, before, after in zip(("worker", "checker"), retries_before, _alloc_retries(plan.impl))
               if after > before}
    if retries:
        reasons.append("the GPU's memory ran short while timing: the allocator freed its cache and "
                       "tried again (" + ", ".join(f"{side} {n}x" for side, n in retries.items()) + ")")
    return measured, window, retries


def _perf_result(plan: _Check, measured, window, reasons, retries, *, flops, bytes_moved, alone_s,
                 phases) -> PerfResult:
    """The check's ratios from its rounds, each side's quickest, no claim under the window's bound."""
    baselines = plan.baselines
    graded = graded_claims(measured)
    claimed = min(graded)
    graded_floor = window.bound_ms if window is not None and window.conclusive else 0.0
    ratios = {name: quickest_ratio(measured, graded, name, graded_floor) for name in baselines}
    spread = _spread([r.baseline_ms[next(iter(baselines))] / max(ms, graded_floor)
                      for r, ms in zip(measured, graded)])
    if spread > UNSTABLE_SPREAD and not _settled(measured, baselines, plan.rounds, plan.min_rounds):
        reasons.append(f"rounds disagree by {spread:.0%} (more than {UNSTABLE_SPREAD:.0%})")
    return PerfResult(
        baseline_name=next(iter(baselines)),
        claimed_ms=claimed,
        submission_ms=max(claimed, graded_floor),
        baselines_ms={name: min(_timed(measured, name)) for name in baselines},
        ratios=ratios, rounds=measured, window=window, retry_reasons=reasons,
        flops=flops, bytes_moved=bytes_moved, alone_s=alone_s,
        alone_phases_s=phases if alone_s is not None else None, alloc_retries=retries)


def measure_graded_case(impl, case, generator) -> PerfResult:
    """What a graded perf test times: `case` (a grader.perf.cases Benchmark) against its baselines, on
    fresh inputs drawn from `generator`, its output checked, two agreeing rounds enough."""
    return measure_ratio(impl, case.target, lambda: case.make_inputs(generator), case.baselines,
                         check=case.check_output, flops=case.flops, bytes_moved=case.bytes_moved,
                         min_rounds=GRADED_MIN_ROUNDS)


def _set_up_baselines(baselines, make_inputs, sync) -> None:
    """One untimed call of each baseline, before the GPU is held alone. A library's first call on a shape
    sets itself up (cuDNN builds SDPA's plans: 0.5-2.2 s per attention case on the H200) and do_bench's
    own first call would do it inside the hold, where every other submission on the GPU waits."""
    inputs = tuple(make_inputs())
    for factory in baselines.values():
        factory(*inputs)()
    sync()


def _hand_back_memory(impl, lock) -> None:
    """What a perf check reserved (input sets, outputs, flush buffers), kept in two caching allocators
    for the rest of the run, is memory the other submissions on this GPU lack: both sides give it back,
    after a failed check as well."""
    with lock.shared():
        try:
            impl.run_harness(release_cached_memory)
        finally:
            release_cached_memory(None)


def _one_round(impl, target, make_inputs, baselines, check, index, bench, warmup_ms, rep_ms, clock, sync,
               pause, audits) -> Round:
    round_start = clock()
    inputs = tuple(make_inputs())
    seed = random.SystemRandom().randrange(1 << 62)
    # ours to check against: an in-process impl refreshes the very objects it is given
    pristine = clone_inputs(inputs) if check is not None else None
    # the graded baseline every round; the others, for comparison only, once
    timed_baselines = baselines if index == 0 else dict([next(iter(baselines.items()))])
    if index > 0:
        warmup_ms = min(warmup_ms, LATER_ROUND_WARMUP_MS)
    # Alternate who goes first, so slow drift (clocks, temperature) does not favour one side.
    if index % 2 == 0:
        claim, output, refreshed, wall, account = _time_submission(impl, target, inputs, warmup_ms, rep_ms, clock,
                                                                   sync, seed)
        base, base_wall, pause_ms = _time_baselines(impl, timed_baselines, inputs, bench, warmup_ms, rep_ms, pause,
                                                    clock)
    else:
        base, base_wall, pause_ms = _time_baselines(impl, timed_baselines, inputs, bench, warmup_ms, rep_ms, pause,
                                                    clock)
        claim, output, refreshed, wall, account = _time_submission(impl, target, inputs, warmup_ms, rep_ms, clock,
                                                                   sync, seed)
    if check is not None:
        def audit():
            replay_refreshes(pristine, seed, refreshed)   # what the worker's inputs became, call after call
            check(output, pristine)
        audits.append(audit)
    return Round(claim, base, wall, base_wall, pause_ms, (clock() - round_start) * 1e3, account)


def _settled(measured, baselines, rounds, min_rounds=None) -> bool:
    """Whether all rounds so far but at most one agree within STABLE_SPREAD (and there are `rounds`):
    then the median lies among them, and more rounds would only cost the GPU's time. One slow round (a
    clock still ramping after the warm-up, a host busy with neighbours' compiles) costs one more round;
    two rounds apart (a bimodal kernel or GPU) go on to MAX_ROUNDS and, still apart, ask for a retry.
    `min_rounds` (fewer than `rounds`) rounds within EARLY_SPREAD of each other settle it early."""
    min_rounds = rounds if min_rounds is None else min_rounds
    if len(measured) < min(rounds, min_rounds):
        return False
    name = next(iter(baselines))
    ratios = sorted(base / claim for base, claim in zip((r.baseline_ms[name] for r in measured),
                                                          graded_claims(measured)))
    if len(measured) < rounds:
        return _spread(ratios) <= EARLY_SPREAD
    agreeing = max(rounds, len(ratios) - 1)
    return any(_spread(ratios[i:i + agreeing]) <= STABLE_SPREAD for i in range(len(ratios) - agreeing + 1))


def _time_submission(impl, target, inputs, warmup_ms, rep_ms, clock, sync, seed):
    sync()
    start = clock()
    reply = impl.run(time_kernel, target, inputs, warmup_ms, rep_ms, seed)
    sync()
    wall_ms = (clock() - start) * 1e3
    if not (isinstance(reply, (tuple, list)) and len(reply) in (3, 4) and isinstance(reply[0], (int, float))
            and isinstance(reply[2], int) and not isinstance(reply[2], bool) and 0 <= reply[2] <= MAX_REFRESHES):
        raise AssertionError(f"the timing call returned {type(reply).__name__}, not (milliseconds, output, "
                             "refreshes)")
    claim, output, refreshed = float(reply[0]), reply[1], int(reply[2])
    account = _worker_account(reply[3] if len(reply) == 4 else None)
    if not (math.isfinite(claim) and claim > 0):
        raise AssertionError(f"the timing of your kernel came back as {claim!r} ms, which is not a time")
    if claim > wall_ms:
        # Slower than the checker's own clock allows: the worker's timer is broken or tampered with.
        raise AssertionError(f"the worker reported {claim:.3f} ms per call but the whole timing took "
                             f"{wall_ms:.3f} ms: the kernel's timer is not trustworthy")
    return claim, output, refreshed, wall_ms, account


def _worker_account(account) -> dict[str, float]:
    """The worker's account of its claim, reduced to what it may hold: its two known times and its count
    of delayed calls, if numbers."""
    if not isinstance(account, dict):
        return {}
    return {key: float(value) for key, value in account.items()
            if key in ("events_ms", "synced_ms", "delayed_calls") and isinstance(value, (int, float))
            and not isinstance(value, bool) and math.isfinite(value) and value >= 0}


def _time_baselines(impl, baselines, inputs, bench, warmup_ms, rep_ms, pause, clock=wall_clock):
    """The baselines, timed here while the worker is stopped: a thread left behind by student code
    cannot load the GPU (say, saturate HBM) while its baseline runs and so make the ratio look better.
    Returns ({name: ms}, ms of the whole, ms of it spent pausing the worker)."""
    if pause is None:
        from grader.perf.pausing import paused_worker as pause
    start = clock()
    with pause(impl):
        paused = clock()
        times = {name: float(bench(factory(*inputs), warmup_ms, rep_ms)) for name, factory in baselines.items()}
    return times, (clock() - start) * 1e3, (paused - start) * 1e3


def quickest_ratio(measured, claims, name, floor_ms):
    """Baseline `name`'s quickest round over the quickest claim (claims[i] for measured[i]), no claim
    counting for less than floor_ms. Each side's quickest: noise only adds time, to either side."""
    return min(_timed(measured, name)) / max(min(claims), floor_ms)


def _timed(measured, name):
    return [r.baseline_ms[name] for r in measured if name in r.baseline_ms]


def _lock_total(lock, name: str) -> float | None:
    """One of this run's lock totals so far (grader.perf.gpu_lock.LockTotals: alone_s, lent_s, ...), None when
    the GPU is not shared."""
    totals = getattr(lock, "totals", None)
    return None if totals is None else getattr(totals, name)


def _lent_or_waiting(lock) -> float:
    """Seconds so far this run's hold was lent to compiles or waited to be taken back: inside a hold, yet
    not alone."""
    return (_lock_total(lock, "lent_s") or 0.0) + (_lock_total(lock, "waited_s") or 0.0)


def _alloc_retries(impl) -> tuple[int, int]:
    """(worker, checker) counts of the allocators' retries so far (module attribute, so tests can fake it)."""
    return int(impl.run_harness(alloc_retries)), alloc_retries(None)


def _spread(values):
    return max(values) / min(values) - 1.0 if values and min(values) > 0 else 0.0


def ramp_clocks(ms: float = RAMP_MS) -> None:
    """Keep the GPU busy for `ms` so its clocks leave idle (345 MHz on an idle H200) before autotuning."""
    if not cuda_available():
        return
    import torch

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    start = wall_clock()
    while (wall_clock() - start) * 1e3 < ms:
        for _ in range(20):
            a @ a
        device_synchronize()


def _default_environment():
    from grader.perf.environment import retry_reasons

    return retry_reasons()
