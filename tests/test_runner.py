"""The batch runner, end to end on a tiny fake suite (two problems, five checks) through the real
plugin: every status, kept points after a kill, a forged result that does not count, resume, --only,
archives; plus GPU detection, exit classification and the torch-free import boundary."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_suite import GOOD_MATMUL, GOOD_SOFTMAX
from fake_suite import grade_batch as _grade
from fake_suite import make_submission as _submission
from fake_suite import write_suite as _write_suite
from hostile_archives import ignored_names_flood, pax_records_bomb, zip_with_bad_crc, zip_with_utf8_flag_and_bad_name

from grader import results
from grader.errors import GraderError
from grader.grade import batch as batch_module
from grader.grade import checking_run, containment, parts, sandbox, submission
from grader.grade import runner as runner_module
from grader.grade import sizing as sizing_module
from grader.grade.batch import Batch
from grader.grade.checker_tree import grade_key, remove_tree
from grader.grade.checking_run import Outcome, classify_exit, decisive_line
from grader.grade.progress import eta_from_rate
from grader.grade.runner import grade_all
from grader.grade.sandbox import find_bwrap
from grader.grade.settings import Settings
from grader.grade.sizing import (
    MIN_WORKER_MEMORY_MB,
    default_jobs,
    default_per_gpu,
    default_worker_memory_mb,
    detect_gpus,
    gpu_memory_total,
    parse_gpus,
)
from grader.perf import gpu_lock
from grader.report import html
from grader.results import read_stream

REPO = Path(__file__).resolve().parent.parent
HANG_BUDGET = 30.0  # the hanging submission's budget: enough for its first tests to report first

# Tries to write a passing record straight into the checker's results pipe.
FORGER = '''
import json, os

def _forge():
    line = json.dumps({"type": "test", "nodeid": "tests_hidden/forged.py::test_forged",
                       "check": "softmax.hidden_double", "outcome": "passed", "message": "",
                       "duration": 0.0, "perf": None}) + "\\n"
    parent = os.getppid()
    for fd in os.listdir(f"/proc/{parent}/fd"):
        try:
            if os.readlink(f"/proc/{parent}/fd/{fd}").startswith("pipe:"):
                with open(f"/proc/{parent}/fd/{fd}", "w") as pipe:
                    pipe.write(line)
        except OSError:
            pass

_forge()

def double(x):
    return 0

def triple(x):
    return 0
'''


def _result(out, student):
    return json.loads((out / student / "result.json").read_text())


def _check(result, check_id):
    return next(c for p in result["problems"] for c in p["checks"] if c["id"] == check_id)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One batch over every kind of submission that ends by itself."""
    root = tmp_path_factory.mktemp("batch")
    _write_suite(root / "suite")
    subs = root / "submissions"
    _submission(subs, "good", {"softmax.py": GOOD_SOFTMAX, "assignment/matmul.py": GOOD_MATMUL,
                               "leaderboard_name": "fast one\n"})
    _submission(subs, "partial", {"softmax.py": GOOD_SOFTMAX.replace("3 * x", "3 + x"),
                                  "conftest.py": "import os\nos._exit(0)\n", "notes.txt": "hi"})
    _submission(subs, "killer", {"softmax.py": GOOD_SOFTMAX,
                                 "matmul.py": "import os, signal\n\ndef answer():\n"
                                              "    os.kill(os.getppid(), signal.SIGKILL)\n"})
    _submission(subs, "forger", {"softmax.py": FORGER})
    _submission(subs, "empty", {"README.md": "I did not finish"})
    with zipfile.ZipFile(subs / "zipped.zip", "w") as archive:
        archive.writestr("zipped/assignment/softmax.py", GOOD_SOFTMAX)
    with zipfile.ZipFile(subs / "evil.zip", "w") as archive:
        archive.writestr("../softmax.py", GOOD_SOFTMAX)
    (subs / "metadata.csv").write_text("id,late\npartial,yes\ngood,no\n")
    out = root / "out"
    status = _grade(root / "suite", subs, out)
    return {"root": root, "out": out, "status": status, "subs": subs}


def test_batch_exits_zero_and_writes_every_output(graded):
    out = graded["out"]
    assert graded["status"] == 0
    students = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert students == ["empty", "evil", "forger", "good", "killer", "partial", "zipped"]
    for student in students:
        for name in ("result.json", "gradescope.json", "report.html", "log.txt"):
            assert (out / student / name).is_file(), (student, name)
    assert (out / "grades.csv").is_file() and (out / "index.html").is_file()


def test_correct_submission_gets_every_point_that_ran_here(graded):
    result = _result(graded["out"], "good")
    assert result["status"] == "graded", result["reason"]
    assert result["score"] == {"earned": 8.0, "possible": 8.0, "total": 12.0}
    assert _check(result, "matmul.perf.speed")["not_run_here"] is True
    assert result["leaderboard_name"] == "fast one"
    assert _result(graded["out"], "partial")["leaderboard_name"] is None


