"""grader.perf on CPU: alternation, each side's quickest round, ratios, the wall-clock bound and retry flags.

No GPU is needed: a fake clock stands in for time, a clock-reading fake for do_bench, and a fake impl
runs the worker-side functions in this process (as the in-process impl does).
"""

from __future__ import annotations

import statistics
import types

import pytest
from perf_fakes import FakeImpl, LaunchRequiredImpl, baseline, clock_bench, counter_inputs, exact_check, kernel_module

from grader import perf
from grader.perf import environment, in_worker
from grader.perf import measure as perf_measure


def measure(clock, modules, baselines, **options):
    options.setdefault("environment", lambda: [])
    impl = FakeImpl(modules, clock, options.pop("overhead_ms", 0.0))
    return perf.measure_ratio(impl, "demo.add_one", options.pop("make_inputs", counter_inputs()),
                                baselines, check=options.pop("check", exact_check),
                                bench=clock_bench(clock), clock=clock, sync=lambda: None, **options)


def test_ratio_is_baseline_time_over_submission_time(clock):
    result = measure(clock, kernel_module(clock, 2.0), {"fast": baseline(clock, 1.0), "slow": baseline(clock, 3.0)})
    assert result.ratio == pytest.approx(0.5)
    assert result.baseline_name == "fast"
    assert result.ratios["slow"] == pytest.approx(1.5)
    assert result.submission_ms == pytest.approx(2.0)
    assert not result.retry


def test_a_perf_check_under_require_triton_runs_nothing_in_the_worker_but_the_kernel(clock):
    # Perf checks run inside guards(require_triton=True): a housekeeping call through impl.run (memory
    # handed back) failed every one of them as "no Triton kernel was launched".
    impl = LaunchRequiredImpl(kernel_module(clock, 2.0), clock)
    result = perf.measure_ratio(impl, "demo.add_one", counter_inputs(), {"base": baseline(clock, 1.0)},
                                  check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                                  environment=lambda: [])
    assert result.ratio == pytest.approx(0.5)


def test_rounds_alternate_which_side_runs_first(clock):
    events = []
    measure(clock, kernel_module(clock, 2.0, events), {"base": baseline(clock, 1.0, events, "base")},
            rounds=4, wall_check=False)
    first_by_round = {}
    for name, round_input in events:
        first_by_round.setdefault(round_input, name)
    # input 1 sets the baselines up and input 2 is the warm-up call (compiles, autotune), both untimed
    assert list(first_by_round.values()) == ["base", "submission", "submission", "base", "submission", "base"]


def test_each_round_draws_fresh_inputs(clock):
    events = []
    measure(clock, kernel_module(clock, 2.0, events), {"base": baseline(clock, 1.0)}, rounds=3,
            wall_check=False)
    assert sorted({x for _, x in events}) == [2, 3, 4, 5]     # the warm-up's, then one per round


def _measure_rounds(clock, round_ms, rounds=3, min_rounds=None):
    """measure() of a kernel whose rounds take `round_ms` in turn (its warm-up and its timed call alike,
    after the untimed warm-up call), then 2 ms a call; 1 ms for the baseline."""
    times = iter([2.0] + [ms for value in round_ms for ms in (value, value)] + [2.0] * 100)

    def add_one(x):
        clock.advance(next(times))
        return x + 1

    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))
    return measure(clock, modules, {"base": baseline(clock, 1.0)}, rounds=rounds, min_rounds=min_rounds,
                   wall_check=False)


def test_a_slow_round_does_not_count(clock):
    result = _measure_rounds(clock, [2.0, 8.0, 2.0])          # round 2 is slow
    assert result.claimed_ms == pytest.approx(2.0)
    assert result.ratio == pytest.approx(0.5)


def test_disagreeing_rounds_get_more_rounds_before_the_quickest_counts(clock):
    # rounds 1 and 3 slow: more rounds are timed, each another chance of a clean one
    result = _measure_rounds(clock, [8.0, 2.0, 8.0])
    assert len(result.rounds) == perf.MAX_ROUNDS
    assert result.claimed_ms == pytest.approx(2.0)


