"""The FlashAttention memory check judges the driver's figure for the worker, read by the checker
(grader.perf.worker_memory, grader.perf.nvml), not what the worker's allocator reports: student code can
patch torch.cuda's counters, not the driver. On the CPU with a fake driver and a fake worker."""

from __future__ import annotations

import textwrap
import threading
import time

import pytest

from grader.impl import IsolatedImpl
from grader.perf import nvml, worker_memory
from grader.perf.in_worker import hold_marker, release_marker
from grader.perf.worker_memory import MemoryUnavailable, ReadingLost, Sampler, attribute, marked_pid
from grader.scenarios.flash_attention import peak_extra_memory
from grader.worker.modules import resolve

MIB = 2**20
CONTEXT = 500 * MIB
HEADS = 4        # the hidden check's shape: batch 1, 4 heads, d 64, n = 2048 and 8192
MEMORY_CHECK = ("tests_hidden/test_flash_attention_hidden.py", "test_forward_backward_memory_grows_linearly_in_n")


def linear(n: int) -> int:
    """An honest FlashAttention's footprint: a dozen (1, 4, n, 64) bf16 tensors, in 20 MiB segments."""
    return 12 * HEADS * n * 64 * 2 + 20 * MIB


def quadratic(n: int) -> int:
    """A forward that keeps one bf16 score matrix per head until the backward."""
    return linear(n) + HEADS * n * n * 2


class FakeDriver:
    """What NVML lists on the GPU: pid -> bytes held. A checker process is on it from the start."""

    def __init__(self):
        self.table = {7000: 900 * MIB}
        self.lock = threading.Lock()

    def usage(self) -> dict:
        with self.lock:
            return dict(self.table)

    def set(self, pid: int, value: int) -> None:
        with self.lock:
            self.table[pid] = value


class FakeWorkers:
    """An impl whose every fresh worker is a new process on the fake driver: its CUDA context when it
    starts; at its first call what the student's code takes at import (`at_import`, kept); during a call
    `footprint(n)` more, which the caching allocator keeps reserved after the call. Each call answers
    `claim(n)`, the allocator figure the scenario would return (forged or not)."""

    def __init__(self, driver, footprint, claim, at_import=0, host_pids=False):
        self.driver, self.footprint, self.claim, self.at_import = driver, footprint, claim, at_import
        self.host_pids = host_pids       # the driver lists host pids (an old driver, under a pid namespace)
        self.pid, self.started, self.calls = 100, 0, 0

    def start_fresh_worker(self, cuda_context: bool = False) -> int:
        assert cuda_context, "the baseline must be the CUDA context alone"
        self.pid += 1
        self.started += 1
        self.calls_in_worker = 0
        self.driver.set(self.listed_pid, CONTEXT)
        return self.pid

    @property
    def listed_pid(self) -> int:
        return 50000 + self.pid if self.host_pids else self.pid

    def run_harness(self, fn, *args):
        assert self.calls_in_worker == 0, "the marker is taken before any student code runs"
        assert fn in (hold_marker, release_marker)
        self.driver.set(self.listed_pid, CONTEXT + (args[0] if fn is hold_marker else 0))

    def run(self, fn, *args, **kwargs):
        assert fn is peak_extra_memory and self.started, "the scenario runs in a worker started for the measure"
        n = args[3]
        self.calls += 1
        self.calls_in_worker += 1
        held = CONTEXT + self.at_import
        self.driver.set(self.listed_pid, held)                       # empty_cache at the call's start
        self.driver.set(self.listed_pid, held + self.footprint(n))   # still reserved when the call returns
        return self.claim(n)


@pytest.fixture
def driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(worker_memory, "open_reader", lambda: fake)
    return fake


def run_memory_check(suite_test, impl):
    check = suite_test(*MEMORY_CHECK)
    check(impl, False)


# ------------------------------------------------------------------ the check, end to end with fakes


def test_a_worker_that_forges_its_allocator_peak_fails_on_the_drivers_n_squared_growth(suite_test, driver):
    impl = FakeWorkers(driver, quadratic, claim=lambda n: 0)
    with pytest.raises(AssertionError, match=r"grows by .* MiB from n=2048 to n=8192.*read by the grader"):
        run_memory_check(suite_test, impl)
    assert impl.started == 2 and impl.calls == 4     # a fresh worker per length: a warm-up, then the measure


def test_an_honest_linear_footprint_passes(suite_test, driver):
    impl = FakeWorkers(driver, linear, claim=lambda n: 5 * HEADS * n * 64 * 2)
    run_memory_check(suite_test, impl)
    assert impl.started == 2


def test_memory_reserved_before_the_measured_call_counts_against_the_submission(suite_test, driver):
    # A pool taken at import, big enough for the score matrices at the long length: the call itself
    # grows by no more than linear code, and the claim is forged.
    impl = FakeWorkers(driver, linear, claim=lambda n: 0, at_import=600 * MIB)
    with pytest.raises(AssertionError, match=r"at n=8192 .* held 6\d\d\.\d MiB.*memory taken at import"):
        run_memory_check(suite_test, impl)


def test_the_workers_own_figure_can_fail_the_check_but_not_pass_it(suite_test, driver):
    impl = FakeWorkers(driver, linear, claim=lambda n: HEADS * n * n * 2)   # honest, and quadratic somewhere
    with pytest.raises(AssertionError, match=r"allocator reports grows 16\.0x"):
        run_memory_check(suite_test, impl)


