"""A crash is charged to the kernel that caused it, whichever test it surfaces in (grader.memory_safety).

Grading (`--isolate`) is checked with a deterministic stand-in for heap corruption: a submission whose
first call leaves the worker so that the next request it serves aborts, as a damaged heap does at the
next allocation. The student's local loop (`python -m grader.local_run`, what `make test` runs) is checked
with a real one: softmax_triton with its boundary masks removed, which kills the in-process run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from broken_variants import build_variant

from grader import local_run, results

REPO = Path(__file__).resolve().parents[1]

CORRUPTING_SUBMISSION = '''import os
import sys


def _arm(only_student_calls):
    guarded = sys.modules["grader.worker.guarded_call"]
    execute = guarded.execute

    def execute_or_abort(modules, kind, *rest):
        if kind == "call" or not only_student_calls:
            os.abort()
        return execute(modules, kind, *rest)

    guarded.execute = execute_or_abort


def corrupting_kernel(x):
    """Stands for a kernel whose unmasked store damaged the heap: it returns the right answer, and the
    next request the process serves, whatever it is (the harness's memory check too), aborts."""
    _arm(only_student_calls=False)
    return x * 2


def corrupting_kernel_seen_later(x):
    """The same damage, where the harness's memory check misses it: the next call of student code aborts."""
    _arm(only_student_calls=True)
    return x * 2


def pure_torch(x):
    return x + 1
'''

SUITE = '''import pytest
import torch


@pytest.mark.check("softmax.triton.correct")
def test_kernel_that_corrupts(impl):
    assert torch.equal(impl.softmax.KERNEL(torch.ones(3)), torch.full((3,), 2.0))


@pytest.mark.check("softmax.update.worked_example")
def test_later_pure_torch(impl):
    assert torch.equal(impl.softmax.pure_torch(torch.ones(3)), torch.full((3,), 2.0))
'''
CORRUPTS, LATER = "test_kernel_that_corrupts", "test_later_pure_torch"
SELF_INFLICTED = "test_corrupts_then_calls_again"
SUITE_SELF_INFLICTED = SUITE.replace("KERNEL", "corrupting_kernel") + f'''

@pytest.mark.check("softmax.online.correct")
def {SELF_INFLICTED}(impl):
    impl.softmax.corrupting_kernel(torch.ones(3))
    assert torch.equal(impl.softmax.pure_torch(torch.ones(3)), torch.full((3,), 2.0))
'''


def _graded(tmp_path, order: tuple[str, ...], suite_text: str) -> dict[str, results.TestRecord]:
    """{test name: record} of an isolated run of SUITE's tests in `order`, as grading runs them."""
    submission = tmp_path / "submission"
    submission.mkdir(exist_ok=True)
    (submission / "softmax.py").write_text(CORRUPTING_SUBMISSION)
    suite = tmp_path / "test_fake_suite.py"
    suite.write_text(suite_text)
    stream = tmp_path / f"results-{'-'.join(order)}.jsonl"
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", "-p", "no:cacheprovider", "-q",
               "--isolate", "--impl", str(submission), "--results-json", str(stream), "--rootdir", str(tmp_path),
               *[f"{suite}::{name}" for name in order]]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    read = results.read_stream(stream.read_text() if stream.exists() else "")
    assert read.results is not None and read.finished, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode == 1, run.stdout[-3000:]
    return {record.nodeid.split("::")[1]: record for record in read.results.tests}


def test_a_corruption_surfacing_in_a_later_test_is_charged_to_the_kernel_that_caused_it(tmp_path):
    # the damage escapes the harness's check between the tests and kills the later test's call
    records = _graded(tmp_path, (CORRUPTS, LATER), SUITE.replace("KERNEL", "corrupting_kernel_seen_later"))
    # the later test died, ran again in a fresh worker and passed there
    assert records[LATER].outcome == results.PASSED, records[LATER].message
    charge = records[CORRUPTS]
    assert charge.outcome == results.FAILED
    assert charge.message.startswith("memory safety: softmax.corrupting_kernel_seen_later"), charge.message
    assert f"::{LATER}, which did not die when it ran again in a fresh process" in charge.message
    assert "exit code -6" in charge.message and "mask" in charge.message


def test_the_verdict_does_not_depend_on_test_order(tmp_path):
    (tmp_path / "forward").mkdir()
    (tmp_path / "backward").mkdir()
    suite = SUITE.replace("KERNEL", "corrupting_kernel")
    forward = _graded(tmp_path / "forward", (CORRUPTS, LATER), suite)
    backward = _graded(tmp_path / "backward", (LATER, CORRUPTS), suite)
    assert {name: r.outcome for name, r in forward.items()} == {name: r.outcome for name, r in backward.items()} \
        == {CORRUPTS: results.FAILED, LATER: results.PASSED}
    # run first, the damage is found when the harness checks the worker before the next test; run last,
    # when it checks the worker before closing it
    assert "after that test, before" in forward[CORRUPTS].message
    assert "after the last test" in backward[CORRUPTS].message
    assert "softmax.corrupting_kernel" in backward[CORRUPTS].message
    assert "mask" in backward[CORRUPTS].message


def test_a_test_whose_death_recurs_in_a_fresh_worker_fails_itself_with_the_mask_hint(tmp_path):
    records = _graded(tmp_path, (LATER, SELF_INFLICTED), SUITE_SELF_INFLICTED)
    assert records[LATER].outcome == results.PASSED
    own = records[SELF_INFLICTED]
    assert own.outcome == results.FAILED
    assert "died (exit code -6), and died again when this test ran alone in a fresh process" in own.message
    assert "give every tl.load and tl.store" in own.message and "memory safety" not in own.message


def test_an_amendment_fails_an_earlier_record_and_never_passes_one():
    header = results.header_line("x", "cpu", {}, ["c"], [("t::a", "c"), ("t::b", "c")])
    passed = results.record_line(results.TestRecord("t::a", "c", results.PASSED))
    lines = [header, passed, results.amend_line("t::a", "memory safety: f"),
             results.amend_line("t::unknown", "memory safety: g"),
             '{"type": "amend", "nodeid": "t::a", "outcome": "passed", "message": ""}', results.END_LINE]
    read = results.read_stream("\n".join(lines))
    [record] = read.results.tests
    assert (record.outcome, record.message) == (results.FAILED, "memory safety: f")
    assert len(read.notes) == 2, read.notes
    # a merged stream keeps the amended verdict
    again = results.read_stream(results.stream_text(read)).results.tests
    assert again[0].outcome == results.FAILED


def test_local_run_of_a_kernel_without_boundary_masks_finishes_with_the_crash_charged_to_its_test(tmp_path):
    broken = build_variant("softmax_no_boundary_mask", tmp_path)
    command = [sys.executable, "-m", "grader.local_run", "tests_public/test_softmax.py", "-q", "-rN",
               "-p", "no:cacheprovider", "--impl", str(broken), "-k", "triton_matches_torch and 8x37"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-4000:]
    assert "The test process died from SIG" in output, output[-4000:]
    assert "TOTAL" in output and "points (impl:" in output, output[-4000:]
    # the test the in-process run died in is charged: it fails when run again in a worker (by dying there
    # too, with the mask hint, or by the wrong values its unmasked loads read, since what a read past the
    # end finds varies)
    died_in = re.search(r"The in-process run died in \S+::(\S+);", output)
    assert died_in, output[-4000:]
    assert re.search(rf"_+ {re.escape(died_in.group(1))} _+", output), output[-4000:]
    assert "your code died (exit code -" not in output or "give every tl.load and tl.store" in output


def test_local_run_finishes_a_run_only_when_it_started_tests_and_stopped_before_its_end(tmp_path):
    stream = tmp_path / "results.jsonl"
    header = results.header_line("assignment", "cpu", {}, ["c"], [("t::a", "c")])
    stream.write_text(header + "\n")
    assert local_run._died(-6, stream) and local_run._died(1, stream)   # a signal; os._exit(1) by a timeout
    assert not local_run._died(-2, stream) and not local_run._died(2, stream)   # the student's Ctrl-C
    stream.write_text(header + "\n" + results.END_LINE + "\n")
    assert not local_run._died(1, stream)                                 # tests failed, the run finished
    assert not local_run._died(4, tmp_path / "never_written.jsonl")       # a usage error: nothing ran