def test_one_slow_round_costs_one_more_round_not_the_most(clock):
    # a slow first round (as on the H200 after a warm-up) used to pin every check to MAX_ROUNDS
    result = _measure_rounds(clock, [8.0])
    assert len(result.rounds) == 4 and result.claimed_ms == pytest.approx(2.0)
    assert not result.retry                    # the other rounds agree: nothing to retry


def test_rounds_that_never_agree_stop_at_the_most_and_ask_for_a_retry(clock):
    result = _measure_rounds(clock, [2.0, 3.0, 4.5, 2.0, 3.0, 4.5, 2.0])
    assert len(result.rounds) == perf.MAX_ROUNDS
    assert result.retry and "rounds disagree" in result.retry_reasons[-1]


def test_agreeing_rounds_stop_at_the_asked_number(clock):
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)}, rounds=3, wall_check=False)
    assert len(result.rounds) == 3


def test_two_rounds_that_agree_closely_settle_a_graded_check_early(clock):
    result = _measure_rounds(clock, [2.0, 2.02], min_rounds=perf.GRADED_MIN_ROUNDS)
    assert len(result.rounds) == 2 and result.claimed_ms == pytest.approx(2.0)


def test_two_rounds_further_apart_than_the_early_spread_are_timed_on(clock):
    result = _measure_rounds(clock, [2.0, 2.1, 2.0], min_rounds=perf.GRADED_MIN_ROUNDS)
    assert len(result.rounds) == 3 and result.claimed_ms == pytest.approx(2.0)


def test_wrong_output_on_timed_inputs_fails_the_measurement(clock):
    with pytest.raises(AssertionError, match="wrong output"):
        measure(clock, kernel_module(clock, 2.0, output=lambda x: x), {"base": baseline(clock, 1.0)})


def test_forged_fast_timer_is_capped_by_the_checkers_wall_clock(clock, monkeypatch):
    # The student's code patched do_bench: it claims 0.01 ms while each call really takes 2 ms.
    def forged(fn, warmup_ms=0, rep_ms=0):
        fn()
        return 0.01

    monkeypatch.setattr(in_worker, "bench_median", forged)
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)})
    assert result.bound_applied
    assert result.submission_ms == pytest.approx((2.0 - perf.HOST_ALLOWANCE_MS) / perf.WALL_SLACK)
    assert result.ratio <= 0.5 * perf.WALL_SLACK * 2.0 / (2.0 - perf.HOST_ALLOWANCE_MS) + 1e-9


def test_honest_claim_survives_transport_overhead(clock):
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)}, overhead_ms=10.0)
    assert result.window.conclusive
    assert not result.bound_applied
    assert result.ratio == pytest.approx(0.5)


def test_stalling_the_worker_only_lowers_its_own_score(clock):
    honest = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)})
    stalled = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)}, overhead_ms=500.0)
    assert stalled.ratio <= honest.ratio


def test_host_bound_small_kernels_are_not_penalised_by_the_window(clock):
    # A 0.03 ms kernel whose Python launch takes 0.045 ms: back to back, the host sets the pace.
    launch = {"ms": 0.0}

    class HostBoundImpl(FakeImpl):
        def run(self, fn, *args):
            if fn is perf.call_repeatedly:
                launch["ms"] = 0.015          # extra host time per call, invisible to do_bench's events
            try:
                return super().run(fn, *args)
            finally:
                launch["ms"] = 0.0

    def add_one(x):
        clock.advance(0.03 + launch["ms"])
        return x + 1

    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))
    result = perf.measure_ratio(HostBoundImpl(modules, clock), "demo.add_one", counter_inputs(),
                                  {"base": baseline(clock, 0.03)}, check=exact_check, bench=clock_bench(clock),
                                  clock=clock, sync=lambda: None, environment=lambda: [])
    assert result.window.conclusive and not result.bound_applied
    assert result.ratio == pytest.approx(1.0)


def test_claim_slower_than_the_wall_clock_is_rejected(clock, monkeypatch):
    monkeypatch.setattr(in_worker, "bench_median", lambda fn, warmup_ms=0, rep_ms=0: 1e6)
    with pytest.raises(AssertionError, match="not trustworthy"):
        measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)})


class ForgingImpl(FakeImpl):
    """A worker whose replies are not what the harness function returns."""

    def __init__(self, modules, clock, reply):
        super().__init__(modules, clock)
        self.reply = reply

    def run(self, fn, *args):
        real = super().run(fn, *args)
        return self.reply(fn, real)