def test_without_nvml_the_check_is_not_run_here(suite_test, monkeypatch):
    def no_driver():
        raise MemoryUnavailable("libnvidia-ml.so.1 cannot be loaded: no NVIDIA driver here")

    monkeypatch.setattr(worker_memory, "open_reader", no_driver)
    impl = FakeWorkers(FakeDriver(), quadratic, claim=lambda n: 0)
    with pytest.raises(pytest.skip.Exception, match="not run here.*no NVIDIA driver"):
        run_memory_check(suite_test, impl)
    assert impl.calls == 0


def test_host_pids_under_a_pid_namespace_are_attributed_by_the_workers_marker(suite_test, driver):
    impl = FakeWorkers(driver, quadratic, claim=lambda n: 0, host_pids=True)
    with pytest.raises(AssertionError, match=r"another pid namespace: the worker is its pid 501\d\d, found by a"):
        run_memory_check(suite_test, impl)


class NeighbourStarting(FakeWorkers):
    """Another submission's process opens its CUDA context on the same GPU during each measured call."""

    def run(self, fn, *args, **kwargs):
        self.driver.set(90000 + self.calls, CONTEXT)
        return super().run(fn, *args, **kwargs)


@pytest.mark.parametrize("host_pids", [False, True], ids=["own_pids", "host_pids"])
def test_a_neighbour_starting_on_the_gpu_meanwhile_is_not_counted(suite_test, driver, host_pids):
    impl = NeighbourStarting(driver, linear, claim=lambda n: 5 * HEADS * n * 64 * 2, host_pids=host_pids)
    run_memory_check(suite_test, impl)


def test_a_driver_figure_lost_after_student_code_ran_is_a_failure_not_a_skip(driver):
    impl = FakeWorkers(driver, linear, claim=lambda n: 0)
    readings = iter([driver.usage] * 2)

    class Flaky:
        def usage(self):
            reading = next(readings, None)
            if reading is None:
                raise nvml.NvmlError("listing compute processes failed: Unknown Error")
            return reading()

    with pytest.raises(ReadingLost, match="could not be read after the call"):
        worker_memory.measure(impl, peak_extra_memory, "flash_attention", 1, HEADS, 2048, 64, False,
                              reader=Flaky())


# ------------------------------------------------------------------ attribution and sampling


def test_the_worker_and_its_children_count_and_no_other_process_does(monkeypatch):
    monkeypatch.setattr("grader.perf.environment.descendants", lambda pid: [61] if pid == 60 else [])
    who = attribute({1: 100, 50: 700, 60: 500}, worker_pid=60, find_by_marker=None)
    assert who.counted({1: 100, 50: 700, 60: 500}) == 500
    assert who.counted({1: 9000, 50: 9000, 60: 500, 61: 300, 62: 400}) == 800   # a child counts, a stranger not


def test_under_host_pids_only_the_marked_process_counts():
    who = attribute({9000: 700, 9001: 500}, worker_pid=5, find_by_marker=lambda: (9001, 64 * MIB))
    assert who.counted({9000: 700, 9001: 900, 9002: 500}) == 900


def test_the_marker_must_single_out_one_process():
    marker = 64 * MIB
    assert marked_pid({1: 500, 2: 500}, {1: 500 + marker, 2: 700}, {1: 500, 2: 700}, marker) == 1
    with pytest.raises(MemoryUnavailable, match="0 processes"):
        marked_pid({1: 500}, {1: 500 + marker // 2}, {1: 500}, marker)
    with pytest.raises(MemoryUnavailable, match="2 processes"):
        marked_pid({1: 0, 2: 0}, {1: marker, 2: marker}, {1: 0, 2: 0}, marker)
    with pytest.raises(MemoryUnavailable, match="0 processes"):     # took it and kept it: not the marker
        marked_pid({1: 0}, {1: marker}, {1: marker}, marker)


def test_a_process_whose_memory_the_driver_does_not_report_is_not_a_number():
    who = attribute({60: None}, worker_pid=60, find_by_marker=None)
    with pytest.raises(MemoryUnavailable, match="does not report the memory of process 60"):
        who.counted({60: None})


def test_the_sampler_catches_a_peak_between_the_readings_before_and_after():
    level = {"now": 10}
    with Sampler(lambda: level["now"], interval_s=0.001) as sampler:
        time.sleep(0.02)
        level["now"] = 1000
        time.sleep(0.05)
        level["now"] = 10
        time.sleep(0.02)
    assert sampler.peak == 1000 and sampler.samples > 3


# ------------------------------------------------------------------ the real worker's start


MARKS_ITS_IMPORT = textwrap.dedent('''
    from pathlib import Path

    Path(MARKER).write_text("imported")


    def count(x):
        return 3
''')


def test_a_fresh_worker_started_for_a_measure_is_ready_before_any_student_code_runs(tmp_path):
    marker = tmp_path / "imported.txt"
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "accounting.py").write_text(MARKS_ITS_IMPORT.replace("MARKER", repr(str(marker))))
    impl = IsolatedImpl(resolve(str(tmp_path / "submission")), call_timeout=120)
    try:
        pid = impl.start_fresh_worker(cuda_context=True)
        assert pid == impl.worker_pid and not marker.exists()    # the baseline is read here: no student code yet
        assert impl.accounting.count(1) == 3 and marker.exists()
        assert impl.worker_pid == pid                              # the measured calls run in that worker
    finally:
        impl.close()
