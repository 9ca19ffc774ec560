"""A submission's suite split by problem into checking runs of their own, run at once and merged back:
the grade is the one a single run gives, and a part that fails costs only its own tests."""

import json
import threading
import time
from pathlib import Path

import pytest
from fake_suite import GOOD_MATMUL, GOOD_SOFTMAX
from fake_suite import grade_batch as _grade
from fake_suite import make_submission as _submission
from fake_suite import write_suite as _write_suite

from grader.bench.grading import bench_grader
from grader.grade import parts, sandbox
from grader.grade import runner as runner_module
from grader.grade import sizing as sizing_module
from grader.grade.batch import Batch
from grader.grade.checking_run import Outcome
from grader.results import END_LINE, header_line, read_stream, record_line
from grader.results import TestRecord as Record

PROBLEM_OF = {"softmax.double": "softmax", "softmax.hidden_double": "softmax", "matmul.answer": "matmul"}
HALF_SOFTMAX = "def double(x):\n    return 2 * x if x == 1 else 0\n\n\ndef triple(x):\n    return 3 * x\n"
HANGING_MATMUL = "import time\n\ndef answer():\n    time.sleep(600)\n"


def _unit(name):
    return f"tests_hidden/test_{name.split('_')[0]}.py::test_{name}"


def _collected(*names, per_unit=2):
    problem = {"flash": "flash_attention.x", "matmul": "matmul.answer", "softmax": "softmax.double"}
    return [(f"{_unit(name)}[{i}]", problem[name.split("_")[0]]) for name in names for i in range(per_unit)]


PROBLEM_OF |= {"flash_attention.x": "flash_attention"}


def test_the_longest_test_function_gets_a_part_and_a_problems_others_stay_together_where_they_fit():
    seconds = {_unit("flash_bwd"): 60.0, _unit("flash_fwd"): 35.0, _unit("matmul_shapes"): 30.0,
               _unit("flash_perf"): 10.0, _unit("matmul_edges"): 10.0, _unit("softmax_rows"): 8.0}
    plan = parts.plan(_collected("flash_fwd", "flash_bwd", "flash_perf", "matmul_shapes", "matmul_edges",
                                 "softmax_rows", per_unit=1), PROBLEM_OF, seconds)
    # longest first into the emptiest part would put flash_perf beside matmul and matmul_edges beside
    # flash_fwd: both problems would then compile in two parts
    assert plan == [parts.Part("1-flash_attention", (_unit("flash_bwd"),)),
                    parts.Part("2-flash_attention", (_unit("flash_fwd"), _unit("flash_perf"))),
                    parts.Part("3-matmul+softmax", (_unit("matmul_shapes"), _unit("matmul_edges"),
                                                    _unit("softmax_rows")))]


def test_as_many_parts_as_keep_each_under_the_longest_function_and_never_more_than_the_cap():
    seconds = {_unit(f"matmul_{i}"): 10.0 for i in range(8)}
    names = [f"matmul_{i}" for i in range(8)]
    assert len(parts.plan(_collected(*names), PROBLEM_OF, seconds)) == parts.MAX_PARTS
    assert len(parts.plan(_collected(*names), PROBLEM_OF, seconds, max_parts=8)) == 8
    seconds[_unit("matmul_0")] = 70.0       # 140 s in all, and a function of 70 s with one case: two parts
    assert [p.selection[0] for p in parts.plan(_collected(*names, per_unit=1), PROBLEM_OF, seconds)] == \
        [_unit("matmul_0"), _unit("matmul_1")]


def test_a_problem_stays_in_one_part_when_that_makes_the_part_at_most_a_tenth_longer():
    seconds = {_unit("flash_a"): 40.0, _unit("matmul_b"): 36.0, _unit("flash_c"): 6.0, _unit("matmul_d"): 2.0}
    plan = parts.plan(_collected("flash_a", "matmul_b", "flash_c", "matmul_d", per_unit=1), PROBLEM_OF, seconds,
                      max_parts=2)
    # an even split (42 s each) would check both problems in both parts, compiling each one twice
    assert plan == [parts.Part("1-flash_attention", (_unit("flash_a"), _unit("flash_c"))),
                    parts.Part("2-matmul", (_unit("matmul_b"), _unit("matmul_d")))]