@pytest.mark.parametrize("forged", [lambda fn, real: "fast", lambda fn, real: (float("nan"), *real[1:]),
                                    lambda fn, real: (-1.0, *real[1:]), lambda fn, real: (2.0,),
                                    lambda fn, real: real[:2], lambda fn, real: (*real[:2], -1),
                                    lambda fn, real: (*real[:2], "3")],
                         ids=["string", "nan", "negative", "no-output", "no-refreshes", "negative-refreshes",
                              "string-refreshes"])
def test_a_malformed_timing_reply_fails_cleanly(clock, forged):
    impl = ForgingImpl(kernel_module(clock, 2.0), clock,
                       lambda fn, real: forged(fn, real) if fn is perf.time_kernel else real)
    with pytest.raises(AssertionError):
        perf.measure_ratio(impl, "demo.add_one", counter_inputs(), {"base": baseline(clock, 1.0)},
                             check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                             environment=lambda: [])


@pytest.mark.parametrize("account, kept", [
    ({"events_ms": 1.5, "synced_ms": 2.5, "note": "fast"}, {"worker_events_ms": 1.5, "worker_synced_ms": 2.5}),
    ({"events_ms": float("nan"), "synced_ms": "fast"}, {}), ("fast", {})], ids=["numbers", "not-numbers", "not-a-dict"])
def test_each_round_keeps_the_workers_account_of_its_claim_and_nothing_else(clock, account, kept):
    impl = ForgingImpl(kernel_module(clock, 2.0), clock,
                       lambda fn, real: (*real[:3], account) if fn is perf.time_kernel else real)
    result = perf.measure_ratio(impl, "demo.add_one", counter_inputs(), {"base": baseline(clock, 1.0)},
                                  check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                                  environment=lambda: [])
    for record in result.as_record()["measured"]["rounds"]:
        assert {key: value for key, value in record.items() if key.startswith("worker_")} == kept


def _measure_with_accounts(clock, accounts):
    """An honest 2 ms kernel against a 1 ms baseline, its worker accounting for round k with accounts[k]
    ((events ms, span ms to a device sync)) and claiming what time_kernel makes of them."""
    rounds = iter(accounts)

    def forge(fn, real):
        if fn is not perf.time_kernel:
            return real
        events, synced = next(rounds)
        return perf.claimed_ms(events, synced), real[1], real[2], {"events_ms": events, "synced_ms": synced}

    impl = ForgingImpl(kernel_module(clock, 2.0), clock, forge)
    return perf.measure_ratio(impl, "demo.add_one", counter_inputs(), {"base": baseline(clock, 1.0)},
                                check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                                environment=lambda: [])


def test_spans_a_slowed_host_lengthened_in_most_rounds_do_not_lower_the_ratio(clock):
    # H200, eight references at 4 per GPU: spans of 0.25-0.28 ms in three rounds of four beside events
    # of 0.19 ms. The claim was each round's own max(events, span / SYNC_SLACK).
    result = _measure_with_accounts(clock, [(2.0, 3.3), (2.0, 2.2), (2.0, 3.3), (2.0, 3.3)] * 2)
    assert result.ratio == pytest.approx(0.5)
    assert not result.retry
    assert [r["graded_ms"] for r in result.as_record()["measured"]["rounds"]] == [2.0] * len(result.rounds)


def test_events_a_shared_gpu_slowed_in_most_rounds_do_not_lower_the_ratio(clock):
    # H200, eight references at 4 per GPU: an honest 0.19 ms fp16 matmul's events read 0.23-0.29 ms in
    # five rounds of seven, its spans clean, and the median of the rounds cost it points
    result = _measure_with_accounts(clock, [(2.6, 2.2), (2.8, 2.2), (2.0, 2.2), (2.5, 2.2), (2.0, 2.2),
                                            (2.9, 2.2), (2.7, 2.2)] * 2)
    assert len(result.rounds) == perf.MAX_ROUNDS
    assert result.ratio == pytest.approx(0.5) and result.claimed_ms == pytest.approx(2.0)
    assert result.retry                        # still flagged for another look, scored by its clean rounds