def test_wrong_function_loses_its_check_and_planted_conftest_has_no_effect(graded):
    result = _result(graded["out"], "partial")
    assert result["status"] == "graded"
    assert _check(result, "softmax.double")["earned"] == 2
    triple = _check(result, "softmax.triple")
    assert triple["earned"] == 0 and "triple(3) should be 9" in triple["tests"][0]["message"]
    assert _check(result, "matmul.answer")["tests"][0]["outcome"] == "not_implemented"
    assert any(line.startswith("conftest.py (not graded: a helper may not be named like") for line in result["ignored"])
    assert result["late"] is True and _result(graded["out"], "good")["late"] is False


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    """A submission whose last public test never returns, graded on a short budget."""
    root = tmp_path_factory.mktemp("hang")
    _write_suite(root / "suite")
    _submission(root / "subs", "hang", {"softmax.py": GOOD_SOFTMAX,
                                        "matmul.py": "def answer():\n    while True:\n        pass\n"})
    _grade(root / "suite", root / "subs", root / "out", timeout=HANG_BUDGET)
    return root / "out"


def test_hanging_submission_times_out_and_keeps_points_reported_before(hung):
    result = _result(hung, "hang")
    assert result["status"] == "timeout"
    assert "wall-clock budget" in result["reason"]
    assert _check(result, "softmax.double")["earned"] == 2
    answer = _check(result, "matmul.answer")
    assert answer["earned"] == 0 and answer["tests"][0]["outcome"] == "did_not_report"
    assert _check(result, "softmax.hidden_double")["earned"] == 0


def test_a_timeout_has_the_batch_max_not_one_with_the_gpu_checks_it_never_reached(hung):
    result = _result(hung, "hang")
    assert result["score"]["possible"] == 8.0         # the CPU max: the perf check cannot run here
    assert _check(result, "matmul.perf.speed")["not_run_here"] is True


def test_submission_that_kills_the_checker_is_crashed_and_keeps_earlier_points(graded):
    result = _result(graded["out"], "killer")
    assert result["status"] == "crashed", result["reason"]
    assert _check(result, "softmax.double")["earned"] == 2
    # Without the list of collected tests the last reported check also loses the test maybe cut off.
    assert _check(result, "softmax.triple")["earned"] == (1 if result["missing_exact"] else 0.5)
    assert _check(result, "matmul.answer")["earned"] == 0


@pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap not installed: the results pipe is only "
                    "out of the worker's reach inside the sandbox (apt-get install -y bubblewrap)")
def test_forged_record_written_by_student_code_does_not_count(graded):
    result = _result(graded["out"], "forger")
    hidden = _check(result, "softmax.hidden_double")
    assert [t["nodeid"] for t in hidden["tests"]] == ["tests_hidden/test_fake_hidden.py::test_hidden_double_of_ten"]
    assert hidden["earned"] == 0 and result["score"]["earned"] == 0


def test_nothing_to_grade_and_unsafe_archive_are_not_gradable(graded):
    empty, evil = _result(graded["out"], "empty"), _result(graded["out"], "evil")
    assert empty["status"] == evil["status"] == "not_gradable"
    assert "no assignment module files" in empty["reason"]
    assert "path traversal" in evil["reason"]
    assert empty["score"]["possible"] == _result(graded["out"], "good")["score"]["possible"] == 8.0


def test_archive_with_wrapper_folder_is_graded(graded):
    result = _result(graded["out"], "zipped")
    assert result["status"] == "graded" and list(result["files"]) == ["softmax"]
    assert _check(result, "softmax.double")["earned"] == 2


def test_report_records_sandbox_and_log_is_bounded(graded):
    result = _result(graded["out"], "good")
    assert result["sandbox"] == ("bubblewrap" if find_bwrap() else "none")
    assert (graded["out"] / "good" / "log.txt").stat().st_size <= checking_run.LOG_HEAD + checking_run.LOG_TAIL + 200


