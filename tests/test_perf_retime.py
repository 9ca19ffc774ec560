"""A graded perf test whose reading loses points, or asks for a retry, is timed once more in a fresh worker,
and the better reading counts (grader.perf.retime).

End to end: a fake suite's perf tests run through the plugin in a subprocess, isolated as grading runs
them, on a GPU faked for the checker (its device policy; the worker stays on the CPU). Each fake perf
test hands record_perf the next of its scripted readings, with the worker that served it and a draw of
the test's generator, so the records show which reading was kept, in which worker, from which inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import results
from grader.points import load_points
from grader.report import model
from grader.results import TestRecord as Record

REPO = Path(__file__).resolve().parents[1]
TOP_STEP = 0.9

POINTS = textwrap.dedent(f'''
    [problem]
    id = "softmax"
    title = "Fake softmax"
    order = 1

    [checks."softmax.fake.after"]
    points = 1
    suite = "hidden"

    [perf."softmax.perf.fake"]
    points = 4
    ladder = {{ pass = 0.5, good = 0.7, excellent = {TOP_STEP} }}
''')

SUBMISSION = textwrap.dedent('''
    import os
    import sys


    def pid():
        return os.getpid()


    def broken():
        raise ValueError("broken when timed again")


    def die():
        os._exit(3)


    def corrupting():
        """Stands for a kernel whose unmasked store damaged the heap: the next request the process
        serves, whatever it is (the harness's memory check too), aborts."""
        guarded = sys.modules["grader.worker.guarded_call"]

        def execute_or_abort(*args, **kwargs):
            os.abort()

        guarded.execute = execute_or_abort
        return 0
''')

# The checker believes it has a GPU, so perf tests run; the worker (GRADER_FORCE_CPU) stays on the CPU.
FAKE_GPU = textwrap.dedent('''
    import torch

    from grader import devices

    devices._policy = devices.DevicePolicy("cuda", True, False, "a fake GPU (tests/test_perf_retime.py)")
    torch.cuda.get_device_name = lambda *args, **kwargs: "Fake GPU"
''')

SUITE = textwrap.dedent('''
    import pytest
    import torch

    PERF = pytest.mark.perf("softmax.perf.fake")
    TIMED = {}
    AFTERWARDS = 9.0       # what a reading beyond the scripted ones reads: a third reading would show


    def timed(request, impl, gen, record_perf, readings, then=None):
        """Record the next of `readings` ((ratio, retry) pairs) for this test; `then(impl, n)` runs after."""
        n = TIMED[request.node.name] = TIMED.get(request.node.name, 0) + 1
        ratio, retry = readings[n - 1] if n <= len(readings) else (AFTERWARDS, False)
        impl.softmax.pid()
        record_perf(ratio=ratio, retry=retry, measured={
            "reading": n, "worker": getattr(impl, "worker_pid", None),
            "draw": torch.rand(1, generator=gen).item(), "gpu_alone_s": 0.25 * n})
        if then is not None:
            then(impl, n)


    @PERF
    def test_below_top_then_better(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.3, False), (0.95, False)])


    @PERF
    def test_below_top_then_worse(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.6, False), (0.3, False)])


    @PERF
    def test_at_top_step(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.9, False)])


    @PERF
    def test_just_below_top_step(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.8999, False), (0.9, False)])


    @PERF
    def test_retime_raises(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.3, False), (0.99, False)],
              lambda impl, n: n == 2 and impl.softmax.broken())


    @PERF
    def test_retime_is_wrong(request, impl, gen, record_perf):
        def check(impl, n):
            assert n == 1, "wrong output when timed again"
        timed(request, impl, gen, record_perf, [(0.3, False), (0.99, False)], check)


    @PERF
    def test_retime_worker_dies(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.3, False), (0.99, False)],
              lambda impl, n: n == 2 and impl.softmax.die())


    @pytest.mark.check("softmax.fake.after")
    def test_after_a_retime_that_died(impl):
        assert impl.softmax.pid() > 0


    @PERF
    def test_flagged_retry(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.95, True), (0.97, False)])


    @PERF
    def test_still_flagged(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.5, True), (0.4, False)])


    @PERF
    def test_only_once(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.3, False), (0.4, False)])


    @PERF
    def test_first_reading_fails(request, impl, gen, record_perf):
        def check(impl, n):
            assert n != 1, "wrong output"
        timed(request, impl, gen, record_perf, [(0.3, False), (0.99, False)], check)


    @PERF
    def test_first_reading_corrupted_memory(request, impl, gen, record_perf):
        timed(request, impl, gen, record_perf, [(0.3, False), (0.99, False)],
              lambda impl, n: n == 1 and impl.softmax.corrupting())
