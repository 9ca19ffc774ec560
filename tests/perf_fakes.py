"""Fakes for testing grader.perf and grader.bench.kernels without a GPU.

A fake clock stands in for time, a clock-reading fake for do_bench, and a fake impl runs the
worker-side functions in this process, as the in-process impl does.
"""

from __future__ import annotations

import types

from grader.perf import in_worker
from grader.perf import measure as perf_measure


class FakeClock:
    def __init__(self):
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s

    def advance(self, ms: float) -> None:
        self.now_s += ms / 1e3


def clock_bench(clock):
    """A do_bench stand-in: run fn once and report how far the fake clock moved."""

    def bench(fn, warmup_ms=0, rep_ms=0):
        start = clock()
        fn()
        return (clock() - start) * 1e3

    return bench


class FakeImpl:
    """impl.run(fn, *args) -> fn(modules, *args), with `overhead_ms` of transport per call."""

    def __init__(self, modules, clock, overhead_ms=0.0):
        self.modules, self.clock, self.overhead_ms = modules, clock, overhead_ms

    def run(self, fn, *args):
        self.clock.advance(self.overhead_ms)
        return fn(self.modules, *args)

    run_harness = run


class LaunchRequiredImpl(FakeImpl):
    """An impl under `guards(require_triton=True)`: a `run` that calls no student code is refused, as
    the real impls refuse a call that launched no Triton kernel."""

    def run(self, fn, *args):
        calls = self.student_calls
        result = super().run(fn, *args)
        if self.student_calls == calls:
            raise AssertionError(f"{fn.__name__} ran no student code under require_triton")
        return result

    def run_harness(self, fn, *args):
        return super().run(fn, *args)

    @property
    def student_calls(self) -> int:
        return self.modules.demo.calls


def kernel_module(clock, ms, events=None, output=lambda x: x + 1):
    def add_one(x):
        demo.calls += 1
        if events is not None:
            events.append(("submission", x))
        clock.advance(ms)
        return output(x)

    demo = types.SimpleNamespace(add_one=add_one, calls=0)
    return types.SimpleNamespace(demo=demo)


def baseline(clock, ms, events=None, name="baseline"):
    def factory(x):
        def run():
            if events is not None:
                events.append((name, x))
            clock.advance(ms)
            return x + 1
        return run

    return factory


def exact_check(output, inputs):
    assert output == inputs[0] + 1, f"wrong output {output} for input {inputs[0]}"


def counter_inputs():
    state = {"n": 0}

    def make():
        state["n"] += 1
        return (state["n"],)

    return make


def fake_clock(monkeypatch) -> "FakeClock":
    """A fake clock, with do_bench and synchronize patched to use it, the worker's and the checker's."""
    clock = FakeClock()
    for side in (in_worker, perf_measure):
        monkeypatch.setattr(side, "bench_median", clock_bench(clock))
        monkeypatch.setattr(side, "synchronize", lambda: None)
    return clock
