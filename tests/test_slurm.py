"""`grader grade --slurm` against a real two-node Slurm started on this machine by
scripts/ci/slurm_cluster.sh (needs root; installs Debian's packages when missing). A class of six
submissions of the fake suite: graded through Slurm it gets the grades of a local run, a second run
submits nothing, and a task cancelled mid-run leaves no result and is graded alone by the next run.
Plus the pure pieces (sbatch argv, squeue parsing, chunks) without a cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_suite import GOOD_MATMUL, GOOD_SOFTMAX, make_submission, write_suite

from grader.errors import GraderError
from grader.grade import slurm
from grader.grade.runner import grade_all

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "ci" / "slurm_cluster.sh"
BUDGET = 300.0             # per submission: never reached by one that returns
HANG_BUDGET = 15.0         # the regrade of the hanging submission ends on this budget (status: timeout)
HANG = "def answer():\n    while True:\n        pass\n"


def _squeue(*args) -> list[str]:
    done = subprocess.run(["squeue", "--noheader", "--array", *args], capture_output=True, text=True, timeout=60)
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.skip("needs root: scripts/ci/slurm_cluster.sh starts munged, slurmctld and slurmd")
    started = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=600)
    if started.returncode != 0 and shutil.which("sbatch") is None:
        pytest.skip(f"Slurm's packages could not be installed: {started.stderr.strip()[-300:]}")
    assert started.returncode == 0, started.stderr
    yield
    stopped = subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 0, stopped.stderr


@pytest.fixture(scope="module")
def graded(cluster, tmp_path_factory):
    """The class graded locally on one node, then through Slurm, then through Slurm again."""
    root = tmp_path_factory.mktemp("slurm")
    write_suite(root / "suite")
    subs = root / "subs"
    make_submission(subs, "good", {"softmax.py": GOOD_SOFTMAX, "assignment/matmul.py": GOOD_MATMUL})
    make_submission(subs, "partial", {"softmax.py": GOOD_SOFTMAX.replace("3 * x", "3 + x")})
    make_submission(subs, "wrong", {"softmax.py": "def double(x):\n    return x\n",
                                    "matmul.py": "def answer():\n    return 41\n"})
    make_submission(subs, "softmax_only", {"softmax.py": GOOD_SOFTMAX})
    make_submission(subs, "empty", {"README.md": "I did not finish"})
    with zipfile.ZipFile(subs / "zipped.zip", "w") as archive:
        archive.writestr("zipped/assignment/softmax.py", GOOD_SOFTMAX)
        archive.writestr("zipped/assignment/matmul.py", GOOD_MATMUL)
    options = {"tests_root": root / "suite", "points_dir": root / "suite" / "points", "timeout": BUDGET,
               "quiet": True}
    assert grade_all(subs, out=root / "local", gpus="", jobs=2, **options) == 0
    out = root / "out"
    first = slurm.grade_on_slurm(subs, out=out, poll_s=0.5, **options)
    stamps = _stamps(out)
    plans = sorted((out / slurm.PLAN_DIR).glob("plan-*.json"))
    logs = {p.name: p.read_text() for p in (out / slurm.PLAN_DIR / "logs").iterdir()}
    second = slurm.grade_on_slurm(subs, out=out, poll_s=0.5, **options)
    return SimpleNamespace(root=root, subs=subs, out=out, options=options, first=first, second=second,
                           stamps=stamps, plans=plans, logs=logs)


def _stamps(out: Path) -> dict:
    return {p.parent.name: (json.loads(p.read_text())["graded_at"], p.stat().st_mtime_ns)
            for p in out.glob("*/result.json")}


def test_slurm_run_grades_every_submission_like_a_local_run(graded):
    assert graded.first == 0
    assert sorted(graded.stamps) == ["empty", "good", "partial", "softmax_only", "wrong", "zipped"]
    local = (graded.root / "local" / "grades.csv").read_text()
    assert (graded.out / "grades.csv").read_text() == local
    assert "wrong,graded,0," in local and "empty,not_gradable," in local     # the class is not uniform


def test_tasks_ran_on_both_nodes_one_per_submission(graded):
    assert len(graded.plans) == 1
    chunks = json.loads(graded.plans[0].read_text())["chunks"]
    assert sorted(s for chunk in chunks for s in chunk) == sorted(graded.stamps) and len(chunks) == 6
    logs = " ".join(text for name, text in graded.logs.items() if not name.endswith("-report.log"))
    assert "on node n1" in logs and "on node n2" in logs


def test_only_the_report_job_writes_the_class_files(graded):
    tasks = [text for name, text in graded.logs.items() if not name.endswith("-report.log")]
    report, = [text for name, text in graded.logs.items() if name.endswith("-report.log")]
    assert len(tasks) == 6 and all("graded" in log or "not_gradable" in log for log in tasks)
    assert not any("grades.csv" in log for log in tasks)          # a task would say "wrote .../grades.csv"
    assert "wrote" in report and "grades.csv" in report


def test_second_run_submits_nothing_and_keeps_every_result(graded):
    assert graded.second == 0
    assert sorted((graded.out / slurm.PLAN_DIR).glob("plan-*.json")) == graded.plans
    assert _stamps(graded.out) == graded.stamps


def test_task_cancelled_mid_run_leaves_no_result_and_is_graded_alone_next(graded):
    make_submission(graded.subs, "hang", {"softmax.py": GOOD_SOFTMAX, "matmul.py": HANG})
    outcome = {}
    waiting = threading.Thread(target=lambda: outcome.setdefault(
        "status", slurm.grade_on_slurm(graded.subs, out=graded.out, poll_s=0.5, **graded.options)))
    waiting.start()
    task = None
    deadline = time.monotonic() + 120
    while task is None and time.monotonic() < deadline:
        running = [line.split() for line in _squeue("--name=grader-grade", "--format=%i %T")]
        task = next((job for job, state in running if state == "RUNNING"), None)
        time.sleep(0.5)
    assert task is not None, "the hanging submission's task never started"
    with pytest.raises(GraderError, match="still queued or running"):   # no second copy of that task
        slurm.grade_on_slurm(graded.subs, out=graded.out, **graded.options)
    time.sleep(3)                                      # well into its checking run, which never ends
    subprocess.run(["scancel", task], check=True, timeout=60)
    waiting.join(timeout=120)
    assert outcome.get("status") == 1                  # the wait says a submission got no result
    assert not (graded.out / "hang").exists() or not (graded.out / "hang" / "result.json").exists()
    plans = set((graded.out / slurm.PLAN_DIR).glob("plan-*.json"))

    assert slurm.grade_on_slurm(graded.subs, out=graded.out, poll_s=0.5,
                                **(graded.options | {"timeout": HANG_BUDGET})) == 0
    new_plan, = set((graded.out / slurm.PLAN_DIR).glob("plan-*.json")) - plans
    assert json.loads(new_plan.read_text())["chunks"] == [["hang"]]
    stamps = _stamps(graded.out)
    assert {s: stamps[s] for s in graded.stamps} == graded.stamps        # nobody else regraded
    assert json.loads((graded.out / "hang" / "result.json").read_text())["status"] == "timeout"
    assert "hang,timeout," in (graded.out / "grades.csv").read_text()
    assert not _squeue("--name=grader-grade,grader-report")


# --- pure pieces -------------------------------------------------------------------------------------


def test_tasks_ask_for_one_gpu_only_when_the_ta_did_not_say_and_the_report_job_never(tmp_path):
    array = slurm.array_argv(tmp_path / "t.sh", tmp_path, 3, ["--partition=gpu"], 2, gpu=True)
    assert "--array=0-2%2" in array and "--gres=gpu:1" in array and array[-1] == str(tmp_path / "t.sh")
    report = slurm.report_argv(tmp_path / "r.sh", tmp_path, "17", ["--partition=gpu", "--gres=gpu:h200:1"])
    assert "--dependency=afterany:17" in report and "--partition=gpu" in report
    assert not any(arg.startswith("--gres") for arg in report)

    def scontrol(gres):
        return lambda *a, **k: subprocess.CompletedProcess(a, 0, f"NodeName=n1 Gres={gres} State=IDLE\n", "")

    assert slurm.wants_gpu([], run=scontrol("gpu:2")) is True
    assert slurm.wants_gpu([], run=scontrol("(null)")) is False
    assert slurm.wants_gpu(["--gres=gpu:a100:1"], run=scontrol("gpu:2")) is False


def test_local_sharing_options_are_refused_with_slurm(tmp_path):
    with pytest.raises(GraderError, match="--gpus does not apply with --slurm"):
        slurm.grade_on_slurm(tmp_path, out=tmp_path / "out", gpus="0,1")


def test_split_or_whole_suite_goes_to_every_task_and_is_no_local_option(tmp_path, monkeypatch):
    make_submission(tmp_path / "subs", "alice", {"softmax.py": GOOD_SOFTMAX})
    seen = {}
    monkeypatch.setattr(slurm.shutil, "which", lambda command: f"/usr/bin/{command}")
    monkeypatch.setattr(slurm, "earlier_jobs", lambda folder: [])
    monkeypatch.setattr(slurm, "wants_gpu", lambda args: True)
    monkeypatch.setattr(slurm, "submit", lambda out, options, *rest: seen.update(options) or
                        SimpleNamespace(array_job="1", report_job="2"))
    assert slurm.grade_on_slurm(tmp_path / "subs", out=tmp_path / "out", split=False, no_wait=True,
                                quiet=True) == 0
    assert seen["split"] is False and seen["gpus"] is None


def test_tasks_get_a_time_limit_from_the_budget_unless_the_ta_gave_one():
    assert slurm.time_limit([], 1800.0, 2) == [f"--time={60 + slurm.SETUP_MINUTES}"]
    assert slurm.time_limit(["--time=5:00:00"], 1800.0, 2) == []


def test_only_queued_jobs_writing_into_this_output_folder_block_a_new_run(tmp_path):
    listing = f"7 {tmp_path / 'a' / '.slurm'}\n7 {tmp_path / 'a' / '.slurm'}\n9 {tmp_path / 'b' / '.slurm'}\n"
    squeue = lambda *a, **k: subprocess.CompletedProcess(a, 0, listing, "")  # noqa: E731
    assert slurm.earlier_jobs(tmp_path / "a" / ".slurm", run=squeue) == ["7"]
    assert slurm.earlier_jobs(tmp_path / "c" / ".slurm", run=squeue) == []


def test_queue_listing_maps_array_tasks_and_the_report_job():
    text = "41 0 RUNNING\n41 3 PENDING\n42 N/A PENDING\n"
    assert slurm.parse_queue(text) == {("41", 0): "RUNNING", ("41", 3): "PENDING", ("42", None): "PENDING"}


def test_a_class_larger_than_slurms_array_limit_is_chunked():
    students = [f"s{i:04d}" for i in range(2500)]
    chunks = slurm.split(students, 1000)
    assert len(chunks) <= 1000 and [s for chunk in chunks for s in chunk] == students
    assert slurm.split(["a", "b"], 1000) == [["a"], ["b"]]
    assert slurm.split(["a", "b", "c"], 1000, at_least=2) == [["a", "b"], ["c"]]


def _submitted_plan(tmp_path, monkeypatch, **options) -> dict:
    """grade_on_slurm up to sbatch: {"options": the plan's options, "chunks": its chunks}."""
    seen = {}
    monkeypatch.setattr(slurm.shutil, "which", lambda command: f"/usr/bin/{command}")
    monkeypatch.setattr(slurm, "earlier_jobs", lambda folder: [])
    monkeypatch.setattr(slurm, "wants_gpu", lambda args: True)
    monkeypatch.setattr(slurm, "submit", lambda out, plan_options, chunks, *rest: seen.update(
        options=plan_options, chunks=chunks) or SimpleNamespace(array_job="1", report_job="2"))
    assert slurm.grade_on_slurm(tmp_path / "subs", out=tmp_path / "out", no_wait=True, **options) == 0
    return seen


def test_per_gpu_with_slurm_makes_each_task_grade_that_many_students_at_once(tmp_path, monkeypatch, capsys):
    for student in ("alice", "bob", "carol"):
        make_submission(tmp_path / "subs", student, {"softmax.py": GOOD_SOFTMAX})
    plan = _submitted_plan(tmp_path, monkeypatch, per_gpu=2)
    assert plan["chunks"] == [["alice", "bob"], ["carol"]] and plan["options"]["per_gpu"] == 2
    assert "--cpus-per-task" in capsys.readouterr().err          # the cores their compiles need
    default = _submitted_plan(tmp_path, monkeypatch, quiet=True)
    assert default["chunks"] == [["alice"], ["bob"], ["carol"]] and default["options"]["per_gpu"] == 1
    with pytest.raises(GraderError, match="--per-gpu must be at least 1, got 0"):
        _submitted_plan(tmp_path, monkeypatch, per_gpu=0)


def test_a_task_grades_its_chunk_with_the_plans_per_gpu(monkeypatch):
    from grader.grade import runner as runner_module
    from grader.grade import slurm_task

    seen = {}
    monkeypatch.setattr(runner_module, "grade_all", lambda **options: seen.update(options) or 0)
    monkeypatch.setattr(slurm_task.signal, "signal", lambda *args: None)
    options = {"submissions": "subs", "out": "out", "per_gpu": 3}
    assert slurm_task.run_task({"options": options, "chunks": [["a", "b", "c"]]}, 0) == 0
    assert seen["per_gpu"] == 3 and seen["only"] == ("a", "b", "c") and seen["class_files"] is False
    older_plan = {"options": {"submissions": "subs", "out": "out"}, "chunks": [["a"]]}
    assert slurm_task.run_task(older_plan, 0) == 0 and seen["per_gpu"] == 1


def test_students_graded_several_to_a_task_get_the_grades_of_a_local_run(cluster, tmp_path):
    write_suite(tmp_path / "suite")
    subs = tmp_path / "subs"
    make_submission(subs, "good", {"softmax.py": GOOD_SOFTMAX, "assignment/matmul.py": GOOD_MATMUL})
    make_submission(subs, "partial", {"softmax.py": GOOD_SOFTMAX.replace("3 * x", "3 + x")})
    make_submission(subs, "wrong", {"softmax.py": "def double(x):\n    return x\n"})
    options = {"tests_root": tmp_path / "suite", "points_dir": tmp_path / "suite" / "points", "timeout": BUDGET,
               "quiet": True}
    assert grade_all(subs, out=tmp_path / "local", gpus="", jobs=2, **options) == 0
    assert slurm.grade_on_slurm(subs, out=tmp_path / "out", poll_s=0.5, per_gpu=2, **options) == 0
    plan, = (tmp_path / "out" / slurm.PLAN_DIR).glob("plan-*.json")
    assert json.loads(plan.read_text())["chunks"] == [["good", "partial"], ["wrong"]]
    assert (tmp_path / "out" / "grades.csv").read_text() == (tmp_path / "local" / "grades.csv").read_text()