def test_noise_slowing_the_baseline_in_most_rounds_does_not_raise_the_ratio(clock):
    times = iter([1.0] + [1.3, 1.0, 1.3, 1.3, 1.0, 1.3, 1.3] + [1.0] * 10)   # the first: its untimed set-up

    def factory(x):
        return lambda: clock.advance(next(times))

    result = measure(clock, kernel_module(clock, 2.0), {"base": factory}, wall_check=False)
    assert result.ratio == pytest.approx(0.5) and result.baselines_ms["base"] == pytest.approx(1.0)


def test_work_hidden_on_a_side_stream_in_every_round_still_counts(clock):
    # the timed stream's events see 0.2 ms; every span to a device sync holds the hidden 2.2 ms, and the
    # synchronize's slack covers only what the events saw (H100: the cheat read 1.02-1.08 of a copy
    # against the clean kernel's 0.99 while hidden work earned the slack too)
    result = _measure_with_accounts(clock, [(0.2, 2.2), (0.2, 2.3), (0.2, 2.4)] * 3)
    assert result.claimed_ms == pytest.approx(2.2 - (perf.SYNC_SLACK - 1) * 0.2)


@pytest.mark.parametrize("events, synced, graded", [
    (1.0, 1.08, 1.0),        # honest: the span's wake-up within the slack
    (1.0, 1.2, 1.1),         # honest, host slowed past the slack: the excess counts, continuously
    (0.0, 2.0, 2.0),         # every call's work on a side stream: the whole span counts
    (0.5, 1.0, 0.95),        # half of it hidden: the slack of the visible half only
    (1.0, None, 1.0),        # no span (the CPU): the events
])
def test_the_synchronize_s_slack_is_earned_only_by_work_the_events_saw(events, synced, graded):
    assert perf.claimed_ms(events, synced) == pytest.approx(graded)


def test_the_quickest_span_never_raises_a_claim_and_needs_an_account():
    def round_(claim, **account):
        return perf.Round(claim, {"base": 1.0}, wall_ms=0.0, account=account)

    measured = [round_(1.0, events_ms=2.0, synced_ms=2.2), round_(3.0, events_ms=1.0, synced_ms=3.3),
                round_(3.0, events_ms=1.0)]
    assert perf.graded_claims(measured) == pytest.approx([1.0, 2.2 - (perf.SYNC_SLACK - 1) * 1.0, 3.0])


class StalledWindowImpl(FakeImpl):
    """A worker whose host is descheduled for `stall_ms` during each of its first `stalls` windows, and
    then also for `per_call_ms` in each of their calls."""

    def __init__(self, modules, clock, stall_ms, stalls, per_call_ms=0.0):
        super().__init__(modules, clock)
        self.stall_ms, self.stalls, self.per_call_ms, self.windows = stall_ms, stalls, per_call_ms, 0

    def run(self, fn, *args):
        if fn is perf.call_repeatedly:
            self.windows += 1
            if self.windows <= self.stalls:
                self.clock.advance(self.stall_ms + self.per_call_ms * args[-1])
        return super().run(fn, *args)


def _measure_with_stalled_windows(clock, stalls, stall_ms=200.0, per_call_ms=0.0):
    impl = StalledWindowImpl(kernel_module(clock, 2.0), clock, stall_ms, stalls, per_call_ms)
    result = perf.measure_ratio(impl, "demo.add_one", counter_inputs(), {"base": baseline(clock, 1.0)},
                                  check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                                  environment=lambda: [])
    return result, impl.windows


def test_a_window_slowed_by_a_stalled_host_is_timed_again_and_the_quickest_pass_kept(clock):
    # An honest 2 ms kernel whose window host stalled 200 ms (neighbours compiling): 6 ms a call, bound 3.97
    result, windows = _measure_with_stalled_windows(clock, stalls=1)
    assert windows == 2 and not result.bound_applied
    assert result.ratio == pytest.approx(0.5)
    assert result.as_record()["measured"]["wall_window"]["passes"] == 2      # said for staff


