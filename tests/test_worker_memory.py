"""The FlashAttention memory check judges the driver's figure for the worker, read by the checker
(grader.perf.worker_memory, grader.perf.nvml), not what the worker's allocator reports: student code can
patch torch.cuda's counters, not the driver. On the CPU with a fake driver and a fake worker."""

from __future__ import annotations

import textwrap

from grader.impl import IsolatedImpl
from grader.worker.modules import resolve

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