def test_a_function_longer_than_a_parts_share_is_split_into_its_cases_by_their_measured_seconds():
    backward = [f"{_unit('flash_bwd')}[{i}]" for i in range(4)]
    seconds = dict(zip(backward, [30.0, 20.0, 6.0, 4.0])) | {_unit("matmul_a"): 30.0, _unit("softmax_b"): 10.0}
    plan = parts.plan(_collected("flash_bwd", "matmul_a", "softmax_b", per_unit=4), PROBLEM_OF, seconds)
    # 100 s over four parts: backward's cases by what each took, matmul's 30 s (spread over its four
    # cases, none measured) split too and gathered again in one part, softmax's 10 s whole
    assert plan == [parts.Part("1-flash_attention", (backward[0],)),
                    parts.Part("2-flash_attention", tuple(backward[1:])),
                    parts.Part("3-softmax", (_unit("softmax_b"),)),
                    parts.Part("4-matmul", (_unit("matmul_a"),))]


def test_cases_pytest_could_not_select_by_nodeid_keep_their_function_whole():
    cases = [(f"{_unit('flash_bwd')}[{case}]", "flash_attention.x") for case in ("a::b", "c d", "e")]
    seconds = {_unit("flash_bwd"): 90.0, _unit("matmul_a"): 30.0}
    plan = parts.plan(cases + _collected("matmul_a", per_unit=1), PROBLEM_OF, seconds)
    assert [p.selection for p in plan] == [(_unit("flash_bwd"),), (_unit("matmul_a"),)]


def test_each_submission_graded_at_once_gets_a_core_per_part_with_two_cores_spare():
    assert parts.parts_per_submission(1, cores=16) == parts.MAX_PARTS
    assert parts.parts_per_submission(4, cores=16) == 3      # 12 compiling, 4 for checkers and timing
    assert parts.parts_per_submission(5, cores=16) == 2
    assert parts.parts_per_submission(2, cores=2) == 1       # not split


