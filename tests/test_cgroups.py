"""The checking run's cgroup (grader.grade.cgroups): one memory bound that counts shared and memfd
pages, and a process bound, per run; the fallback and what `grader doctor` says about both.

Files of a fake cgroupfs (plain folders) show what is written where for v1 and v2; the kernel tests
run where this machine lets the grader make a cgroup, and say why they are skipped where it does not.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import results
from grader.grade import cgroups, checking_run, doctor, sizing
from grader.report.model import HARNESS_ERROR

HERE = cgroups.places()
needs_memory_cgroup = pytest.mark.skipif(HERE.memory is None, reason="no memory cgroup can be made here: "
                                         f"{HERE.why_not.get('memory')}")
needs_pids_cgroup = pytest.mark.skipif(HERE.pids is None, reason="no pids cgroup can be made here: "
                                       f"{HERE.why_not.get('pids')}")


def fake_places(tmp_path: Path, version: int) -> cgroups.Places:
    if version == 2:
        parent = tmp_path / "unified"
        parent.mkdir()
        return cgroups.Places(cgroups.Place("memory", 2, parent), cgroups.Place("pids", 2, parent), {})
    (tmp_path / "memory").mkdir()
    (tmp_path / "pids").mkdir()
    return cgroups.Places(cgroups.Place("memory", 1, tmp_path / "memory"),
                          cgroups.Place("pids", 1, tmp_path / "pids"), {})


def test_on_v2_a_run_gets_memory_max_without_swap_a_group_oom_kill_and_pids_max(tmp_path):
    run = cgroups.RunCgroup(fake_places(tmp_path, 2), 3 << 30, 2048, "alice")
    run.create()
    assert run.folders == [run.memory] == [run.pids]
    files = {name: (run.memory / name).read_text() for name in
             ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max")}
    assert files == {"memory.max": str(3 << 30), "memory.swap.max": "0", "memory.oom.group": "1",
                     "pids.max": "2048"}


def test_on_v1_a_run_gets_a_cgroup_in_each_hierarchy(tmp_path):
    run = cgroups.RunCgroup(fake_places(tmp_path, 1), 1 << 30, 64, "bob")
    run.create()
    assert run.memory.parent == tmp_path / "memory" and run.pids.parent == tmp_path / "pids"
    assert (run.memory / "memory.limit_in_bytes").read_text() == str(1 << 30)
    assert (run.memory / "memory.memsw.limit_in_bytes").read_text() == str(1 << 30)
    assert (run.pids / "pids.max").read_text() == "64"


def test_the_launch_joins_every_cgroup_before_it_execs(tmp_path):
    run = cgroups.RunCgroup(fake_places(tmp_path, 1), 1 << 30, 64, "carol")
    run.create()
    done = subprocess.run(run.join_prefix() + [sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = done.stdout.strip()                   # exec kept the shell's pid: the command is what joined
    assert (run.memory / "cgroup.procs").read_text().strip() == pid == (run.pids / "cgroup.procs").read_text().strip()


def test_a_students_folder_name_makes_a_plain_cgroup_name(tmp_path):
    run = cgroups.RunCgroup(fake_places(tmp_path, 2), 1 << 30, 64, "../o'brien $(id) " + "x" * 300)
    assert run.name.startswith("grader-run-_o_brien___id__xxx") and len(run.name) < 80
    run.create()
    assert run.memory.parent == tmp_path / "unified"


def test_a_launch_that_cannot_join_never_runs(tmp_path):
    run = cgroups.RunCgroup(fake_places(tmp_path, 2), 1 << 30, 64, "dave")     # never created
    done = subprocess.run(run.join_prefix() + ["echo", "ran"], capture_output=True, text=True)
    assert done.returncode != 0 and "ran" not in done.stdout


def test_an_oom_kill_is_read_from_memory_events_on_v2_and_oom_control_on_v1(tmp_path):
    for version, name, text in ((2, "memory.events", "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 1\n"),
                                (1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")):
        folder = tmp_path / str(version)
        folder.mkdir()
        run = cgroups.RunCgroup(fake_places(folder, version), 1 << 30, 64, "erin")
        run.create()
        assert not run.oom_killed()
        (run.memory / name).write_text(text)
        assert run.oom_killed()


def test_places_come_from_the_processes_own_cgroup_in_each_mounted_hierarchy(tmp_path):
    proc, fs = tmp_path / "proc", tmp_path / "fs"
    proc.mkdir()
    for folder in ("memory/run", "pids", "unified/job"):     # the memory mount shows /job
        (fs / folder).mkdir(parents=True)
    (fs / "unified/job/cgroup.controllers").write_text("hugetlb\n")     # v2 here lacks memory and pids
    (proc / "mountinfo").write_text(
        f"30 25 0:26 / {fs}/unified rw - cgroup2 cgroup2 rw\n"
        f"31 25 0:27 /job {fs}/memory rw - cgroup cgroup rw,memory\n"
        f"32 25 0:28 / {fs}/pids rw - cgroup cgroup rw,pids\n"
        "33 25 0:29 / /proc rw - proc proc rw\n")
    (proc / "cgroup").write_text("8:pids:/\n4:memory:/job/run\n0::/job\n")
    found = cgroups.candidates(str(proc))
    assert found == {"memory": [cgroups.Place("memory", 1, fs / "memory" / "run")],
                     "pids": [cgroups.Place("pids", 1, fs / "pids")]}
    (fs / "unified/job/cgroup.controllers").write_text("cpu memory pids\n")
    found = cgroups.candidates(str(proc))
    assert found["memory"][0] == cgroups.Place("memory", 2, fs / "unified/job")    # v2 first
    assert found["pids"][0] == cgroups.Place("pids", 2, fs / "unified/job")


def test_without_a_place_no_cgroup_is_made_and_the_fallback_is_said():
    assert cgroups.for_run(cgroups.Places(None, None, {}), 1 << 30, 64, "frank") is None
    where = cgroups.Places(None, None, {"memory": "cgroup v2 at /sys/fs/cgroup: Device or resource busy",
                                        "pids": "no cgroup hierarchy with this controller is mounted"})
    lines = {finding.name: finding for finding in doctor.run_bounds(where, parallel=1, nproc_holds=False)}
    assert lines["memory"].detail.startswith("RLIMIT_DATA only (the worker's private memory); shared "
                                             "anonymous and memfd pages are unbounded")
    assert "Device or resource busy" in lines["memory"].detail and "Delegate=yes" in lines["memory"].fix
    assert "the kernel exempts root's processes" in lines["processes"].detail and lines["processes"].fix
    assert not any(finding.blocking for finding in lines.values())


def test_doctor_names_the_cgroup_bound_where_one_holds(tmp_path):
    lines = {finding.name: finding for finding in doctor.run_bounds(fake_places(tmp_path, 2), parallel=1)}
    assert lines["memory"].detail.startswith("cgroup v2 memory.max per checking run")
    assert "memory.oom.group" in lines["memory"].detail and not lines["memory"].fix
    assert lines["processes"].detail == f"cgroup v2 pids.max {sizing.RUN_PIDS_MAX} per checking run"


def test_the_run_bound_is_the_worker_cap_plus_the_checkers_share():
    assert sizing.run_memory_bytes(1024) == (1024 + sizing.CHECKER_MEMORY_MB) << 20
    assert sizing.run_memory_bytes(0) is None          # --worker-memory 0: no cap, no bound


def header_stream() -> str:
    return results.header_line("impl", "cpu", {}, ["softmax.triton"]) + "\n"


def test_a_run_over_its_bound_after_student_code_started_is_the_students_memory_failure():
    status, reason = checking_run.over_memory(3 << 30, results.read_stream(header_stream()))
    assert status == "crashed"
    assert reason.startswith("the checking run used more than 3072 MiB of memory (private, shared and memfd")


def test_a_run_over_its_bound_before_any_student_code_is_a_harness_error():
    status, reason = checking_run.over_memory(3 << 30, results.read_stream(""))
    assert status == HARNESS_ERROR and "raise --worker-memory" in reason


def hold_memfd(megabytes: int) -> str:
    """A child that writes its results header, then fills a memfd it never maps: no rlimit counts it."""
    return ("import os, sys\n"
            f"os.write(int(sys.argv[1]), {header_stream()!r}.encode())\n"
            "fd = os.memfd_create('hold')\n"
            f"for i in range({megabytes}):\n    os.pwrite(fd, b'1' * (1 << 20), i << 20)\n"
            "print('held everything', flush=True)\n")


def watch_in(run: cgroups.RunCgroup, code: str) -> checking_run.Outcome:
    read_end, write_end = os.pipe()
    argv = run.join_prefix() + [sys.executable, "-c", code, str(write_end)]
    return checking_run.watch(argv, env=dict(os.environ), cwd="/", results_fd=(read_end, write_end), timeout=120,
                              cgroup=run)


@needs_memory_cgroup
def test_memfd_pages_beyond_the_bound_end_the_whole_run_as_the_students_memory_failure():
    run = cgroups.for_run(HERE, 128 << 20, 64, "memfd-test")
    try:
        outcome = watch_in(run, hold_memfd(256))
        assert run.oom_killed()
    finally:
        run.remove()
    assert "held everything" not in outcome.log
    assert outcome.status == "crashed" and "more than 128 MiB of memory" in outcome.reason
    assert "[grader] checking run's cgroup: memory peak" in outcome.log
    assert all(not folder.exists() for folder in run.folders)


@needs_memory_cgroup
def test_a_run_within_its_bound_is_graded_as_usual():
    run = cgroups.for_run(HERE, 512 << 20, 64, "within-test")
    try:
        outcome = watch_in(run, hold_memfd(32))
    finally:
        run.remove()
    assert "held everything" in outcome.log and not run.oom_killed()


@needs_pids_cgroup
def test_a_fork_bomb_stops_at_the_runs_pids_max():
    code = ("import os, sys, time\nstarted = 0\n"
            "try:\n    for _ in range(200):\n        if os.fork() == 0:\n            time.sleep(30)\n"
            "            os._exit(0)\n        started += 1\nexcept OSError:\n    pass\n"
            "print('started', started, flush=True)\n")
    run = cgroups.for_run(HERE, None, 20, "fork-test")
    try:
        outcome = watch_in(run, code)
        refused = run.forks_refused()
    finally:
        run.remove()
    assert "started 19" in outcome.log and refused >= 1      # 20 tasks: the shell-turned-python and 19 more
    assert "forks refused at the bound" in outcome.log
    assert all(not folder.exists() for folder in run.folders)  # the sleeping children were killed with it



def busy_while_populated(monkeypatch, parent: Path) -> None:
    """A fake kernel rule: no controller for the children of a cgroup that holds processes."""
    real = Path.write_text

    def write_text(path, text, *args, **kwargs):
        if path.name == "cgroup.subtree_control" and (parent / "cgroup.procs").read_text().split():
            raise OSError(errno.EBUSY, "Device or resource busy")
        if path.name == "cgroup.procs" and path.parent != parent:      # a move out of the parent
            real(parent / "cgroup.procs", (parent / "cgroup.procs").read_text().replace(text, "").strip())
        return real(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


def test_a_runner_alone_in_its_v2_cgroup_moves_into_a_leaf_to_enable_the_controller(tmp_path, monkeypatch):
    parent = tmp_path / "grading.scope"
    parent.mkdir()
    (parent / "cgroup.procs").write_text(str(os.getpid()))
    busy_while_populated(monkeypatch, parent)
    cgroups._enable(cgroups.Place("memory", 2, parent))
    assert (parent / "grader-run-runner" / "cgroup.procs").read_text() == str(os.getpid())
    assert (parent / "cgroup.subtree_control").read_text() == "+memory"


def test_other_processes_in_the_runners_v2_cgroup_are_never_moved(tmp_path, monkeypatch):
    parent = tmp_path / "container"
    parent.mkdir()
    (parent / "cgroup.procs").write_text(f"1\n{os.getpid()}")
    busy_while_populated(monkeypatch, parent)
    with pytest.raises(OSError) as refused:
        cgroups._enable(cgroups.Place("pids", 2, parent))
    assert refused.value.errno == errno.EBUSY and not (parent / "grader-run-runner").exists()


def test_without_a_pids_cgroup_a_sandboxed_grader_that_is_not_root_bounds_tasks_with_rlimit_nproc():
    where = cgroups.Places(None, None, {"pids": "no cgroup hierarchy with this controller is mounted"})
    lines = {finding.name: finding for finding in doctor.run_bounds(where, parallel=1, nproc_holds=True)}
    assert lines["processes"].detail.startswith(f"RLIMIT_NPROC {sizing.RUN_PIDS_MAX} per checking run")
    assert not lines["processes"].fix


BWRAP, SETPRIV = shutil.which("bwrap"), shutil.which("setpriv")
SYSTEM_PYTHON = "/usr/bin/python3"          # this interpreter may sit where uid 65534 cannot read (/root)


@pytest.mark.skipif(not (BWRAP and SETPRIV and os.geteuid() == 0 and os.path.exists(SYSTEM_PYTHON)),
                    reason="needs bubblewrap, /usr/bin/python3, and setpriv as root to start the sandbox as an "
                    "unprivileged user the way a non-root grader does")
def test_the_checkers_task_limit_bounds_a_sandbox_started_by_a_user_that_is_not_root():
    forks = ("import os, time\nstarted = 0\ntry:\n    for _ in range(50):\n        if os.fork() == 0:\n"
             "            time.sleep(2)\n            os._exit(0)\n        started += 1\nexcept OSError:\n    pass\n"
             "print('started', started)\n")
    argv = [SETPRIV, "--reuid", "65534", "--regid", "65534", "--clear-groups", BWRAP, "--unshare-user",
            "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--",
            SYSTEM_PYTHON, "-c", checking_run.LIMIT_TASKS + forks]
    done = subprocess.run(argv, env={**os.environ, checking_run.TASKS_ENV: "10"}, capture_output=True, text=True,
                          timeout=60)
    started = int(done.stdout.split()[-1])
    assert started < 10, done.stdout + done.stderr     # the run's own tasks only: not every nobody's on the host
