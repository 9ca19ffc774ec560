"""A perf check on a shared GPU: everything timed has the GPU alone; only a warm-up
lends it out, and only while compiling."""

from __future__ import annotations

import contextlib
import types

import pytest
from perf_fakes import FakeImpl, clock_bench, counter_inputs, exact_check

from grader import perf
from grader.perf import gpu_lock
from grader.perf import measure as perf_measure


class RecordingLock:
    """Stands in for grader.perf.gpu_lock: records what runs while it is held exclusively."""

    def __init__(self, waited_out=False):
        self.exclusive_now = False
        self.shared_now = False
        self.waited_out = waited_out
        self.held_exclusively = False
        self.lending = None          # lend_for_compiles of the exclusive hold now held
        self.exclusive_takes = 0
        self.alone_now = not waited_out

    @contextlib.contextmanager
    def shared(self, wait_s=0.0):
        self.shared_now = True
        try:
            yield gpu_lock.Hold("shared")
        finally:
            self.shared_now = False

    @contextlib.contextmanager
    def exclusive(self, wait_s=0.0, lend_for_compiles=False):
        self.exclusive_now = self.held_exclusively = True
        self.lending = lend_for_compiles
        self.exclusive_takes += 1
        try:
            yield gpu_lock.Hold("exclusive", 12.0, self.waited_out)
        finally:
            self.exclusive_now = self.held_exclusively = False
            self.lending = None

    @contextlib.contextmanager
    def keep_through_compiles(self):
        lending, self.lending = self.lending, False
        try:
            yield
        finally:
            self.lending = lending


def run_measure(clock, lock, events, baselines=None, **options):
    def add_one(x):
        events.append(("submission", lock.exclusive_now))
        events.append(("lending", lock.lending))
        clock.advance(2.0)
        return x + 1

    def ramp():
        events.append(("ramp", lock.exclusive_now))
        events.append(("ramp shared", lock.shared_now))

    def base(x):
        def call():
            events.append(("baseline", lock.exclusive_now))
            clock.advance(1.0)
            return x + 1
        return call

    def check(output, inputs):
        events.append(("check alone", lock.exclusive_now))
        events.append(("check shared", lock.shared_now))
        exact_check(output, inputs)

    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))
    return perf.measure_ratio(FakeImpl(modules, clock), "demo.add_one", counter_inputs(),
                                baselines or {"base": base}, check=check, bench=clock_bench(clock), clock=clock,
                                sync=lambda: None, environment=lambda: [], lock=lock, ramp=ramp, **options)


def measure_a_wrong_kernel(clock, lock):
    """measure_ratio on a kernel whose outputs are off by one: the check fails with "wrong output"."""
    def wrong(x):
        clock.advance(2.0)
        return x + 2

    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=wrong))
    with pytest.raises(AssertionError, match="wrong output"):
        perf.measure_ratio(FakeImpl(modules, clock), "demo.add_one", counter_inputs(),
                             {"base": lambda x: (lambda: x + 1)}, check=exact_check, bench=clock_bench(clock),
                             clock=clock, sync=lambda: None, environment=lambda: [], lock=lock, ramp=lambda: None)


def test_every_call_runs_with_the_gpu_alone_and_only_the_warm_up_lends_it_to_compiles(clock, monkeypatch):
    monkeypatch.delenv(perf.WARMUP_ENV, raising=False)
    events, lock = [], RecordingLock()
    run_measure(clock, lock, events)
    # the clock ramp and the baselines' set-up beside the others, then the warm-up (compile, autotune)
    # alone, lending while compiling
    assert events[:5] == [("ramp", False), ("ramp shared", True), ("baseline", False), ("submission", True),
                          ("lending", True)]
    timed = [event for event in events[5:] if not event[0].startswith("check")]
    assert all(value for name, value in timed if name in ("submission", "baseline")), events   # alone
    assert {value for name, value in timed if name == "lending"} == {False}, events  # rounds keep it
    assert lock.exclusive_takes == 1     # warm-up and rounds queue for the GPU once


class LendingLock(RecordingLock):
    """A RecordingLock keeping totals as the real lock does: time held alone, less what was lent."""

    def __init__(self, clock):
        super().__init__()
        self.totals, self.clock = gpu_lock.LockTotals(), clock

    @contextlib.contextmanager
    def exclusive(self, wait_s=0.0, lend_for_compiles=False):
        with super().exclusive(wait_s, lend_for_compiles) as hold:
            start = self.clock()
            try:
                yield hold
            finally:
                self.totals.alone_s += self.clock() - start - self.totals.lent_s - self.totals.waited_s


