"""Cores kept for timing: each GPU's perf checks time on cores no checking run compiles on, and every
process of a checking run starts off them."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
from perf_fakes import FakeImpl, baseline, clock_bench, counter_inputs, exact_check, kernel_module

from grader import perf
from grader.perf import cores as timing_cores
from grader.perf import measure as perf_measure

CORES = sorted(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to keep one")


def test_each_gpu_keeps_its_own_timing_cores_and_every_run_gets_the_rest():
    compile_cores, kept = timing_cores.plan(list(range(32)), ["0", "1", "0", "1"])
    assert kept == {"0": [0], "1": [1]} and compile_cores == list(range(2, 32))


def test_no_cores_are_kept_on_the_cpu_or_where_too_few_would_be_left():
    assert timing_cores.plan(list(range(16)), [None, None]) == ([], {})
    assert timing_cores.plan([0, 1], ["0"]) == ([], {})
    assert timing_cores.plan([0, 1, 2, 3], ["0", "1"]) == ([2, 3], {"0": [0], "1": [1]})
    assert timing_cores.plan([0, 1, 2, 3], ["0", "1", "2"]) == ([], {})


def test_the_kept_cores_reach_the_checker_as_written_and_a_garbled_value_keeps_none():
    env = {timing_cores.CORES_ENV: timing_cores.env_value([3, 1])}
    assert timing_cores.from_env(env) == {1, 3}
    assert timing_cores.from_env({timing_cores.CORES_ENV: "1,x"}) == set()
    assert timing_cores.from_env({}) == set()


@needs_two_cores
def test_a_run_started_with_the_launch_prefix_and_its_children_stay_on_the_given_cores():
    prefix = timing_cores.launch_prefix([CORES[-1]])
    assert prefix, "taskset not found"
    code = "import os, subprocess, sys; print(sorted(os.sched_getaffinity(0))); sys.stdout.flush(); " \
           "subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'])"
    out = subprocess.run(prefix + [sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == [str([CORES[-1]])] * 2
    assert timing_cores.launch_prefix([]) == []


@needs_two_cores
def test_while_timing_the_checker_and_its_worker_run_on_the_kept_cores_and_go_back_after():
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = {CORES[0]}
        with timing_cores.timing_cores(types.SimpleNamespace(worker_pid=worker.pid), kept) as moved:
            assert moved
            assert os.sched_getaffinity(0) == kept and os.sched_getaffinity(worker.pid) == kept
        assert os.sched_getaffinity(0) == set(CORES) and os.sched_getaffinity(worker.pid) == set(CORES)
    finally:
        worker.kill()
        worker.wait()


def test_without_kept_cores_nothing_moves():
    with timing_cores.timing_cores(types.SimpleNamespace(worker_pid=None), set()) as moved:
        assert not moved and os.sched_getaffinity(0) == set(CORES)


@needs_two_cores
def test_a_perf_checks_rounds_are_timed_on_the_kept_cores_and_its_warm_up_is_not(clock, monkeypatch):
    monkeypatch.setenv(timing_cores.CORES_ENV, str(CORES[-1]))
    seen = []

    def factory(x):                 # the graded baseline: timed in this process, in every round
        run = baseline(clock, 1.0)(x)
        return lambda: (seen.append(os.sched_getaffinity(0)), run())[1]

    warm = []
    monkeypatch.setattr(perf_measure, "warm_up", lambda modules, target, inputs: warm.append(os.sched_getaffinity(0)))
    perf.measure_ratio(FakeImpl(kernel_module(clock, 2.0), clock), "demo.add_one", counter_inputs(),
                         {"base": factory}, check=exact_check, bench=clock_bench(clock), clock=clock,
                         sync=lambda: None, environment=lambda: [], wall_check=False)
    assert warm == [set(CORES)]
    assert seen[0] == set(CORES)                      # its untimed first call, before the GPU is held alone
    assert seen[1:] and all(cores == {CORES[-1]} for cores in seen[1:])
    assert os.sched_getaffinity(0) == set(CORES)


@needs_two_cores
def test_a_checking_run_on_a_gpu_starts_off_its_timing_cores_and_is_told_which_they_are(tmp_path, monkeypatch):
    import subprocess

    from fake_suite import GOOD_MATMUL, GOOD_SOFTMAX, grade_batch, make_submission, write_suite

    from grader.grade import sizing as sizing_module

    write_suite(tmp_path / "suite")
    make_submission(tmp_path / "subs", "good", {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    monkeypatch.setattr(timing_cores, "plan", lambda cores, slots: ([CORES[-1]], {"0": [CORES[0]]}))
    monkeypatch.setattr(sizing_module, "gpu_memory_total", lambda: None)
    started, real_popen = [], subprocess.Popen

    def popen(argv, **options):
        if "--impl" in argv:                              # a checking run, not the suite's warm-up collection
            started.append((list(argv), dict(options.get("env") or {})))
        return real_popen(argv, **options)

    monkeypatch.setattr(subprocess, "Popen", popen)
    assert grade_batch(tmp_path / "suite", tmp_path / "subs", tmp_path / "out", gpus="0", per_gpu=1) == 0
    assert started                                        # the preflight and the submission's run(s)
    for argv, env in started:
        assert argv[:3] == [timing_cores.launch_prefix([CORES[-1]])[0], "--cpu-list", str(CORES[-1])]
        assert env[timing_cores.CORES_ENV] == str(CORES[0])
