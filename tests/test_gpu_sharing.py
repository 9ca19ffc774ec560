"""What sharing a GPU can do to a grade (grader.grade.gpu_sharing), and the runner's second pass that
grades such submissions again with the GPU to themselves."""

from __future__ import annotations

import json
import threading
import time

import pytest
from fake_suite import GOOD_SOFTMAX
from fake_suite import make_submission as _submission
from fake_suite import write_suite as _write_suite

from grader.grade import batch as batch_module
from grader.grade import gpu_sharing
from grader.grade import sizing as sizing_module
from grader.grade.batch import Batch
from grader.grade.checking_run import Outcome
from grader.grade.runner import grade_all
from grader.grade.sizing import per_gpu_memory_warning
from grader.results import TestRecord as Record

# What the H200 said when six references shared it: torch, cuBLAS through torch, and a
# test's own tensor.
OUT_OF_MEMORY_MESSAGES = [
    "your code raised OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total "
    "capacity of 139.80 GiB of which 41.75 MiB is free.",
    "your code raised RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB.",
    "RuntimeError: CUDA error: out of memory",
]
NOT_OUT_OF_MEMORY = [
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448",
    "AssertionError: max abs error 0.5 > 0.01",
    "",
]


def _tests(outcome, message):
    return [Record("tests_hidden/t.py::test_ok", "t.ok", "passed", ""),
            Record("tests_hidden/t.py::test_big", "t.big", outcome, message)]


@pytest.mark.parametrize("message", OUT_OF_MEMORY_MESSAGES)
def test_gpu_memory_running_out_is_recognised_in_failures_and_harness_errors(message):
    for outcome in ("failed", "harness_error"):
        assert gpu_sharing.out_of_gpu_memory(_tests(outcome, message)) == ["tests_hidden/t.py::test_big"]
    assert gpu_sharing.out_of_gpu_memory(_tests("passed", message)) == []


@pytest.mark.parametrize("message", NOT_OUT_OF_MEMORY)
def test_other_failures_are_not_taken_for_gpu_memory(message):
    assert gpu_sharing.out_of_gpu_memory(_tests("failed", message)) == []


def test_memory_that_ran_out_on_a_shared_gpu_sends_the_submission_to_be_graded_alone():
    reason, alone = gpu_sharing.withheld_reason("graded", _tests("failed", OUT_OF_MEMORY_MESSAGES[0]), 6, "0")
    assert alone and "6 checking runs shared it" in reason and "test_big" in reason


def test_memory_that_ran_out_with_the_gpu_to_itself_is_the_codes_own():
    assert gpu_sharing.withheld_reason("graded", _tests("failed", OUT_OF_MEMORY_MESSAGES[0]), 1, "0") is None


def test_a_timeout_on_a_shared_gpu_is_graded_again_alone_and_alone_it_stands():
    reason, alone = gpu_sharing.withheld_reason("timeout", _tests("passed", ""), 4, "1")
    assert alone and "timed out while 4 checking runs shared GPU 1" in reason
    assert gpu_sharing.withheld_reason("timeout", _tests("passed", ""), 1, "1") is None


def test_a_harness_error_in_any_test_makes_the_grade_no_grade():
    reason, alone = gpu_sharing.withheld_reason("graded", _tests("harness_error", "KeyError: 'x'"), 1, None)
    assert not alone and "harness error in 1 test (test_big)" in reason


def test_a_clean_result_stands():
    assert gpu_sharing.withheld_reason("graded", _tests("failed", NOT_OUT_OF_MEMORY[1]), 4, "0") is None


# --- the runner's second pass -------------------------------------------------------------------------


def _stream(outcome, message):
    return "\n".join([
        json.dumps({"type": "header", "version": 1, "impl": "x", "device": "cuda", "environment": {},
                    "collected_checks": [], "collected_tests": [["t::a", "softmax.double"]],
                    "not_run_here": []}),
        json.dumps({"type": "test", "nodeid": "t::a", "check": "softmax.double", "outcome": outcome,
                    "message": message, "duration": 0.1, "perf": None}),
        json.dumps({"type": "end"})])


def test_submissions_whose_shared_gpu_ran_out_of_memory_are_graded_again_alone(tmp_path, monkeypatch):
    _write_suite(tmp_path / "suite")
    for student in ("a", "b", "c"):
        _submission(tmp_path / "subs", student, {"softmax.py": GOOD_SOFTMAX})
    state = {"running": 0, "most": 0, "runs": []}
    lock = threading.Lock()

    def execute(self, student, scratch, slot, collect_only=False):
        if collect_only:
            return Outcome("graded", "", 0, 0.1, _stream("passed", ""), "log")
        with lock:
            state["running"] += 1
            second = student in [s for s, _ in state["runs"]]
            state["runs"].append((student, second))
            if second:
                state["most"] = max(state["most"], state["running"])
        time.sleep(0.2)                            # long enough for runs of one pass to overlap
        with lock:
            state["running"] -= 1
        if student in ("a", "b") and not second:   # ran out while sharing: passes alone
            return Outcome("graded", "", 1, 0.2, _stream("failed", OUT_OF_MEMORY_MESSAGES[1]), "log")
        return Outcome("graded", "", 0, 0.2, _stream("passed", ""), "log")

    monkeypatch.setattr(Batch, "execute", execute)
    monkeypatch.setattr(batch_module, "warm_checker_tree", lambda root, suite_dirs: None)
    monkeypatch.setattr(sizing_module, "gpu_memory_total", lambda: None)
    status = grade_all(tmp_path / "subs", out=tmp_path / "out", gpus="0", per_gpu=3, timeout=60,
                       tests_root=tmp_path / "suite", points_dir=tmp_path / "suite" / "points", quiet=True)
    assert status == 0
    assert [student for student, again in state["runs"] if again] in (["a", "b"], ["b", "a"])
    assert state["most"] == 1                    # the second pass: one at a time on GPU 0
    for student in ("a", "b", "c"):
        result = json.loads((tmp_path / "out" / student / "result.json").read_text())
        assert result["status"] == "graded" and result["score"]["earned"] == 2, (student, result["reason"])
    assert (tmp_path / "out" / "grades.csv").read_text().count(",graded,2,") == 3


def test_a_per_gpu_beyond_the_gpus_memory_is_warned_about_with_one_that_fits():
    warning = per_gpu_memory_warning(6, 140 << 30)
    assert "--per-gpu 6 may need 162 GiB" in warning and "--per-gpu 5 fits" in warning
    assert per_gpu_memory_warning(4, 140 << 30) is None
    assert per_gpu_memory_warning(6, None) is None
