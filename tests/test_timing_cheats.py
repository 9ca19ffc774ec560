"""Timing cheats against grader.perf, on CPU with fakes: memoised outputs, work hidden
from the timed stream, and a worker that loads the GPU while the checker times the baseline."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import types

import pytest
from perf_fakes import FakeImpl, clock_bench

from grader import perf
from grader.perf import in_worker, pausing

torch = pytest.importorskip("torch")


def tensor_inputs():
    # 4096 elements: a refresh has 8192 states. At 64 (128 states) a timed call met a state the cheat
    # had seen in about 1 run of 100, and the quickest round then counted that lucky hit.
    state = {"n": 0}

    def make():
        state["n"] += 1
        return (torch.randn(4096, generator=torch.Generator().manual_seed(state["n"])),)

    return make


def plus_one_check(output, inputs):
    assert torch.equal(output, inputs[0] + 1), "wrong output for the timed inputs"


def memoising_module(clock, key):
    """add_one that costs 2 ms the first time it sees `key(x)` and nothing afterwards."""
    cache = {}

    def add_one(x):
        k = key(x)
        if k not in cache:
            clock.advance(2.0)
            cache[k] = x + 1
        clock.advance(0.001)          # a lookup is cheap, not free
        return cache[k].clone()

    return types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))


def measure(clock, modules, **options):
    impl = FakeImpl(modules, clock)
    return perf.measure_ratio(impl, "demo.add_one", tensor_inputs(), {"base": baseline_tensor(clock, 1.0)},
                                check=plus_one_check, bench=clock_bench(clock), clock=clock, sync=lambda: None,
                                environment=lambda: [], wall_check=False, ramp=lambda: None, **options)


def baseline_tensor(clock, ms):
    def factory(x):
        def run():
            clock.advance(ms)
            return x + 1
        return run
    return factory


def sampled_key(x):
    # what a careful cheat keys on: where the input lives, its layout, and a sample of its values
    return (x.data_ptr(), tuple(x.shape), tuple(x.stride()), float(x[0]), float(x[-1]))


def test_an_output_memoised_on_address_layout_and_sampled_values_gains_nothing(clock):
    honest = measure(clock, memoising_module(clock, key=lambda x: object()))   # never hits
    cheat = measure(clock, memoising_module(clock, key=sampled_key))
    assert cheat.claimed_ms == pytest.approx(honest.claimed_ms) == pytest.approx(2.001)


def test_an_output_replayed_for_the_same_address_is_caught_by_the_audit(clock):
    with pytest.raises(AssertionError, match="wrong output for the timed inputs"):
        measure(clock, memoising_module(clock, key=lambda x: x.data_ptr()))


def test_refreshes_replayed_at_once_match_the_worker_s_call_by_call_refreshes():
    worker = (torch.randn(5, 7), torch.randn(3, dtype=torch.float64), torch.arange(4), 3)
    checker = perf.clone_inputs(worker)
    for step in range(1, 12):
        perf.refresh_inputs(worker, seed=99, step=step)
    perf.replay_refreshes(checker, seed=99, steps=11)
    assert all(torch.equal(a, b) for a, b in zip(worker[:3], checker[:3]))
    assert torch.equal(worker[2], torch.arange(4))            # integers are left alone
    original = perf.clone_inputs(checker)
    perf.refresh_inputs(checker, seed=99, step=12)
    assert not torch.equal(checker[0], original[0])
    assert sorted(checker[0].abs().flatten().tolist()) == sorted(original[0].abs().flatten().tolist())


def fake_cuda(monkeypatch, clock, device_sync):
    """CUDA as grader.perf.in_worker sees it, on a fake clock: events stamped where they are recorded (a GPU
    never behind its host, so a pause on it does nothing), and a device-wide synchronize that does what the
    test says."""

    class Event:
        def record(self):
            self.at = clock()

        def query(self):
            return True

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    monkeypatch.setattr(in_worker, "gpu_pause", lambda ms: None)
    monkeypatch.setattr(in_worker, "cuda_available", lambda: True)
    monkeypatch.setattr(in_worker, "_captured_sync", device_sync)
    monkeypatch.setattr(in_worker, "_timing_event", Event)


def test_work_hidden_from_the_timed_stream_is_counted_by_the_synchronised_span(clock, monkeypatch):
    # add_one returns at once and leaves 2 ms of work queued elsewhere (a side stream); only a
    # device-wide synchronize waits for it. The per-call timer (the fake do_bench) sees nothing.
    pending = {"ms": 0.0}

    def add_one(x):
        pending["ms"] += 2.0
        return x + 1

    def device_sync():
        clock.advance(pending["ms"])
        pending["ms"] = 0.0

    fake_cuda(monkeypatch, clock, device_sync)
    monkeypatch.setattr(in_worker, "wall_clock", clock)
    modules = types.SimpleNamespace(demo=types.SimpleNamespace(add_one=add_one))
    result = measure(clock, modules)
    assert result.claimed_ms >= 2.0 - 1e-6     # the events saw nothing, so no slack (the fake clock rounds)


def test_a_host_slowed_by_neighbours_compiles_does_not_slow_an_honest_kernel_s_synchronised_span(monkeypatch):
    # 1 ms of real work per call; on two samples of three the host wakes from the synchronize 0.6 ms
    # late (other submissions compiling on the CPU, --per-gpu). Hidden work would be in every sample.
    from perf_fakes import FakeClock

    clock, samples = FakeClock(), {"n": 0, "called": False}

    def call():
        clock.advance(1.0)
        samples["called"] = True

    def device_sync():
        if samples["called"]:             # the empty call's samples stay clean: the worst case
            samples["n"] += 1
            if samples["n"] % 3:
                clock.advance(0.6)
        samples["called"] = False

    fake_cuda(monkeypatch, clock, device_sync)
    synced = perf.synced_call_ms(call, lambda: None, per_call_ms=1.0)
    assert synced == pytest.approx(1.0, abs=1e-6)     # the median of the samples said 1.6


def test_the_device_synchronize_is_kept_from_before_student_code_rebinds_it(monkeypatch):
    monkeypatch.setattr(in_worker, "_captured_sync", None)
    perf.capture_device_sync()
    kept = in_worker._captured_sync
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    perf.capture_device_sync()
    assert in_worker._captured_sync is kept


def _spin(counter):
    while True:
        counter.value += 1


class WorkerImpl(FakeImpl):
    """A fake impl whose 'worker' is a real process that keeps working on its own (a hostile thread)."""

    def __init__(self, modules, clock, pid):
        super().__init__(modules, clock)
        self.worker_pid = pid


def test_the_worker_is_stopped_while_the_baseline_runs_and_resumed_after(clock):
    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0, lock=False)   # no lock: a stopped holder would block the checker
    spinner = context.Process(target=_spin, args=(counter,), daemon=True)
    spinner.start()
    seen = []

    def base(x):
        def run():
            before = counter.value
            time.sleep(0.05)
            seen.append(counter.value - before)
            clock.advance(1.0)
            return x + 1
        return run

    try:
        while counter.value == 0:
            time.sleep(0.01)
        impl = WorkerImpl(memoising_module(clock, key=lambda x: object()), clock, spinner.pid)
        perf.measure_ratio(impl, "demo.add_one", tensor_inputs(), {"base": base}, check=plus_one_check,
                             bench=clock_bench(clock), clock=clock, sync=lambda: None,
                             environment=lambda: [], wall_check=False)
        # the first call is the baseline's untimed set-up, before any round; the three timed ones come after
        assert len(seen) == 4 and seen[1:] == [0, 0, 0], f"the worker ran while the baseline was timed: {seen}"
        before = counter.value
        time.sleep(0.05)
        assert counter.value > before, "the worker was not resumed"
    finally:
        spinner.kill()
        spinner.join(5)


def test_pausing_stops_the_worker_s_children_too_and_never_the_checker(tmp_path):
    sent = []
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,), daemon=True)
    child.start()
    try:
        impl = types.SimpleNamespace(worker_pid=os.getpid())          # a forged pid: ours
        with pausing.paused_worker(impl, kill=lambda pid, sig: sent.append((pid, sig)), quiet=lambda: True,
                                     settle=lambda pids: None):
            pass
        assert sent == []
        impl = types.SimpleNamespace(worker_pid=child.pid)
        with pausing.paused_worker(impl, kill=lambda pid, sig: sent.append((pid, sig)), quiet=lambda: True,
                                     settle=lambda pids: None):
            assert sent == [(child.pid, signal.SIGSTOP)]
        assert sent[-1] == (child.pid, signal.SIGCONT)
        assert child.pid in pausing.descendants(os.getpid())
    finally:
        child.kill()
        child.join(5)


def test_fresh_values_and_their_replay_hold_across_a_real_worker():
    # the real transport both ways: the worker refreshes its own copy; the checker replays and checks
    from grader.impl import make_impl

    impl = make_impl("solutions", isolated=True)
    gen = torch.Generator().manual_seed(0)

    def check(output, inputs):
        assert torch.allclose(output, torch.softmax(inputs[0], dim=-1), atol=1e-5), "wrong output"

    try:
        result = perf.measure_ratio(impl, "softmax.online_softmax", lambda: (torch.randn(8, 64, generator=gen), 16),
                                      {"torch": lambda x, block: (lambda: torch.softmax(x, dim=-1))}, check=check,
                                      rounds=2, warmup_ms=1, rep_ms=5, environment=lambda: [], wall_check=False,
                                      ramp=lambda: None)
    finally:
        impl.close()
    assert result.claimed_ms > 0 and len(result.rounds) >= 2


def test_pausing_returns_only_once_the_worker_is_really_stopped():
    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0, lock=False)
    spinner = context.Process(target=_spin, args=(counter,), daemon=True)
    spinner.start()
    try:
        while counter.value == 0:
            time.sleep(0.01)
        impl = types.SimpleNamespace(worker_pid=spinner.pid)
        with pausing.paused_worker(impl, quiet=lambda: True):
            assert pausing._state(spinner.pid) == "T"
            frozen = counter.value
            time.sleep(0.02)
            assert counter.value == frozen
        deadline = time.monotonic() + 2.0           # SIGCONT lands asynchronously too
        while pausing._state(spinner.pid) == "T" and time.monotonic() < deadline:
            time.sleep(0.005)
        assert pausing._state(spinner.pid) != "T"
    finally:
        spinner.kill()
        spinner.join(5)