def test_a_batch_with_no_core_to_spare_grades_whole_suites(suite_by_problem, tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "usable_cores", lambda: 3)
    _submission(tmp_path / "subs", "good", {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    assert _grade(suite_by_problem, tmp_path / "subs", tmp_path / "out", split=True) == 0
    assert _scores(tmp_path / "out", "good")[0]["parts"] == []     # two at once on 3 cores: 0 to spare


def test_a_suite_nothing_was_measured_of_or_too_short_for_a_second_part_is_not_split():
    assert parts.plan(_collected("matmul_a", "softmax_b"), PROBLEM_OF, {}) == []
    assert parts.plan(_collected("matmul_a"), PROBLEM_OF, {_unit("matmul_a"): 9.0}) == []
    assert len(parts.plan(_collected("matmul_a"), PROBLEM_OF, {_unit("matmul_a"): 10.0})) == 2
    assert parts.plan(None, PROBLEM_OF, {_unit("matmul_a"): 50.0}) == []


def test_saved_seconds_are_each_tests_mean_and_keep_what_the_file_knew_of_functions_not_run(tmp_path):
    def result(seconds):
        tests = [{"nodeid": f"{_unit('matmul_a')}[{i}]", "duration": seconds * (i + 1)} for i in range(2)]
        return {"problems": [{"checks": [{"tests": tests}]}], "per_gpu": 4, "parts": ["1-matmul", "2-matmul"],
                "environment": {"gpu": "NVIDIA H200"}}

    path = tmp_path / "test_seconds.json"
    path.write_text(json.dumps({"seconds": {_unit("softmax_old"): 3.0, _unit("matmul_a"): 9.0}}))
    written = parts.save_test_seconds([result(1.0), result(2.0)], path)
    # matmul_a's old whole-function figure gives way to its cases' own
    assert written == {_unit("softmax_old"): 3.0, f"{_unit('matmul_a')}[0]": 1.5, f"{_unit('matmul_a')}[1]": 3.0}
    assert parts.load_test_seconds(path) == written
    saved = json.loads(path.read_text())
    assert saved["gpu"] == "NVIDIA H200" and saved["graded"] == {"references": 2, "per_gpu": 4, "parts": 2}
    path.write_text("{not json")
    assert parts.load_test_seconds(path) == {}


def test_the_shipped_seconds_split_the_real_suites_into_parts_of_about_an_even_share():
    seconds = parts.load_test_seconds()
    plan = parts.plan([(nodeid, "x") for nodeid in seconds], {}, seconds)
    covering = {nodeid: [p.label for p in plan if nodeid in p.selection or parts.unit_of(nodeid) in p.selection]
                for nodeid in seconds}
    assert all(len(labels) == 1 for labels in covering.values())          # every test in exactly one part
    part_seconds = [sum(seconds[n] for n, labels in covering.items() if labels == [p.label]) for p in plan]
    unit_seconds = [sum(value for nodeid, value in seconds.items() if unit in (nodeid, parts.unit_of(nodeid)))
                    for part in plan for unit in part.selection]
    assert len(plan) == parts.MAX_PARTS
    share = sum(part_seconds) / len(plan)
    assert max(part_seconds) <= max(share, max(unit_seconds)) * (1 + parts.KIN_SLACK)


def _stream(nodeid, check, finished=True):
    lines = [header_line("x", "cpu", {}, [check], [(nodeid, check)]),
             record_line(Record(nodeid, check, "passed"))]
    return "\n".join(lines + ([END_LINE] if finished else []))


def test_the_worst_part_decides_the_status_and_every_unfinished_part_says_why():
    done = Outcome("graded", "", 0, 40.0, _stream("s::a", "softmax.double"), "softmax log")
    cut = Outcome("timeout", "stopped after the 30 s wall-clock budget", None, 31.0,
                  _stream("m::b", "matmul.answer", finished=False), "matmul log")
    whole = parts.combine([("softmax", done), ("matmul", cut)])
    assert (whole.status, whole.duration) == ("timeout", 40.0)
    assert whole.reason == "part matmul: stopped after the 30 s wall-clock budget"
    assert "===== part softmax (graded, 40.0 s)" in whole.log and "matmul log" in whole.log
    read = read_stream(whole.stream)
    assert not read.finished and [r.nodeid for r in read.results.tests] == ["s::a", "m::b"]


def test_a_harness_error_in_any_part_is_the_whole_runs_with_that_parts_reason():
    broken = Outcome("harness_error", "harness error (bwrap: ...)", 1, 0.1, "", "")
    fine = Outcome("graded", "", 0, 5.0, _stream("s::a", "softmax.double"), "")
    whole = parts.combine([("softmax", fine), ("matmul", broken)])
    assert (whole.status, whole.reason) == ("harness_error", "part matmul: harness error (bwrap: ...)")


def _measured_suite(root, monkeypatch, seconds):
    _write_suite(root / "suite", by_problem=True)
    (root / "seconds.json").write_text(json.dumps({"seconds": seconds}))
    monkeypatch.setattr(parts, "TEST_SECONDS_FILE", root / "seconds.json")
    monkeypatch.setattr(parts, "usable_cores", lambda: 16)     # CI has 2: too few to split at all
    return root / "suite"


# softmax's public functions are the longest, so the split puts them in one part and the rest in another
SECONDS_BY_PROBLEM = {
    "tests_public/test_softmax.py::test_double_doubles": 5.0,
    "tests_public/test_softmax.py::test_triple_triples": 1.0,
    "tests_public/test_matmul.py::test_zz_matmul_answer_is_42": 2.0,
    "tests_hidden/test_softmax_hidden.py::test_hidden_double_of_ten": 1.0,
    "tests_hidden/test_matmul_hidden.py::test_matmul_speed": 1.0}


@pytest.fixture
def suite_by_problem(tmp_path, monkeypatch):
    """The fake suite, one file per problem, with its test functions' seconds measured: it splits into
    the parts 1-softmax and 2-matmul+softmax."""
    return _measured_suite(tmp_path, monkeypatch, SECONDS_BY_PROBLEM)


def _scores(out, student):
    result = json.loads((out / student / "result.json").read_text())
    checks = {c["id"]: c["earned"] for p in result["problems"] for c in p["checks"]}
    return result, checks


def test_a_split_grade_equals_the_whole_suites_grade_and_its_parts_run_at_once(suite_by_problem, tmp_path,
                                                                                  monkeypatch):
    _submission(tmp_path / "subs", "good", {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    spans, real_execute, lock = [], Batch.execute, threading.Lock()

    def timed_execute(self, *args, **kwargs):
        start = time.monotonic()
        outcome = real_execute(self, *args, **kwargs)
        if kwargs.get("part") is not None:
            with lock:
                spans.append((kwargs["part"].label, start, time.monotonic()))
        return outcome

    monkeypatch.setattr(Batch, "execute", timed_execute)
    assert _grade(suite_by_problem, tmp_path / "subs", tmp_path / "whole", split=False) == 0
    assert spans == []
    assert _grade(suite_by_problem, tmp_path / "subs", tmp_path / "split", split=True) == 0
    assert sorted(label for label, _, _ in spans) == ["1-softmax", "2-matmul+softmax"]
    assert max(start for _, start, _ in spans) < min(end for _, _, end in spans)    # side by side
    whole, whole_checks = _scores(tmp_path / "whole", "good")
    split, split_checks = _scores(tmp_path / "split", "good")
    assert split["status"] == whole["status"] == "graded"
    assert split_checks == whole_checks and split["score"] == whole["score"]
    assert (whole["parts"], split["parts"]) == ([], ["1-softmax", "2-matmul+softmax"])   # said for staff
    assert (whole["timing"]["shared_triton_cache"], split["timing"]["shared_triton_cache"]) == (False, True)
    assert split["score"]["earned"] == split["score"]["possible"] > 0
    log = (tmp_path / "split" / "good" / "log.txt").read_text()
    assert "===== part 1-softmax (graded" in log and "===== part 2-matmul+softmax (graded" in log


def test_a_function_split_into_its_cases_over_two_parts_is_graded_as_the_whole_suite_grades_it(tmp_path,
                                                                                               monkeypatch):
    double = "tests_public/test_softmax.py::test_double_doubles"
    suite = _measured_suite(tmp_path, monkeypatch, {
        f"{double}[1]": 5.0, f"{double}[2]": 5.0, "tests_public/test_softmax.py::test_triple_triples": 1.0,
        "tests_public/test_matmul.py::test_zz_matmul_answer_is_42": 2.0,
        "tests_hidden/test_softmax_hidden.py::test_hidden_double_of_ten": 1.0,
        "tests_hidden/test_matmul_hidden.py::test_matmul_speed": 1.0})
    _submission(tmp_path / "subs", "half", {"softmax.py": HALF_SOFTMAX, "matmul.py": GOOD_MATMUL})
    assert _grade(suite, tmp_path / "subs", tmp_path / "whole", split=False) == 0
    assert _grade(suite, tmp_path / "subs", tmp_path / "split", split=True) == 0
    whole, whole_checks = _scores(tmp_path / "whole", "half")
    split, split_checks = _scores(tmp_path / "split", "half")
    assert split["parts"] == ["1-softmax", "2-softmax", "3-matmul+softmax"]
    assert split_checks == whole_checks and split["score"] == whole["score"]
    assert split_checks["softmax.double"] == 1             # of 2: one case of the split function failed


def test_a_part_that_hangs_costs_only_its_own_parts_tests(suite_by_problem, tmp_path):
    _submission(tmp_path / "subs", "hangs", {"softmax.py": GOOD_SOFTMAX, "matmul.py": HANGING_MATMUL})
    _grade(suite_by_problem, tmp_path / "subs", tmp_path / "out", split=True, timeout=30.0)
    result, checks = _scores(tmp_path / "out", "hangs")
    assert result["status"] == "timeout" and result["reason"].startswith("part 2-matmul+softmax: ")
    assert checks["softmax.double"] == 2                 # part 1 finished whatever part 2 did
    assert checks["matmul.answer"] == 0


def test_a_split_submission_whose_gpu_ran_out_is_regraded_as_one_whole_run_alone(suite_by_problem, tmp_path,
                                                                                  monkeypatch):
    _submission(tmp_path / "subs", "big", {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    calls, real_execute = [], Batch.execute

    def execute(self, student, scratch, slot, collect_only=False, part=None):
        if collect_only:
            return real_execute(self, student, scratch, slot, collect_only=True)
        calls.append(part.label if part else "whole")
        outcome = real_execute(self, student, scratch, None, part=part)     # on the CPU: no GPU here
        if part is not None and "matmul" in part.label:                     # its neighbours' memory ran out
            stream = outcome.stream.replace('"outcome": "passed"', '"outcome": "failed"').replace(
                '"message": ""', '"message": "torch.OutOfMemoryError: CUDA out of memory."')
            outcome = Outcome(outcome.status, outcome.reason, outcome.exit_code, outcome.duration, stream, "")
        return outcome

    monkeypatch.setattr(Batch, "execute", execute)
    monkeypatch.setattr(sizing_module, "gpu_memory_total", lambda: None)
    assert _grade(suite_by_problem, tmp_path / "subs", tmp_path / "out", gpus="0", per_gpu=1) == 0
    assert sorted(calls[:2]) == ["1-softmax", "2-matmul+softmax"] and calls[2:] == ["whole"]
    result, checks = _scores(tmp_path / "out", "big")
    assert result["status"] == "graded" and checks["matmul.answer"] == 3 and result["parts"] == []
    assert result["timing"]["shared_triton_cache"] is False      # graded alone: one run, its own cache


# At import, the worker leaves a file named after its submission and its part in its Triton cache.
CACHE_WRITER = ("import os, uuid\n"
                "_PART = os.path.basename(os.path.dirname(os.environ['HOME']))\n"
                "_NAME = f'{WHO}--{_PART}--{uuid.uuid4().hex}'\n"
                "open(os.path.join(os.environ['TRITON_CACHE_DIR'], _NAME), 'w').close()\n")


@pytest.fixture(scope="module")
def two_split_submissions(tmp_path_factory):
    """Two submissions, ann and bob, graded split into two parts each. Recorded: each part's launch (by
    submission), and what each submission's Triton cache held as its outputs were written and whether it
    was still there after."""
    root = tmp_path_factory.mktemp("shared-cache")
    record = {"launches": {}, "held": {}, "left": {}}
    real_build, real_finish = sandbox.build_launch, Batch.finish

    def build_launch(command, **options):
        launch = real_build(command, **options)
        scratch = Path(options["scratch"])
        if "parts" in scratch.parts:                      # runs/<submission>/parts/<part>
            record["launches"].setdefault(scratch.parent.parent.name, []).append(launch)
        return launch

    def finish(self, source, result, scratch, log):
        caches = {Path(launch.env["TRITON_CACHE_DIR"]) for launch in record["launches"].get(source.id, [])}
        files = [path.name for cache in caches if cache.is_dir() for path in cache.iterdir()]
        record["held"][source.id] = sorted({name.rsplit("--", 1)[0] for name in files if "--" in name})
        word = real_finish(self, source, result, scratch, log)
        record["left"][source.id] = [cache for cache in caches if cache.exists()]
        record[source.id] = json.loads((root / "out" / source.id / "result.json").read_text())
        return word

    with pytest.MonkeyPatch.context() as monkeypatch:
        suite = _measured_suite(root, monkeypatch, SECONDS_BY_PROBLEM)
        for student in ("ann", "bob"):
            _submission(root / "subs", student, {"softmax.py": f"WHO = {student!r}\n{CACHE_WRITER}{GOOD_SOFTMAX}",
                                                 "matmul.py": GOOD_MATMUL})
        monkeypatch.setattr(sandbox, "build_launch", build_launch)
        monkeypatch.setattr(Batch, "finish", finish)
        assert _grade(suite, root / "subs", root / "out", split=True) == 0
    return record


def test_the_parts_of_one_submission_write_one_triton_cache_bound_writable_into_each(two_split_submissions):
    record = two_split_submissions
    for student in ("ann", "bob"):
        result = record[student]
        assert result["status"] == "graded" and result["score"]["earned"] == result["score"]["possible"] > 0
        launches = record["launches"][student]
        caches = {launch.env["TRITON_CACHE_DIR"] for launch in launches}
        assert len(launches) == 2 and len(caches) == 1, caches
        cache = caches.pop()
        for launch in launches:
            assert launch.sandboxed == (sandbox.find_bwrap() is not None)
            if launch.sandboxed:
                at = launch.argv.index(cache) - 1
                assert launch.argv[at:at + 3] == ["--bind", cache, cache]
        assert len({launch.env["HOME"] for launch in launches}) == 2           # the rest stays per part
        # each part's worker wrote into that one folder
        assert record["held"][student] == [f"{student}--1-softmax", f"{student}--2-matmul+softmax"]
        assert result["timing"]["shared_triton_cache"] is True


def test_two_submissions_never_share_a_triton_cache_nor_see_each_others(two_split_submissions):
    record = two_split_submissions
    ann, bob = ({launch.env["TRITON_CACHE_DIR"] for launch in record["launches"][name]} for name in ("ann", "bob"))
    assert len(ann) == len(bob) == 1 and ann != bob
    for mine, theirs in (("ann", bob), ("bob", ann)):
        for launch in record["launches"][mine]:
            assert theirs.isdisjoint(launch.argv) and theirs.isdisjoint(launch.env.values())
        assert all(name.startswith(f"{mine}--") for name in record["held"][mine])


def test_a_submissions_triton_cache_is_removed_with_its_scratch(two_split_submissions):
    record = two_split_submissions
    for student in ("ann", "bob"):
        assert len({launch.env["TRITON_CACHE_DIR"] for launch in record["launches"][student]}) == 1
        assert record["held"][student] and record["left"][student] == []


def test_the_next_submissions_part_takes_the_seat_a_quick_part_gives_back(suite_by_problem, tmp_path,
                                                                          monkeypatch):
    # One submission at a time on "GPU 0", in two parts: two seats. A part of the other submission starts
    # once the quick part ends, not only when the slow one does; never more than two runs at once.
    for student in ("first", "second"):
        _submission(tmp_path / "subs", student, {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    spans, real_execute, lock = [], Batch.execute, threading.Lock()

    def execute(self, student, scratch, slot, collect_only=False, part=None):
        if collect_only:
            return real_execute(self, student, scratch, slot, collect_only=True)
        start = time.monotonic()
        outcome = real_execute(self, student, scratch, None, part=part)     # on the CPU: no GPU here
        if part.label == "1-softmax":
            time.sleep(3.0)                                                 # the slow part
        with lock:
            spans.append((student, part.label, start, time.monotonic()))
        return outcome

    monkeypatch.setattr(Batch, "execute", execute)
    monkeypatch.setattr(sizing_module, "gpu_memory_total", lambda: None)
    assert _grade(suite_by_problem, tmp_path / "subs", tmp_path / "out", gpus="0", per_gpu=1) == 0
    span = {(student, label): (start, end) for student, label, start, end in spans}
    runs = {student: (min(span[student, label][0] for label in ("1-softmax", "2-matmul+softmax")),
                      max(span[student, label][1] for label in ("1-softmax", "2-matmul+softmax")))
            for student in ("first", "second")}
    earlier, later = sorted(runs.values())
    assert later[0] < earlier[1]                     # the submissions overlapped on the one GPU slot
    for moment in (start for start, _ in span.values()):
        assert sum(start <= moment < end for start, end in span.values()) <= 2
    for student in ("first", "second"):
        result, _ = _scores(tmp_path / "out", student)
        assert result["status"] == "graded" and result["score"]["earned"] == result["score"]["possible"] > 0


def test_bench_grading_saves_the_seconds_only_when_every_copy_was_graded(tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "TEST_SECONDS_FILE", tmp_path / "seconds.json")
    status = {"now": "graded"}

    def grade_all(submissions, out, **options):
        tests = [{"nodeid": "tests_hidden/test_softmax_hidden.py::test_rows[0]", "duration": 4.0}]
        result = {"id": "reference00", "status": status["now"], "gpu": "0", "environment": {"gpu": "NVIDIA H200"},
                  "timing": {"tests_s": 4.0, "child_s": 5.0, "total_s": 5.0},
                  "problems": [{"checks": [{"tests": tests}]}]}
        (Path(out) / "reference00").mkdir(parents=True, exist_ok=True)
        (Path(out) / "reference00" / "result.json").write_text(json.dumps(result))
        return 0

    monkeypatch.setattr(runner_module, "grade_all", grade_all)
    status["now"] = "timeout"
    assert bench_grader(1, out=str(tmp_path / "out"), save_test_seconds=True) == 1
    assert not (tmp_path / "seconds.json").exists()
    status["now"] = "graded"
    assert bench_grader(1, out=str(tmp_path / "out"), save_test_seconds=True) == 0
    saved = json.loads((tmp_path / "seconds.json").read_text())
    assert saved["gpu"] == "NVIDIA H200"
    assert saved["seconds"] == {"tests_hidden/test_softmax_hidden.py::test_rows[0]": 4.0}