''')


def _graded(folder: Path, *options: str) -> tuple[dict[str, Record], list[str]]:
    """{test name: record} of the fake suite run through the plugin with `options`, and the tests amended
    after they reported (grader.memory_safety)."""
    (folder / "points").mkdir(parents=True)
    (folder / "points" / "softmax.toml").write_text(POINTS)
    (folder / "submission").mkdir()
    (folder / "submission" / "softmax.py").write_text(SUBMISSION)
    (folder / "tests_hidden").mkdir()
    (folder / "tests_hidden" / "conftest.py").write_text(FAKE_GPU)
    (folder / "tests_hidden" / "test_retime.py").write_text(SUITE)
    stream = folder / "results.jsonl"
    environment = {key: value for key, value in os.environ.items() if key not in ("GRADER_IMPL", "GRADER_ISOLATE")}
    environment |= {"PYTHONPATH": str(REPO), "GRADER_POINTS_DIR": str(folder / "points"), "GRADER_FORCE_CPU": "1",
                    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", "-p", "no:cacheprovider", "-q",
               "--impl", str(folder / "submission"), "--results-json", str(stream), "--rootdir", str(folder),
               *options, str(folder / "tests_hidden" / "test_retime.py")]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, env=environment)
    text = stream.read_text() if stream.exists() else ""
    read = results.read_stream(text)
    assert read.results is not None and read.finished, run.stdout[-3000:] + run.stderr[-3000:]
    amended = [json.loads(line)["nodeid"] for line in text.splitlines() if '"type": "amend"' in line]
    return {record.nodeid.split("::")[1]: record for record in read.results.tests}, amended


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The fake suite as grading runs it: isolated, on a (fake) GPU."""
    return _graded(tmp_path_factory.mktemp("isolated"), "--isolate")


@pytest.fixture(scope="module")
def graded_in_process(tmp_path_factory):
    return _graded(tmp_path_factory.mktemp("in_process"))


def _passed(records, name) -> dict:
    record = records[name]
    assert record.outcome == results.PASSED, record.message
    return record.perf


def test_a_reading_below_the_top_step_is_timed_again_in_a_fresh_worker_and_the_better_counts(graded):
    records, _ = graded
    better = _passed(records, "test_below_top_then_better")
    assert better["ratio"] == 0.95 and better["measured"]["reading"] == 2
    retimed = better["retimed"]
    assert retimed["kept"] == "second" and retimed["other_ratio"] == 0.3 and "below the top step" in retimed["why"]
    first = retimed["other_measured"]
    assert first["worker"] != better["measured"]["worker"]        # a fresh worker
    assert first["draw"] == better["measured"]["draw"]            # the same inputs
    worse = _passed(records, "test_below_top_then_worse")
    assert worse["ratio"] == 0.6 and worse["measured"]["reading"] == 1
    assert worse["retimed"]["kept"] == "first" and worse["retimed"]["other_ratio"] == 0.3


def test_a_reading_at_the_top_step_is_not_timed_again_and_one_just_below_is(graded):
    records, _ = graded
    top = _passed(records, "test_at_top_step")
    assert top["ratio"] == TOP_STEP and "retimed" not in top
    below = _passed(records, "test_just_below_top_step")
    assert below["ratio"] == TOP_STEP and below["retimed"]["other_ratio"] == 0.8999


@pytest.mark.parametrize("name, error", [("test_retime_raises", "broken when timed again"),
                                         ("test_retime_is_wrong", "wrong output when timed again"),
                                         ("test_retime_worker_dies", "exit code 3")])
def test_a_retime_that_fails_keeps_the_first_reading_and_the_pass(graded, name, error):
    records, amended = graded
    perf = _passed(records, name)
    assert perf["ratio"] == 0.3 and perf["measured"]["reading"] == 1
    assert perf["retimed"]["kept"] == "first" and error in perf["retimed"]["error"]
    # nothing the failed retime left in its worker is charged later
    assert records["test_after_a_retime_that_died"].outcome == results.PASSED
    assert not amended


def test_a_flagged_retry_is_timed_again_and_stays_flagged_only_when_the_kept_reading_is(graded):
    records, _ = graded
    cleared = _passed(records, "test_flagged_retry")
    assert cleared["ratio"] == 0.97 and cleared["retry"] is False
    assert cleared["retimed"]["other_ratio"] == 0.95 and cleared["retimed"]["other_retry"] is True
    assert cleared["retimed"]["why"].startswith("flagged retry")
    still = _passed(records, "test_still_flagged")
    assert still["ratio"] == 0.5 and still["retry"] is True and still["retimed"]["kept"] == "first"


def test_a_passed_reading_is_timed_again_at_most_once_and_a_failed_one_not_at_all(graded):
    records, _ = graded
    once = _passed(records, "test_only_once")
    assert once["ratio"] == 0.4 and once["measured"]["reading"] == 2   # the retime's low reading stands
    failed = records["test_first_reading_fails"]
    assert failed.outcome == results.FAILED and "wrong output" in failed.message
    assert failed.perf["ratio"] == 0.3 and "retimed" not in failed.perf


def test_memory_the_first_reading_corrupted_is_charged_before_its_worker_is_replaced(graded):
    records, _ = graded
    charged = records["test_first_reading_corrupted_memory"]
    assert charged.outcome == results.FAILED
    assert charged.message.startswith("memory safety: softmax.corrupting"), charged.message
    assert "before timing it again in a fresh process" in charged.message
    assert "retimed" not in charged.perf


def test_a_students_own_run_in_process_times_nothing_twice(graded, graded_in_process):
    in_process, _ = graded_in_process
    low = _passed(in_process, "test_below_top_then_better")
    assert low["ratio"] == 0.3 and low["measured"]["reading"] == 1 and "retimed" not in low
    assert "retimed" in _passed(graded[0], "test_below_top_then_better")   # where grading would


# --- the report and the run's time -----------------------------------------------------------------


def _records(*perfs) -> list[Record]:
    return [Record(f"tests_hidden/test_retime.py::test_{i}", "softmax.perf.fake", results.PASSED, "", 1.0, perf)
            for i, perf in enumerate(perfs)]


RETIMED = {"why": "ratio 0.3 is below the top step (0.9)", "kept": "second", "other_ratio": 0.3,
           "other_retry": False, "other_measured": {"gpu_alone_s": 1.5}}


@pytest.fixture
def table(tmp_path):
    (tmp_path / "softmax.toml").write_text(POINTS)
    return load_points(tmp_path, calibration_file=tmp_path / "none.json")


def test_the_report_says_retimed_and_environment_off_only_while_the_kept_reading_is_flagged(table):
    from grader.scoring import check_data, score_checks

    def row(*perfs):
        scores = score_checks(table, _records(*perfs), suites=("hidden",))
        return model._perf_row(check_data(next(c for c in scores[0].checks if c.check.perf)))

    retimed = row({"ratio": 0.95, "retry": False, "retimed": RETIMED, "measured": {}})
    assert retimed.level == "excellent (retimed)"
    cleared = row({"ratio": 0.95, "retry": False, "measured": {},
                   "retimed": RETIMED | {"other_retry": True, "other_ratio": 0.4}})
    assert "environment off" not in cleared.level
    still = row({"ratio": 0.95, "retry": True, "retimed": RETIMED | {"kept": "first"}, "measured": {}},
                {"ratio": 0.95, "retry": False, "measured": {}})
    assert still.level == "excellent (retimed 1 of 2; environment off: regrade with --only)"


def test_the_runs_time_counts_both_readings_alone_and_how_many_tests_were_retimed(table):
    records = _records({"ratio": 0.95, "retry": False, "retimed": RETIMED, "measured": {"gpu_alone_s": 2.0}},
                       {"ratio": 0.6, "retry": False, "measured": {"gpu_alone_s": 1.0},
                        "retimed": RETIMED | {"kept": "first", "other_measured": {"gpu_alone_s": 0.5}}},
                       {"ratio": 0.95, "retry": False, "measured": {"gpu_alone_s": 1.0}})

    class Header:
        gpu_lock = {"totals": {"alone_s": 5.5, "lent_s": 0.0, "waited_s": 0.0, "compiles": 0}}

    breakdown = model.time_breakdown(records, table, Header())
    # the lock's total holds every hold alone; of it, the retimes' second readings: 2.0 (kept) + 0.5 (not)
    assert breakdown["perf_alone_s"] == 5.5 and breakdown["retimes"] == 2 and breakdown["retime_alone_s"] == 2.5
    from grader.report.time_summary import time_text

    text = time_text([{"timing": breakdown}])
    assert "retime_alone_s" in text and "retimes             2.0 per submission" in text


def test_the_staff_summary_counts_both_readings_alone_and_marks_the_retimed_test(load_script):
    summary = load_script("measure/gpu_proofs_summary")
    perf = {"ratio": 0.95, "retry": False, "measured": {"gpu_alone_s": 2.0, "gpu_alone_phases_s": {"rounds": 1.0}},
            "retimed": RETIMED | {"other_measured": {"gpu_alone_s": 0.5, "gpu_alone_phases_s": {"rounds": 0.5}}}}
    result = {"problems": [{"checks": [{"perf": True, "level": "excellent", "earned": 4, "possible": 4,
                                        "tests": [{"nodeid": "t.py::test_speed", "perf": perf}]}]}]}
    assert summary.perf_tests(result) == {"test_speed": (0.95, False, "excellent", 2.5, True)}
    assert "rounds 1.5" in summary.alone_by_phase(result)