def test_a_stall_in_every_window_is_spread_over_the_longer_passes_after_the_first(clock):
    # 200 ms in each pass: 6 ms a call over the first pass's 50 calls, 3 ms over the second's 200
    result, windows = _measure_with_stalled_windows(clock, stalls=perf.WALL_PASSES)
    assert windows == 2 and not result.bound_applied and result.ratio == pytest.approx(0.5)
    timed = result.as_record()["measured"]["wall_window"]["timed"]
    assert timed == [[50, pytest.approx(300.0)], [50 * perf.WALL_LONG_FACTOR, pytest.approx(600.0)]]


def test_a_longer_stall_in_every_window_is_spread_over_the_third_and_longest_pass(clock):
    # 300 ms in each pass: 3.5 ms a call over the second pass's 200 calls, 2.375 over the third's 800
    result, windows = _measure_with_stalled_windows(clock, stalls=perf.WALL_PASSES, stall_ms=300.0)
    assert windows == 3 and not result.bound_applied and result.ratio == pytest.approx(0.5)


def test_a_host_slow_in_every_call_of_every_window_still_bounds_the_claim(clock):
    # no pass is quick: each of its calls costs 4 ms more than the claim, however long the pass
    result, windows = _measure_with_stalled_windows(clock, stalls=perf.WALL_PASSES, stall_ms=0.0,
                                                    per_call_ms=4.0)
    assert windows == perf.WALL_PASSES and result.bound_applied
    assert result.submission_ms == pytest.approx((6.0 - perf.HOST_ALLOWANCE_MS) / perf.WALL_SLACK)


def test_rounds_after_the_first_warm_up_for_less_on_both_sides(clock):
    warmups = {"submission": [], "baseline": []}

    class RecordingImpl(FakeImpl):
        def run(self, fn, *args):
            if fn is perf.time_kernel:
                warmups["submission"].append(args[2])
            return super().run(fn, *args)

    def bench(fn, warmup_ms=0, rep_ms=0):
        warmups["baseline"].append(warmup_ms)
        return clock_bench(clock)(fn)

    perf.measure_ratio(RecordingImpl(kernel_module(clock, 2.0), clock), "demo.add_one", counter_inputs(),
                         {"base": baseline(clock, 1.0)}, check=exact_check, bench=bench, clock=clock,
                         sync=lambda: None, environment=lambda: [], rounds=3, wall_check=False)
    later = perf.LATER_ROUND_WARMUP_MS
    assert warmups["submission"] == warmups["baseline"] == [perf.DEFAULT_WARMUP_MS, later, later]


def test_a_window_reply_missing_outputs_fails_cleanly(clock):
    impl = ForgingImpl(kernel_module(clock, 2.0), clock,
                       lambda fn, real: real[:1] if fn is perf.call_repeatedly else real)
    with pytest.raises(AssertionError, match="one output per input set"):
        perf.measure_ratio(impl, "demo.add_one", counter_inputs(), {"base": baseline(clock, 1.0)},
                             check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                             environment=lambda: [])


def test_window_outputs_are_audited(clock):
    calls = {"n": 0}

    def add_one(x):
        calls["n"] += 1
        clock.advance(2.0)
        return x + 1 if calls["n"] <= 6 else x    # right while timed, wrong in the window

    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))
    with pytest.raises(AssertionError, match="wrong output"):
        measure(clock, modules, {"base": baseline(clock, 1.0)})


def test_tiny_claims_make_the_window_inconclusive(clock):
    result = measure(clock, kernel_module(clock, 1e-5), {"base": baseline(clock, 1e-5)})
    assert result.window.calls == perf.MAX_WALL_CALLS
    assert not result.window.conclusive
    assert not result.bound_applied


def test_window_calls_scale_with_the_claim(clock):
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)})
    assert result.window.calls == int(perf.WALL_WINDOW_MS / 2.0)
    assert result.window.input_sets == perf.MAX_WALL_SETS


class LargeInput(int):
    """A counter input that says it holds 256 MiB, as the largest graded inputs do."""

    def element_size(self):
        return 2

    def numel(self):
        return 1 << 27


def test_the_window_keeps_its_input_sets_within_a_memory_budget(clock):
    counter = counter_inputs()
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)},
                     make_inputs=lambda: tuple(LargeInput(x) for x in counter()))
    assert result.window.calls == int(perf.WALL_WINDOW_MS / 2.0)     # as many calls, over fewer sets
    assert result.window.input_sets == perf.WALL_INPUT_BUDGET_BYTES // (256 << 20) == 4


