"""The FlashAttention memory check judges the driver's figure for the worker, read by the checker
(grader.perf.worker_memory, grader.perf.nvml), not what the worker's allocator reports: student code can
patch torch.cuda's counters, not the driver. On the CPU with a fake driver and a fake worker."""

from __future__ import annotations

import textwrap
import time

import pytest

from grader.impl import IsolatedImpl
from grader.perf.worker_memory import MemoryUnavailable, Sampler, attribute
from grader.worker.modules import resolve

# ------------------------------------------------------------------ attribution and sampling


def test_the_worker_and_what_it_starts_count_the_checker_and_others_do_not():
    before = {1: 100, 50: 700}                      # another client, and the checker
    after = {1: 100, 50: 700, 60: 500}
    who = attribute(before, after, worker_pid=60, checker_pid=50)
    assert who.counted(after) == 500
    assert who.counted({1: 9000, 50: 9000, 60: 500, 61: 300}) == 800    # a child of the worker counts


def test_no_new_process_and_no_worker_pid_cannot_be_attributed():
    with pytest.raises(MemoryUnavailable, match="no process for the worker"):
        attribute({9000: 700}, {9000: 700}, worker_pid=5, checker_pid=3)


def test_a_process_whose_memory_the_driver_does_not_report_is_not_a_number():
    who = attribute({}, {60: None}, worker_pid=60, checker_pid=50)
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