def test_a_perf_record_says_where_its_time_alone_went_leaving_out_what_compiles_borrowed(clock, monkeypatch):
    monkeypatch.delenv(perf.WARMUP_ENV, raising=False)
    lock = LendingLock(clock)
    events = []
    original_advance = clock.advance

    def advance(ms):                    # a warm-up call of 2 ms spends 1.5 ms compiling, lent out
        if lock.lending and ms:         # (a transport's advance of 0 ms is no compile)
            lock.totals.lent_s += 1.5e-3
        original_advance(ms)

    monkeypatch.setattr(clock, "advance", advance)
    result = run_measure(clock, lock, events)
    phases = result.alone_phases_s
    assert set(phases) == {"warm_up", "rounds", "window", "environment"}
    assert phases["warm_up"] == pytest.approx(0.5e-3)
    # three rounds of: the kernel's untimed first call and its timed one, 2 ms each, then the baseline's 1 ms
    assert phases["rounds"] == pytest.approx(3 * (2 * 2.0 + 1.0) * 1e-3)
    assert sum(phases.values()) == pytest.approx(result.alone_s)
    assert result.as_record()["measured"]["gpu_alone_phases_s"]["rounds"] == pytest.approx(0.015)


def test_a_warm_ups_wait_to_take_the_gpu_back_after_a_compile_is_not_counted_as_time_alone(clock, monkeypatch):
    # Taking the GPU back after a compile waits for the neighbours' calls in flight to end: their time,
    # not the check's, so the warm-up's phase leaves it out as the lock's own total does.
    monkeypatch.delenv(perf.WARMUP_ENV, raising=False)
    lock = LendingLock(clock)
    original_advance = clock.advance

    def advance(ms):                    # a warm-up call of 2 ms: 1.5 ms compiling, then 0.3 ms to take it back
        if lock.lending and ms:
            lock.totals.lent_s += 1.5e-3
            lock.totals.waited_s += 0.3e-3
        original_advance(ms)

    monkeypatch.setattr(clock, "advance", advance)
    result = run_measure(clock, lock, [])
    assert result.alone_phases_s["warm_up"] == pytest.approx(0.2e-3)
    assert sum(result.alone_phases_s.values()) == pytest.approx(result.alone_s)


def test_baselines_set_themselves_up_beside_the_others_before_the_gpu_is_held_alone(clock, monkeypatch):
    # cuDNN's SDPA built its plans on its first call, inside the hold: 0.5-2.2 s per attention check on
    # the H200, a fifth of a reference's time alone, while every other submission on the GPU waited.
    monkeypatch.delenv(perf.WARMUP_ENV, raising=False)
    lock, first_calls = RecordingLock(), {}

    def sets_up_on_first_call(name):
        def factory(x):
            def call():
                first_calls.setdefault(name, (lock.exclusive_now, lock.shared_now))
                clock.advance(1.0)
                return x + 1
            return call
        return factory

    run_measure(clock, lock, [], baselines={"graded": sets_up_on_first_call("graded"),
                                            "comparison": sets_up_on_first_call("comparison")})
    assert first_calls == {"graded": (False, True), "comparison": (False, True)}


def test_outputs_are_checked_after_the_gpu_is_given_back(clock, monkeypatch):
    monkeypatch.delenv(perf.WARMUP_ENV, raising=False)
    events = []
    run_measure(clock, RecordingLock(), events)
    checks = [value for name, value in events if name == "check alone"]
    assert len(checks) == 3 + perf.WALL_AUDITS and not any(checks), events   # three rounds, the window
    assert all(value for name, value in events if name == "check shared"), events
    last_timed = max(i for i, (name, _) in enumerate(events) if name in ("submission", "baseline"))
    assert min(i for i, (name, _) in enumerate(events) if name == "check alone") > last_timed


def test_the_memory_timing_reserved_is_handed_back_on_both_sides(clock, monkeypatch):
    released = []
    monkeypatch.setattr(perf_measure, "release_cached_memory", lambda modules: released.append(modules is None))
    run_measure(clock, RecordingLock(), [])
    assert sorted(released) == [False, True]     # once in the worker, once here


def test_the_memory_is_handed_back_after_a_failed_check_as_well(clock, monkeypatch):
    released = []
    monkeypatch.setattr(perf_measure, "release_cached_memory", lambda modules: released.append(modules is None))

    measure_a_wrong_kernel(clock, RecordingLock())
    assert sorted(released) == [False, True]