def test_baseline_drift_within_the_spread_is_not_a_retry(clock):
    times = iter([1.0, 1.2, 1.0] + [1.0] * 10)   # 20%: what cuDNN drifted between rounds on a healthy H200

    def factory(x):
        return lambda: clock.advance(next(times))

    result = measure(clock, kernel_module(clock, 2.0), {"base": factory}, wall_check=False)
    assert not result.retry


def test_disagreeing_rounds_ask_for_a_retry(clock):
    times = iter([2.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0])   # the first: the baseline's untimed set-up

    def factory(x):
        return lambda: clock.advance(next(times))

    result = measure(clock, kernel_module(clock, 2.0), {"base": factory}, wall_check=False)
    assert result.retry
    assert "rounds disagree" in result.retry_reasons[0]


def test_environment_off_flags_retry_but_keeps_the_ratio(clock):
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)},
                     environment=lambda: ["copy bandwidth 2000 GB/s is below this GPU's norm"])
    assert result.retry
    assert result.ratio == pytest.approx(0.5)
    assert result.as_record()["retry"] is True


def test_record_has_the_fields_the_plugin_scores(clock):
    record = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)},
                     flops=2e9, bytes_moved=4e6).as_record()
    assert set(record) == {"ratio", "baseline", "measured", "retry"}
    assert record["ratio"] == pytest.approx(0.5)
    assert record["measured"]["tflops"] == pytest.approx(1.0)      # 2e9 FLOP in 2 ms
    assert record["measured"]["gbs"] == pytest.approx(2.0)


def test_each_round_says_how_long_its_baselines_and_the_workers_pause_took(clock):
    import contextlib

    @contextlib.contextmanager
    def slow_pause(impl):               # stopping the worker and waiting for a quiet GPU: 5 ms
        clock.advance(5.0)
        yield []

    result = measure(clock, kernel_module(clock, 2.0), {"fast": baseline(clock, 1.0), "slow": baseline(clock, 3.0)},
                     pause=slow_pause)
    first, second = result.as_record()["measured"]["rounds"][:2]
    assert first["pause_ms"] == pytest.approx(5.0) and first["baselines_wall_ms"] == pytest.approx(5.0 + 1.0 + 3.0)
    assert second["baselines_wall_ms"] == pytest.approx(5.0 + 1.0)     # comparison baselines once only
    for entry in (first, second):
        assert entry["round_ms"] == pytest.approx(entry["wall_ms"] + entry["baselines_wall_ms"])


def test_an_allocator_short_of_gpu_memory_while_timing_asks_for_a_retry(clock, monkeypatch):
    # On a GPU shared with other submissions, an allocation that fails frees the cache and synchronises
    # the device inside the timed calls: a stall the kernel did not cause, never a lower grade.
    retries = {"worker": 0, "checker": 0}
    monkeypatch.setattr(perf_measure, "alloc_retries",
                        lambda modules: retries["checker" if modules is None else "worker"])
    modules = kernel_module(clock, 2.0)
    add_one = modules.demo.add_one

    def short_of_memory(x):
        retries["worker"] += 1
        return add_one(x)

    modules.demo.add_one = short_of_memory
    result = measure(clock, modules, {"base": baseline(clock, 1.0)})
    assert result.retry and "memory ran short" in result.retry_reasons[0] and "worker" in result.retry_reasons[0]
    assert result.as_record()["measured"]["alloc_retries"]["worker"] > 0
    assert result.ratio == pytest.approx(0.5)          # scored as measured, flagged for a regrade


def test_allocator_retries_from_before_the_check_are_no_reason_to_retry(clock, monkeypatch):
    monkeypatch.setattr(perf_measure, "alloc_retries", lambda modules: 7)    # retries before the check do not count
    result = measure(clock, kernel_module(clock, 2.0), {"base": baseline(clock, 1.0)})
    assert not result.retry and "alloc_retries" not in result.as_record()["measured"]


def test_measure_ratio_needs_a_baseline(clock):
    with pytest.raises(ValueError, match="baseline"):
        measure(clock, kernel_module(clock, 2.0), {})


def test_factories_outside_grader_are_refused():
    with pytest.raises(ValueError, match="grader/"):
        perf.resolve_target(None, "os:system", ())


