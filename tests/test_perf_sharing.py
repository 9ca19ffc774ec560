"""A perf check on a shared GPU (issue 17 item 1): everything timed has the GPU alone; only a warm-up
lends it out, and only while compiling."""

from __future__ import annotations

import contextlib
import types

import pytest
from perf_fakes import FakeImpl, clock_bench, counter_inputs, exact_check

from grader import gpu_lock, timing


class RecordingLock:
    """Stands in for grader.gpu_lock: records what runs while it is held exclusively."""

    def __init__(self, waited_out=False):
        self.exclusive_now = False
        self.shared_now = False
        self.waited_out = waited_out
        self.held_exclusively = False
        self.lending = None          # lend_for_compiles of the exclusive hold now held

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
        try:
            yield gpu_lock.Hold("exclusive", 12.0, self.waited_out)
        finally:
            self.exclusive_now = self.held_exclusively = False
            self.lending = None


def run_measure(clock, lock, events, **options):
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

    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))
    return timing.measure_ratio(FakeImpl(modules, clock), "demo.add_one", counter_inputs(), {"base": base},
                                check=exact_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                                environment=lambda: [], lock=lock, ramp=ramp, **options)


@pytest.fixture
def clock(monkeypatch):
    from perf_fakes import fake_clock

    return fake_clock(monkeypatch)


def test_every_call_runs_with_the_gpu_alone_and_only_the_warm_up_lends_it_to_compiles(clock, monkeypatch):
    monkeypatch.delenv(timing.WARMUP_ENV, raising=False)
    events = []
    run_measure(clock, RecordingLock(), events)
    # the clock ramp and the warm-up (compile, autotune) first, alone but lending the GPU while compiling
    assert events[:4] == [("ramp", True), ("ramp shared", False), ("submission", True), ("lending", True)]
    timed = events[4:]
    assert all(value for name, value in timed if name in ("submission", "baseline")), events   # alone
    assert {value for name, value in timed if name == "lending"} == {False}, events  # rounds keep it


def test_warm_up_can_be_asked_to_run_beside_other_submissions(clock, monkeypatch):
    monkeypatch.setenv(timing.WARMUP_ENV, "shared")
    events = []
    run_measure(clock, RecordingLock(), events)
    assert events[:3] == [("ramp", False), ("ramp shared", True), ("submission", False)]
    assert all(exclusive for name, exclusive in events[4:] if name in ("submission", "baseline")), events


def test_a_gpu_that_could_not_be_had_alone_asks_for_a_retry(clock):
    result = run_measure(clock, RecordingLock(waited_out=True), [])
    assert result.retry and "could not be had alone" in result.retry_reasons[0]


def test_other_submissions_processes_are_no_reason_to_retry_while_the_gpu_is_ours(monkeypatch):
    from grader import environment

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
    item = types.SimpleNamespace(get_closest_marker=lambda name: object() if (perf and name == "perf") else None)
    hook = plugin.pytest_runtest_call(item)
    next(hook)                                   # the test body runs here
    assert lock.shared_now is held
    with pytest.raises(StopIteration):
        hook.send(None)
    assert not lock.shared_now