def test_unchanged_submissions_are_kept_and_changed_or_forced_ones_regraded(graded, tmp_path):
    out, subs, suite = tmp_path / "out", tmp_path / "subs", graded["root"] / "suite"
    _submission(subs, "good", {"softmax.py": GOOD_SOFTMAX})
    _submission(subs, "other", {"softmax.py": GOOD_SOFTMAX})

    def stamp(student):
        return _result(out, student)["graded_at"], os.stat(out / student / "result.json").st_mtime_ns

    assert _grade(suite, subs, out) == 0
    first = {s: stamp(s) for s in ("good", "other")}
    assert _grade(suite, subs, out) == 0                          # nothing changed: nothing regraded
    assert {s: stamp(s) for s in first} == first
    (subs / "other" / "notes.txt").write_text("an ignored file does not trigger a regrade")
    (subs / "good" / "softmax.py").write_text(GOOD_SOFTMAX.replace("2 * x", "x + x"))
    assert _grade(suite, subs, out, only=("other",)) == 0         # --only picks, it does not force
    assert stamp("other") == first["other"] and stamp("good") == first["good"]
    assert _grade(suite, subs, out, only=("other",), force=True) == 0   # --force does
    assert stamp("other") != first["other"] and stamp("good") == first["good"]
    assert _grade(suite, subs, out) == 0                          # now the changed one
    assert stamp("good") != first["good"]
    rows = (out / "grades.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows[1:]] == ["good", "other"]


def test_public_suite_alone_without_sandbox_scores_public_checks_only(graded, tmp_path):
    subs = tmp_path / "subs"
    _submission(subs, "good", {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    assert _grade(graded["root"] / "suite", subs, tmp_path / "out", suite="public", no_perf=True,
                  no_sandbox=True) == 0
    result = _result(tmp_path / "out", "good")
    assert result["sandbox"] == "none" and result["status"] == "graded"
    assert result["score"] == {"earned": 6.0, "possible": 6.0, "total": 6.0}
    assert [c["id"] for p in result["problems"] for c in p["checks"]] == \
        ["softmax.double", "softmax.triple", "matmul.answer"]


# --- pure pieces -------------------------------------------------------------------------------------


def test_gpus_come_from_cuda_visible_devices_before_nvidia_smi():
    def no_call(*args, **kwargs):
        raise AssertionError("nvidia-smi must not run when CUDA_VISIBLE_DEVICES is set")

    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, run=no_call) == ["2", "3"]
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": ""}, run=no_call) == []
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, run=no_call) == []


def test_gpus_are_counted_from_nvidia_smi_listing():
    listing = "GPU 0: NVIDIA H200 (UUID: GPU-a)\nGPU 1: NVIDIA H200 (UUID: GPU-b)\n"

    def fake_smi(argv, **kwargs):
        assert argv == ["nvidia-smi", "-L"]
        return subprocess.CompletedProcess(argv, 0, listing, "")

    def missing_smi(argv, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    assert detect_gpus({}, run=fake_smi) == ["0", "1"]
    assert detect_gpus({}, run=missing_smi) == []


def test_gpus_option_parses_lists_and_refuses_duplicates():
    assert parse_gpus("0,1, 3") == ["0", "1", "3"]
    assert parse_gpus("") == [] and parse_gpus("none") == []
    with pytest.raises(Exception, match="listed twice"):
        parse_gpus("0,0")


@pytest.fixture
def batch_settings(monkeypatch):
    """grade_all stops at the Batch it would run: {"settings": the Settings it was given}."""
    seen = {}

    class FakeBatch:
        def __init__(self, settings):
            seen["settings"] = settings

        def run(self):
            return 0

    monkeypatch.setattr(runner_module, "Batch", FakeBatch)
    return seen


def test_one_slot_per_gpu_and_cpu_child_sees_no_gpu(tmp_path, monkeypatch, batch_settings):
    seen = batch_settings
    grade_all(tmp_path, gpus="0,1,2", per_gpu=1)
    assert seen["settings"].slots == ["0", "1", "2"] and seen["settings"].gpu_mode
    grade_all(tmp_path, gpus="", jobs=3)
    assert seen["settings"].slots == [None, None, None] and not seen["settings"].gpu_mode
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    grade_all(tmp_path, per_gpu=1)
    assert seen["settings"].slots == ["5"]
    grade_all(tmp_path, gpus="all", per_gpu=1)
    assert seen["settings"].slots == ["5"]
    # --jobs 0 and a negative --timeout are refused by the CLI's option types (test_cli_grade).


HEADER = results.header_line("x", "cpu", {}, []) + "\n"


@pytest.mark.parametrize("code, timed_out, stream, log, status", [
    (0, False, HEADER + '{"type": "end"}\n', "", "graded"),
    (1, False, HEADER + '{"type": "end"}\n', "", "graded"),
    (1, False, HEADER + '{"type": "te', "", "crashed"),
    (-9, False, HEADER, "", "crashed"),
    (2, False, HEADER, "KeyboardInterrupt", "crashed"),          # student code can send SIGINT
    (None, True, HEADER, "", "timeout"),
    (-9, False, "", "", "harness_error"),                        # no header: no student code had run
    (None, True, "", "", "harness_error"),
    (1, False, "", "bwrap: execvp /tmp/x/venv/bin/python: No such file or directory", "harness_error"),
    (3, False, HEADER, "INTERNALERROR> KeyError: 'x'", "harness_error"),
    (4, False, HEADER + '{"type": "end"}\n', "", "harness_error"),
    (2, False, HEADER, "ERROR collecting tests_hidden/test_x.py\nE   ImportError: cannot import name 'y'\n"
                       "!!! Interrupted: 1 error during collection !!!", "harness_error"),
])
def test_exit_classification(code, timed_out, stream, log, status):
    assert classify_exit(code, timed_out, 10.0, read_stream(stream), log)[0] == status


@pytest.mark.parametrize("log, line", [
    ("Traceback...\nbwrap: execvp /tmp/x/venv/bin/python: No such file or directory\n",
     "bwrap: execvp /tmp/x/venv/bin/python: No such file or directory"),
    ("ERROR collecting tests_hidden/test_x.py\nE   ImportError: cannot import name 'y' from 'grader.z'\n"
     "!!! Interrupted: 1 error during collection !!!\n", "E   ImportError: cannot import name 'y' from 'grader.z'"),
    ("INTERNALERROR> Traceback\nINTERNALERROR> KeyError: 'check'\n", "INTERNALERROR> KeyError: 'check'"),
])
def test_a_harness_errors_reason_is_its_decisive_log_line_not_the_exit_code(log, line):
    status, reason = classify_exit(1 if "bwrap" in log else 3, False, 10.0, read_stream(""), log)
    assert status == "harness_error" and reason.endswith(line)


def test_bounded_log_keeps_head_and_tail():
    log = checking_run.BoundedLog(head=10, tail=10)
    for _ in range(100):
        log.add(b"0123456789")
    text = log.text()
    assert text.startswith("0123456789") and text.endswith("0123456789")
    assert "980 bytes of output left out" in text


def test_bounded_log_escapes_terminal_control_sequences_of_the_students_output():
    """A harness error's reason is a log line printed on the runner's terminal: it must not drive it."""
    log = checking_run.BoundedLog()
    log.add(b"E   ValueError: \x1b]52;c;cm0gLXJmIH4=\x07\x1b[2Jgraded\r\n")
    text = log.text()
    assert "\x1b" not in text and "\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2Jgraded\n" in text
    assert decisive_line(text) == "E   ValueError: \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2Jgraded"


def test_parent_side_modules_import_without_torch():
    code = ("import sys\nsys.modules['torch'] = None\nsys.modules['triton'] = None\n"
            "import grader.cli, grader.grade.runner, grader.grade.sandbox, grader.grade.submission, grader.scoring\n"
            "import grader.report.model, grader.report.html, grader.report.gradebook\n"
            "assert 'numpy' not in sys.modules, 'numpy imported'\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.strip() == "ok", done.stderr


def test_gpu_name_for_calibrated_ladders_comes_from_the_run_header():
    header = results.header_line("submission", "cuda", {"device": "CUDA: NVIDIA H200"}, [])
    assert checking_run.gpu_name_of(read_stream(header + "\n")) == "NVIDIA H200"
    cpu = results.header_line("submission", "cpu", {"device": "no CUDA"}, [])
    assert checking_run.gpu_name_of(read_stream(cpu)) is None and checking_run.gpu_name_of(read_stream("")) is None


def test_installed_but_broken_bubblewrap_fails_the_preflight_and_grades_nobody(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: str(fake))
    _write_suite(tmp_path / "suite")
    _submission(tmp_path / "subs", "good", {"softmax.py": GOOD_SOFTMAX})
    with pytest.raises(GraderError, match="--no-sandbox") as error:
        _grade(tmp_path / "suite", tmp_path / "subs", tmp_path / "out")
    assert "preflight failed" in str(error.value) and "No permissions to create new namespace" in str(error.value)
    assert "unprivileged_userns_clone" in str(error.value)
    assert not (tmp_path / "out" / "good").exists()


def test_a_harness_error_is_no_grade_is_listed_exits_nonzero_and_is_regraded(tmp_path, monkeypatch, capfd):
    _write_suite(tmp_path / "suite")
    _submission(tmp_path / "subs", "good", {"softmax.py": GOOD_SOFTMAX})
    real_execute, broken = Batch.execute, {"now": True}
    bwrap_line = "bwrap: execvp /tmp/x/venv/bin/python: No such file or directory"

    def execute(self, student, scratch, slot, collect_only=False):
        if collect_only or not broken["now"]:
            return real_execute(self, student, scratch, slot, collect_only)
        status, reason = classify_exit(1, False, 10.0, read_stream(""), bwrap_line + "\n")
        return Outcome(status, reason, 1, 0.1, "", bwrap_line)

    monkeypatch.setattr(Batch, "execute", execute)
    options = {"no_sandbox": True, "quiet": False}
    assert _grade(tmp_path / "suite", tmp_path / "subs", tmp_path / "out", **options) == 1
    assert "HARNESS ERRORS: 1" in capfd.readouterr().err
    result = _result(tmp_path / "out", "good")
    assert result["status"] == "harness_error" and result["reason"].endswith(bwrap_line)
    row = (tmp_path / "out" / "grades.csv").read_text().splitlines()[1].split(",")
    assert row[:3] == ["good", "harness_error", ""] and bwrap_line in row[-1]
    broken["now"] = False                       # fixed: the same command regrades it, unchanged files or not
    assert _grade(tmp_path / "suite", tmp_path / "subs", tmp_path / "out", **options) == 0
    assert _result(tmp_path / "out", "good")["status"] == "graded"


def test_ctrl_c_keeps_finished_grades_and_rebuilds_class_files(tmp_path, monkeypatch):
    root = tmp_path
    _write_suite(root / "suite")
    for student in ("a_first", "b_second"):
        _submission(root / "subs", student, {"softmax.py": GOOD_SOFTMAX})
    stream = "\n".join([json.dumps({"type": "header", "version": 1, "impl": "x", "device": "cpu",
                                     "environment": {}, "collected_checks": []}),
                         json.dumps({"type": "test", "nodeid": "t::a", "check": "softmax.double",
                                     "outcome": "passed", "message": "", "duration": 0.1, "perf": None}),
                         json.dumps({"type": "end"})])

    def fake_execute(self, student, scratch, slot, collect_only=False):
        if collect_only:
            header = stream.replace('"collected_checks": []', '"collected_checks": [], '
                                    '"collected_tests": [["t::a", "softmax.double"]], "not_run_here": []')
            return Outcome("graded", "", 0, 0.5, header, "log")
        if student == "b_second":
            raise KeyboardInterrupt
        return Outcome("graded", "", 0, 0.5, stream, "log")

    monkeypatch.setattr(Batch, "execute", fake_execute)
    status = _grade(root / "suite", root / "subs", root / "out", jobs=1)
    assert status == 130
    assert _result(root / "out", "a_first")["score"]["earned"] == 2
    assert not (root / "out" / "b_second").exists()
    assert "a_first,graded,2," in (root / "out" / "grades.csv").read_text()
    assert (root / "out" / "index.html").exists()


# --- hostile names and archives ---------------------------------------------------------------------


def _fake_graded_run(monkeypatch):
    """Every checking run 'passes softmax.double', and the checker tree is not warmed: these tests are
    about intake and outputs, so the batch takes a second, not a checking run's time."""
    stream = "\n".join([json.dumps({"type": "header", "version": 1, "impl": "x", "device": "cpu",
                                     "environment": {}, "collected_checks": []}),
                         json.dumps({"type": "test", "nodeid": "t::a", "check": "softmax.double",
                                     "outcome": "passed", "message": "", "duration": 0.1, "perf": None}),
                         json.dumps({"type": "end"})])
    monkeypatch.setattr(Batch, "execute",
                        lambda self, student, scratch, slot, collect_only=False:
                        Outcome("graded", "", 0, 0.1, stream, "log"))
    monkeypatch.setattr(batch_module, "warm_checker_tree", lambda root, suite_dirs: None)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """One batch of hostile names and archives, plus a report that fails to render and a submission the
    grader itself fails on."""
    root = tmp_path_factory.mktemp("hostile")
    _write_suite(root / "suite")
    subs = root / "subs"
    for student in ("good", "victim", "grades.csv", "index.html", "render_fails", "grader_fails"):
        _submission(subs, student, {"softmax.py": GOOD_SOFTMAX})
    with zipfile.ZipFile(subs / "victim.zip", "w") as archive:
        archive.writestr("softmax.py", GOOD_SOFTMAX)
    latin = _submission(subs, "latin", {"softmax.py": GOOD_SOFTMAX})
    _submission(subs, "near_miss", {"Softmax.py": GOOD_SOFTMAX, "matmul.py.txt": "x = 1\n"})
    _submission(subs, "deep", {"my-repo/cs336_systems/softmax.py": GOOD_SOFTMAX, "my-repo/README.md": "hi"})
    with open(os.path.join(os.fsencode(latin), b"r\xe9sum\xe9.txt"), "wb") as handle:
        handle.write(b"a name that is not UTF-8")
    zip_with_bad_crc(subs / "crc.zip")
    zip_with_utf8_flag_and_bad_name(subs / "utf8flag.zip")
    pax_records_bomb(subs / "pax.tar", 1 << 20)
    ignored_names_flood(subs / "flood.tar.gz", count=1500)
    real_render, real_stage = html.render_student, submission.stage

    def render(result, *args, **kwargs):
        if result["id"] == "render_fails":
            raise ValueError("a template that cannot take this result")
        return real_render(result, *args, **kwargs)

    def stage(source, dest):
        if source.id == "grader_fails":
            raise KeyError("something nobody planned for")
        return real_stage(source, dest)

    with pytest.MonkeyPatch.context() as patch:
        _fake_graded_run(patch)
        patch.setattr(html, "render_student", render)
        patch.setattr(submission, "stage", stage)
        status = _grade(root / "suite", subs, root / "out")
    return {"out": root / "out", "status": status}


def test_hostile_submissions_do_not_stop_the_batch_or_the_class_files(hostile):
    out = hostile["out"]
    assert hostile["status"] == 0
    assert (out / "grades.csv").is_file() and (out / "index.html").is_file()
    rows = (out / "grades.csv").read_text()
    for student in ("good", "latin", "flood", "crc", "utf8flag", "pax", "victim", "_grades.csv", "_index.html",
                    "render_fails", "grader_fails"):
        assert f"\n{student}," in rows, student
        assert (out / student / "report.html").is_file(), student


@pytest.mark.parametrize("student, reason", [
    ("crc", r"crc\.zip: unreadable archive \(BadZipFile: Bad CRC-32"),
    ("utf8flag", r"utf8flag\.zip: unreadable archive \(UnicodeDecodeError"),
    ("pax", r"pax\.tar: an extended tar header of \d+ bytes"),
    ("victim", r"victim and victim\.zip both stand for the id 'victim'"),
    ("_grades.csv", r"the id 'grades\.csv' is the name of a class output file"),
    ("_index.html", r"the id 'index\.html' is the name of a class output file"),
    ("grader_fails", r"the grader failed on this submission \(KeyError"),
    ("near_miss", r"did you mean softmax\.py\? found Softmax\.py.*did you mean matmul\.py\? found matmul\.py\.txt"),
])
def test_each_hostile_submission_alone_is_not_gradable_with_its_reason(hostile, student, reason):
    result = _result(hostile["out"], student)
    assert result["status"] == "not_gradable"
    assert re.search(reason, result["reason"]), result["reason"]


def test_every_not_gradable_row_of_the_gradebook_says_why(hostile):
    with (hostile["out"] / "grades.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["status"] == "not_gradable"]
    assert len(rows) >= 8
    assert all(row["reason"].strip() for row in rows), [row["id"] for row in rows if not row["reason"].strip()]
    near_miss = next(row for row in rows if row["id"] == "near_miss")
    assert "did you mean softmax.py?" in near_miss["reason"]


def test_module_files_deep_in_a_submission_are_found_and_the_report_says_where(hostile):
    deep = _result(hostile["out"], "deep")
    assert deep["status"] == "graded" and deep["found"] == {"softmax": "my-repo/cs336_systems/softmax.py"}
    assert "my-repo/cs336_systems/softmax.py" in (hostile["out"] / "deep" / "report.html").read_text()


def test_names_that_are_not_utf8_and_floods_of_names_give_small_readable_reports(hostile):
    latin = _result(hostile["out"], "latin")
    assert latin["status"] == "graded" and "r\\xe9sum\\xe9.txt (not an assignment module file)" in latin["ignored"]
    assert "r\\xe9sum\\xe9.txt" in (hostile["out"] / "latin" / "report.html").read_text(encoding="utf-8")
    assert _result(hostile["out"], "flood")["status"] == "graded"
    assert (hostile["out"] / "flood" / "report.html").stat().st_size < 200_000
    assert (hostile["out"] / "flood" / "result.json").stat().st_size < 200_000


def test_a_report_that_fails_to_render_leaves_the_grade_and_the_other_outputs(hostile):
    assert "could not be rendered" in (hostile["out"] / "render_fails" / "report.html").read_text()
    assert _result(hostile["out"], "render_fails")["score"]["earned"] == 2
    assert "render_fails,graded,2," in (hostile["out"] / "grades.csv").read_text()


# --- ETA --------------------------------------------------------------------------------------------


def test_eta_is_unknown_until_a_run_has_finished():
    assert eta_from_rate(0, elapsed_s=120.0, remaining=3) is None
    assert eta_from_rate(0, elapsed_s=120.0, remaining=0) == 0.0


def test_eta_follows_the_rate_graded_so_far():
    # two graded in 300 s: six more take 900 s at that rate
    assert eta_from_rate(2, elapsed_s=300.0, remaining=6) == 900.0


def test_eta_is_never_zero_while_a_submission_is_left_and_a_stall_moves_it_out():
    # runs that outlast the mean used to read "ETA 0m00s" until the batch ended
    early, later = eta_from_rate(1, elapsed_s=100.0, remaining=1), eta_from_rate(1, elapsed_s=500.0, remaining=1)
    assert 0 < early < later


def test_the_progress_line_says_what_runs_and_the_time_left_at_the_batch_s_rate():
    now, lines = time.perf_counter(), []
    batch = SimpleNamespace(lock=threading.Lock(), durations=[300.0], say=lines.append,
                            running={(name, "1-part"): (None, now - 100.0) for name in ("a", "b", "c")})
    Batch.progress(batch, 1, 7, "z", "graded 1/1", now - 300.0)
    minutes, seconds = re.search(r"ETA (\d+)m(\d+)s$", lines[-1]).groups()
    assert "running: a, b, c" in lines[-1]
    assert 1795 <= 60 * int(minutes) + int(seconds) <= 1800, lines      # six left at one per 300 s


# --- worker memory cap --------------------------------------------------------------------------------


def test_worker_memory_default_is_half_the_ram_shared_over_parallel_runs():
    assert default_worker_memory_mb(2, physical_bytes=256 * 2**30) == 64 * 1024


def test_resume_key_holds_the_memory_cap_only_when_the_ta_set_it(tmp_path):
    # The default cap comes from the machine's RAM: in the key, a node with more RAM regrades everyone.
    def key(**options):
        return grade_key("files", Settings(submissions=tmp_path, out=tmp_path, **options), "grader")

    assert key(worker_memory_mb=8192) == key(worker_memory_mb=65536)
    assert key(worker_memory_mb=4096, worker_memory_option=4096) != key(worker_memory_mb=8192)


def test_worker_memory_default_never_goes_below_what_cuda_needs():
    assert default_worker_memory_mb(2, physical_bytes=24 * 2**30) == MIN_WORKER_MEMORY_MB


# --- several submissions per GPU ----------------------------------------------------------------------


def test_per_gpu_repeats_each_gpu_interleaved_and_shares_the_memory_cap(tmp_path, monkeypatch, batch_settings):
    seen = batch_settings
    monkeypatch.setattr(parts, "usable_cores", lambda: 32)    # 6 at once: 5 cores each, 4 parts
    grade_all(tmp_path, gpus="0,1", per_gpu=3, worker_memory=None)
    settings = seen["settings"]
    assert settings.slots == ["0", "1", "0", "1", "0", "1"] and settings.per_gpu == 3
    assert settings.split and settings.parts_each == parts.MAX_PARTS   # a worker of its own per part
    assert settings.worker_memory_mb == default_worker_memory_mb(6 * parts.MAX_PARTS)
    grade_all(tmp_path, gpus="0,1", per_gpu=3, worker_memory=None, split=False)
    assert seen["settings"].worker_memory_mb == default_worker_memory_mb(6)
    assert seen["settings"].parts_each == 1
    monkeypatch.setattr(sizing_module, "default_per_gpu", lambda gpus: 2)
    grade_all(tmp_path, gpus="7")
    assert seen["settings"].slots == ["7", "7"]


@pytest.mark.parametrize("cores, ram_gib, gpu_gib, gpus, expected", [
    (16, 128, 141, 1, 4),      # one H200 with its node's share: capped at the measured 4
    (128, 2048, 141, 8, 4),    # the 8-GPU node: 16 cores and 256 GiB per GPU
    (4, 128, 141, 1, 2),       # few cores: the compiles are the limit
    (64, 32, 141, 1, 2),       # little RAM
    (64, 512, 40, 1, 1),       # a small GPU
    (2, 4, None, 1, 1),        # never below one
])
def test_default_per_gpu_is_the_least_that_cores_ram_and_gpu_memory_allow(cores, ram_gib, gpu_gib, gpus,
                                                                          expected):
    gpu_bytes = gpu_gib << 30 if gpu_gib else 0
    assert default_per_gpu(gpus, cores=cores, ram_bytes=ram_gib << 30, gpu_memory_bytes=gpu_bytes) == expected


def test_machine_defaults_count_the_cores_this_process_may_use_not_the_nodes(monkeypatch):
    # a Slurm task given 8 cores of a 128-core node with 4 GPUs
    monkeypatch.setattr(parts, "usable_cores", lambda: 8)
    monkeypatch.setattr(os, "cpu_count", lambda: 128)
    assert default_jobs() == 4
    assert default_per_gpu(4, ram_bytes=2048 << 30, gpu_memory_bytes=141 << 30) == 1


def test_gpu_memory_comes_from_nvidia_smi_and_is_none_without_it():
    def smi(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, stdout="143771\n81559\n", stderr="")

    assert gpu_memory_total(run=smi) == 81559 << 20

    def missing(argv, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    assert gpu_memory_total(run=missing) is None


LOCK_PROBE = """
import os, sys
from grader.perf import gpu_lock
lock = gpu_lock.current()
fds = [int(part) for part in os.environ[gpu_lock.FDS_ENV].split(",")]
with lock.exclusive(wait_s=0.5) as hold:
    line = f"{type(lock).__name__} {os.fstat(fds[0]).st_ino} {os.fstat(fds[1]).st_ino} {int(hold.waited_out)}"
os.write(int(sys.argv[1]), line.encode())
"""


def test_each_checking_run_gets_its_own_descriptions_of_its_gpus_lock(tmp_path, monkeypatch):
    _write_suite(tmp_path / "suite")
    settings = Settings(submissions=tmp_path / "subs", out=tmp_path / "out", slots=["0", "0"], gpu_mode=True,
                        sandbox=False, tests_root=tmp_path / "suite", points_dir=tmp_path / "suite" / "points",
                        quiet=True, per_gpu=2)
    (tmp_path / "subs").mkdir()
    monkeypatch.setattr(Batch, "checker_command",
                        lambda self, impl_dir, fd, part=None, **_: [sys.executable, "-c", LOCK_PROBE, str(fd)])
    batch = Batch(settings)
    try:
        lock_file, turnstile = gpu_lock_paths = gpu_lock.lock_paths(batch.scratch_root / "gpu-locks", "0")
        # another checker on the same GPU holds it exclusively: this run's own description must wait
        holder = gpu_lock.GpuLock(*gpu_lock.open_for_child(batch.scratch_root / "gpu-locks", "0"))
        with holder.exclusive():
            busy = batch.execute("a", tmp_path / "scratch-a", "0")
        free = batch.execute("b", tmp_path / "scratch-b", "0")
        inodes = f"{lock_file.stat().st_ino} {turnstile.stat().st_ino}"
        assert busy.stream == f"GpuLock {inodes} 1", busy.log
        assert free.stream == f"GpuLock {inodes} 0", free.log
        assert all(path.parent == batch.scratch_root / "gpu-locks" for path in gpu_lock_paths)
    finally:
        remove_tree(batch.scratch_root)


# The batch as run from a checkout and a venv that both live in the host's /tmp: its checking run
# imports the grader (the checker tree's copy) with the venv's interpreter and writes its TMPDIR.
RUN_FROM_HOST_TMP = """
import os, sys
from pathlib import Path
from grader.grade.batch import Batch
from grader.grade.checker_tree import remove_tree
from grader.grade.settings import Settings

PROBE = ("import grader, os, sys; open(os.path.join(os.environ['TMPDIR'], 'probe'), 'w').close(); "
         "os.write(int(sys.argv[1]), f'{sys.executable} {grader.__file__}'.encode())")
Batch.checker_command = lambda self, impl_dir, fd, part=None, **_: [sys.executable, "-c", PROBE, str(fd)]
base = Path(sys.argv[1])
settings = Settings(submissions=base / "subs", out=base / "out", sandbox=False, tests_root=base / "suite",
                    points_dir=base / "suite" / "points", quiet=True)
batch = Batch(settings)
try:
    assert batch.unshare, "the unsandboxed containment is not in use"
    outcome = batch.execute("a", batch.scratch_root / "runs" / "a", None)
    print(outcome.stream or outcome.log)
finally:
    remove_tree(batch.scratch_root)
"""


@pytest.mark.skipif(not containment.works(containment.find_unshare()), reason="unshare cannot create namespaces here")
def test_an_unsandboxed_run_finds_a_checkout_and_venv_that_live_in_the_host_tmp(host_tmp):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "grader", host_tmp / "checkout" / "grader", ignore=ignore)
    _write_suite(host_tmp / "suite")
    (host_tmp / "subs").mkdir()
    venv = host_tmp / "venv"     # this interpreter's packages (pytest), its own prefix under /tmp
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    env = {**os.environ, "PYTHONPATH": str(host_tmp / "checkout"), "TMPDIR": str(host_tmp)}
    done = subprocess.run([str(venv / "bin" / "python"), "-c", RUN_FROM_HOST_TMP, str(host_tmp)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=host_tmp)
    assert done.returncode == 0, done.stderr
    executable, _, grader_file = done.stdout.strip().partition(" ")
    assert executable == str(venv / "bin" / "python"), done.stdout
    assert grader_file.endswith("/runs/a/checker/grader/__init__.py")


def test_submissions_sharing_a_gpu_slot_are_graded_alike(tmp_path):
    # Two checking runs on "GPU 0" at once, each with its lock's fds (no CUDA here: the tests run on CPU)
    _write_suite(tmp_path / "suite")
    for student in ("one", "two"):
        _submission(tmp_path / "subs", student, {"softmax.py": GOOD_SOFTMAX, "assignment/matmul.py": GOOD_MATMUL})
    status = _grade(tmp_path / "suite", tmp_path / "subs", tmp_path / "out", gpus="0", per_gpu=2)
    assert status == 0
    one, two = _result(tmp_path / "out", "one"), _result(tmp_path / "out", "two")
    assert one["status"] == two["status"] == "graded", (one["reason"], two["reason"])
    assert one["score"]["earned"] == two["score"]["earned"] > 0
    assert one["per_gpu"] == 2 and one["gpu"] == "0"


def test_killing_a_checking_run_kills_the_process_groups_inside_its_session():
    # the worker leads a group of its own (so that it can be stopped between calls): killpg of the
    # checker's group alone would leave it running
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], process_group=0)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    worker = int(run.stdout.readline())
    checking_run.kill_group(run)
    deadline = time.monotonic() + 10
    while _process_state(worker) not in ("Z", "gone") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _process_state(worker) in ("Z", "gone")


def _process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_run_s_budget_is_three_times_the_reference_s_time_unless_the_ta_set_one():
    part = lambda seconds: parts.Part("1-x", ("t",), seconds)   # noqa: E731
    batch = SimpleNamespace(settings=SimpleNamespace(timeout_option=None, gpu_mode=True, timeout=1800.0),
                            parts=[part(200.0), part(50.0)])
    assert Batch.budget_s(batch, part(200.0)) == 600.0
    assert Batch.budget_s(batch, part(20.0)) == sizing_module.MIN_BUDGET_S         # never under the floor
    assert Batch.budget_s(batch, None) == 750.0                              # a whole suite: all its parts
    assert Batch.budget_s(batch, part(0.0)) == 1800.0                        # unmeasured: the default
    batch.settings.timeout_option = batch.settings.timeout = 90.0
    assert Batch.budget_s(batch, part(200.0)) == 90.0
    batch.settings.timeout_option, batch.settings.gpu_mode, batch.settings.timeout = None, False, 1800.0
    assert Batch.budget_s(batch, part(200.0)) == 1800.0                      # CPU: no reference time here


# --- math libraries' thread pools ---------------------------------------------------------------------


@pytest.mark.parametrize("cores, runs, threads", [(16, 16, 1), (15, 4, 3), (2, 4, 1), (16, 1, 16), (8, 0, 8)])
def test_each_run_s_thread_pools_get_its_share_of_the_cores(cores, runs, threads):
    env = sizing_module.thread_pool_env(cores, runs)
    assert env == {name: str(threads) for name in sizing_module.THREAD_POOL_ENV}


@pytest.mark.parametrize("students, threads", [(["a", "b"], "4"), (["alone"], "8")])
def test_checking_runs_at_once_split_the_cores_between_their_thread_pools(tmp_path, monkeypatch, students, threads):
    # 8 cores and --jobs 2: two submissions at once get 4 threads each, one by itself all 8
    _write_suite(tmp_path / "suite")
    for student in students:
        _submission(tmp_path / "subs", student, {"softmax.py": GOOD_SOFTMAX, "matmul.py": GOOD_MATMUL})
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    graded, real_popen = [], subprocess.Popen

    def popen(argv, **options):
        if "--impl" in argv and "--collect-only" not in argv:
            graded.append(dict(options.get("env") or {}))
        return real_popen(argv, **options)

    monkeypatch.setattr(subprocess, "Popen", popen)
    assert _grade(tmp_path / "suite", tmp_path / "subs", tmp_path / "out", jobs=2, split=False) == 0
    assert len(graded) == len(students)
    assert {env[name] for env in graded for name in sizing_module.THREAD_POOL_ENV} == {threads}