def test_factory_targets_get_the_modules_and_inputs(monkeypatch):
    monkeypatch.setattr(in_worker, "_demo_factory", lambda modules, x: (lambda: (modules, x)), raising=False)
    step = perf.resolve_target("MODULES", "grader.perf.in_worker:_demo_factory", (3,))
    assert step() == ("MODULES", 3)


# --- environment norms ----------------------------------------------------------------------------------


def test_slow_copy_on_an_h200_is_a_reason_to_retry():
    info = {"gpu_name": "NVIDIA H200", "copy_gbs": 2000.0, "matmul_tflops": 700.0, "other_gpu_processes": []}
    assert any("copy bandwidth" in reason for reason in environment.problems(info))


def test_slow_matmul_on_an_h200_is_a_reason_to_retry():
    info = {"gpu_name": "NVIDIA H200", "copy_gbs": 4200.0, "matmul_tflops": 400.0, "other_gpu_processes": []}
    assert any("matmul" in reason for reason in environment.problems(info))


def test_a_healthy_h200_has_no_reasons():
    info = {"gpu_name": "NVIDIA H200", "copy_gbs": 4200.0, "matmul_tflops": 700.0, "other_gpu_processes": []}
    assert environment.problems(info) == []


def test_other_processes_on_the_gpu_are_a_reason_to_retry():
    info = {"gpu_name": "Some GPU", "copy_gbs": None, "matmul_tflops": None, "other_gpu_processes": [4242]}
    assert environment.problems(info) == ["other processes are using the GPU (pids 4242)"]


def test_gpu_processes_outside_our_tree_are_foreign():
    assert environment.foreign_pids([10, 11, 99], ours={10, 11}, me=10) == [99]


def test_gpu_pids_from_another_namespace_are_not_blamed():
    # this process holds a CUDA context but is not listed: nvidia-smi's pids are not ours to compare
    assert environment.foreign_pids([5123, 5124], ours={10, 11}, me=10) == []


def test_nvidia_smi_clocks_are_read_for_our_gpu(monkeypatch):
    rows = [["GPU-aaa", "580.65", "1980", "3201"], ["GPU-bbb", "580.65", "345", "1593"]]
    monkeypatch.setattr(environment, "_smi", lambda arguments: rows)
    assert environment.query_gpu("GPU-bbb") == {"driver": "580.65", "clocks": {"sm_mhz": 345, "mem_mhz": 1593}}
    assert environment.query_gpu(None)["clocks"]["sm_mhz"] == 1980


def test_without_nvidia_smi_the_query_is_empty(monkeypatch):
    monkeypatch.setattr(environment, "_smi", lambda arguments: [])
    assert environment.query_gpu("GPU-aaa") == {}
    assert environment.other_gpu_processes("GPU-aaa") == []


def test_processes_on_other_gpus_are_ignored(monkeypatch):
    import os

    rows = [[str(os.getpid()), "GPU-aaa"], ["999999", "GPU-bbb"], ["888888", "GPU-aaa"]]
    monkeypatch.setattr(environment, "_smi", lambda arguments: rows)
    assert environment.other_gpu_processes("GPU-aaa") == [888888]


def test_unknown_gpu_models_have_no_norm():
    assert environment.norm_for("NVIDIA GeForce RTX 4090") is None
    assert environment.norm_for("NVIDIA H200") is not None


def test_calibration_match_warns_when_the_model_differs():
    match = environment.calibration_match("NVIDIA H200", {"NVIDIA H100 80GB HBM3": {}})
    assert match["model"] == "NVIDIA H100 80GB HBM3" and not match["exact"]
    assert "H100" in match["warning"]
    assert environment.calibration_match("NVIDIA H200", {"NVIDIA H200": {}})["warning"] is None
    assert environment.calibration_match("NVIDIA H200", {})["model"] is None


def test_fingerprint_without_a_gpu_still_names_the_versions():
    info = environment.fingerprint(measure=False)
    assert info["torch"] and "gpu_name" in info and "clocks_before" in info


# --- the real isolated worker (CPU): the reply contract holds end to end --------------------------------