def test_handing_memory_back_collects_what_cuda_ipc_lent_and_the_allocator_cached(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "ipc_collect", lambda: calls.append("ipc_collect"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    perf.release_cached_memory(None)
    # blocks a worker had open stay allocated here until collected, so they go before the cache is emptied
    assert calls == ["ipc_collect", "empty_cache"]


def test_a_wrong_output_still_fails_the_check_when_it_is_checked_afterwards(clock):
    lock = RecordingLock()
    measure_a_wrong_kernel(clock, lock)
    assert not lock.exclusive_now and not lock.shared_now


def test_the_graded_baseline_is_timed_every_round_and_a_comparison_baseline_once(clock):
    counts = {"graded": 0, "comparison": 0}

    def counted(name, ms):
        def factory(x):
            def call():
                counts[name] += 1
                clock.advance(ms)
                return x + 1
            return call
        return factory

    result = run_measure(clock, RecordingLock(), [],
                         baselines={"graded": counted("graded", 1.0), "comparison": counted("comparison", 4.0)})
    assert counts == {"graded": 1 + 3, "comparison": 1 + 1}     # each set up once, then timed
    assert result.ratios == {"graded": pytest.approx(0.5), "comparison": pytest.approx(2.0)}
    assert result.as_record()["measured"]["baseline_ms"] == {"graded": 1.0, "comparison": 4.0}


def test_warm_up_can_be_asked_to_run_beside_other_submissions(clock, monkeypatch):
    monkeypatch.setenv(perf.WARMUP_ENV, "shared")
    events = []
    run_measure(clock, RecordingLock(), events)
    assert events[:4] == [("ramp", False), ("ramp shared", True), ("baseline", False), ("submission", False)]
    assert all(exclusive for name, exclusive in events[5:] if name in ("submission", "baseline")), events


def test_a_gpu_that_could_not_be_had_alone_asks_for_a_retry(clock):
    result = run_measure(clock, RecordingLock(waited_out=True), [])
    assert result.retry and "could not be had alone" in result.retry_reasons[0]


def test_a_gpu_not_had_back_after_a_warm_up_compile_asks_for_a_retry(clock):
    lock = RecordingLock()
    lock.alone_now = False               # the take after the compile went past its limit
    result = run_measure(clock, lock, [])
    assert result.retry and "could not be had alone" in result.retry_reasons[0]


def test_other_submissions_processes_are_no_reason_to_retry_while_the_gpu_is_ours(monkeypatch):
    from grader.perf import environment

    lock = RecordingLock()
    monkeypatch.setattr(gpu_lock, "current", lambda: lock)
    monkeypatch.setattr(environment, "session_fingerprint", lambda: {"gpu_name": "Some GPU"})
    monkeypatch.setattr(environment, "other_gpu_processes", lambda uuid: [4242])
    monkeypatch.setattr(environment, "_gpu_uuid_or_none", lambda: None)
    assert environment.retry_reasons() == ["other processes are using the GPU (pids 4242)"]
    with lock.exclusive():
        assert environment.retry_reasons() == []


@pytest.mark.parametrize("perf, held", [(False, True), (True, False)], ids=["ordinary", "perf"])
def test_an_ordinary_test_holds_the_shared_lock_throughout_and_a_perf_test_does_not(monkeypatch, perf, held):
    from grader import plugin

    lock = RecordingLock()
    monkeypatch.setattr(gpu_lock, "current", lambda: lock)
    marker = types.SimpleNamespace(args=("softmax.perf.online",), kwargs={})
    run = types.SimpleNamespace(charge_memory_fault=lambda *args, **kwargs: None)
    item = types.SimpleNamespace(get_closest_marker=lambda name: marker if (perf and name == "perf") else None,
                                 config=types.SimpleNamespace(stash={plugin.GRADING_RUN: run}))
    hook = plugin.pytest_runtest_call(item)
    next(hook)                                   # the test body runs here
    assert lock.shared_now is held
    with pytest.raises(StopIteration):
        hook.send(None)
    assert not lock.shared_now


@pytest.mark.parametrize("phase", ["pytest_runtest_setup", "pytest_runtest_teardown"])
@pytest.mark.parametrize("perf", [False, True], ids=["ordinary", "perf"])
def test_fixtures_set_up_and_torn_down_under_the_shared_lock(monkeypatch, phase, perf):
    from grader import plugin

    lock = RecordingLock()
    monkeypatch.setattr(gpu_lock, "current", lambda: lock)
    marker = types.SimpleNamespace(args=("softmax.perf.online",), kwargs={})
    run = types.SimpleNamespace(charge_memory_fault=lambda *args, **kwargs: None)
    item = types.SimpleNamespace(get_closest_marker=lambda name: marker if (perf and name == "perf") else None,
                                 config=types.SimpleNamespace(stash={plugin.GRADING_RUN: run}))
    hook = getattr(plugin, phase)(item)
    next(hook)                                   # the fixtures run here
    assert lock.shared_now
    with pytest.raises(StopIteration):
        hook.send(None)
    assert not lock.shared_now


@pytest.mark.parametrize("cuda_in_use", [True, False], ids=["cuda-in-use", "no-cuda"])
def test_a_tests_setup_returns_the_gpu_memory_the_previous_test_freed(monkeypatch, cuda_in_use):
    import torch

    from grader import plugin

    returned = []
    monkeypatch.setattr(gpu_lock, "current", lambda: RecordingLock())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: cuda_in_use)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: returned.append("emptied"))
    hook = plugin.pytest_runtest_setup(types.SimpleNamespace())
    next(hook)                                   # the fixtures run here, after the cache went back
    assert returned == (["emptied"] if cuda_in_use else [])
    with pytest.raises(StopIteration):
        hook.send(None)