def test_timing_round_trip_through_an_isolated_worker():
    from grader.impl import make_impl

    impl = make_impl("solutions", isolated=True)
    try:
        def check(output, inputs):
            assert output == 2 * inputs[0], f"param_bytes({inputs[0]}, 'bf16') gave {output}"

        sizes = iter(range(1000, 100000, 1000))
        result = perf.measure_ratio(
            impl, "accounting.param_bytes", lambda: (next(sizes), "bf16"),
            {"python multiply": lambda n, dtype: (lambda: 2 * n)}, check=check, rounds=2,
            warmup_ms=1, rep_ms=5, environment=lambda: [])
    finally:
        impl.close()
    assert result.claimed_ms > 0 and result.ratio > 0
    assert result.window is not None and result.window.input_sets >= 2


class _Timeline:
    """A host and a GPU in simulated ms: the host pays each launch's cost as it queues, and the GPU runs
    what was queued, in order, no sooner than it was queued. A synchronize wakes the host 0.01 ms after
    the GPU's last work."""

    def __init__(self):
        self.host = self.gpu = 0.0

    def launch(self, host_ms: float, gpu_ms: float) -> float:
        self.host += host_ms
        self.gpu = max(self.gpu, self.host) + gpu_ms
        return self.gpu

    def synchronize(self):
        self.host = max(self.host, self.gpu) + 0.01


class _TimelineEvent:
    def __init__(self, timeline):
        self.timeline, self.at = timeline, None

    def record(self):
        self.at = self.timeline.launch(0.005, 0.0)

    def query(self):
        return self.at <= self.timeline.host

    def elapsed_time(self, end):
        return end.at - self.at


def _event_times_on(timeline, call_host_ms, kernel_ms=0.19, calls=100):
    flush = types.SimpleNamespace(zero_=lambda: timeline.launch(0.01, 0.08))
    return in_worker._event_times(lambda: timeline.launch(call_host_ms, kernel_ms),
                                  lambda: timeline.launch(0.03, 0.05), flush, calls,
                                  event=lambda: _TimelineEvent(timeline),
                                  pause=lambda ms: timeline.launch(0.005, ms))


# The GPU's share of a call here is 0.32 ms (refresh, flush, kernel): a host twice as slow still queues
# ten calls within the longest pause.
@pytest.mark.parametrize("call_host_ms", [0.02, 0.4, 0.6], ids=["host-ahead", "host-slower", "host-twice-as-slow"])
def test_a_host_slower_than_the_gpu_does_not_lengthen_a_calls_events(call_host_ms):
    times, delayed = _event_times_on(_Timeline(), call_host_ms)
    assert statistics.median(times) == pytest.approx(0.19)
    assert delayed < len(times) // 4


def test_calls_the_host_may_have_delayed_are_counted():
    _, delayed = _event_times_on(_Timeline(), 0.02)
    _, delayed_slow_host = _event_times_on(_Timeline(), 0.6)
    assert delayed == 0 < delayed_slow_host


def _quickest_span_on(timeline, call_host_ms, kernel_ms=0.19, calls=50, side_stream_ms=0.0):
    def call():
        timeline.launch(call_host_ms, kernel_ms)
        timeline.gpu += side_stream_ms          # work the timed stream's events never see

    flush = types.SimpleNamespace(zero_=lambda: timeline.launch(0.01, 0.08))
    options = dict(event=lambda: _TimelineEvent(timeline), synchronize=timeline.synchronize)
    empty = in_worker._quickest_span_ms(lambda: None, lambda: None, flush, calls, pause=lambda ms: None, **options)
    span = in_worker._quickest_span_ms(call, lambda: timeline.launch(0.03, 0.05), flush, calls,
                                       pause=lambda ms: timeline.launch(0.005, ms), **options)
    return span - empty


@pytest.mark.parametrize("call_host_ms", [0.02, 0.4, 1.0], ids=["host-ahead", "host-slower", "host-much-slower"])
def test_a_host_slower_than_the_gpu_does_not_lengthen_the_span_to_a_device_sync(call_host_ms):
    assert _quickest_span_on(_Timeline(), call_host_ms) == pytest.approx(0.19, abs=0.01)


def test_work_on_a_side_stream_stays_in_the_span_after_its_pause():
    assert _quickest_span_on(_Timeline(), 0.4, side_stream_ms=0.5) == pytest.approx(0.69, abs=0.01)
