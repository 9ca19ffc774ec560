"""What student code could learn about the hidden tests from where it runs: a worker's environment
(pytest names the running test there) and the checking run's command line (a part names its tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from grader.grade import checking_run
from grader.impl import IsolatedImpl
from grader.worker.modules import resolve

PROBE = textwrap.dedent('''
    import os


    def environment_value(name):
        return os.environ.get(name)


    def exits():
        os._exit(3)
''')


def test_a_worker_started_or_restarted_during_a_test_does_not_see_the_tests_node_id(tmp_path):
    assert "PYTEST_CURRENT_TEST" in os.environ   # pytest names this very test there
    (tmp_path / "accounting.py").write_text(PROBE)
    impl = IsolatedImpl(resolve(str(tmp_path)), call_timeout=120)
    try:
        assert impl.accounting.environment_value("PYTEST_CURRENT_TEST") is None
        try:
            impl.accounting.exits()
        except AssertionError:
            pass                                          # the worker died: the next call starts another
        assert impl.accounting.environment_value("PYTEST_CURRENT_TEST") is None
        assert impl.accounting.environment_value("PATH") == os.environ["PATH"]
    finally:
        impl.close()


SUITE = textwrap.dedent('''
    from pathlib import Path


    def test_chosen():
        command_line = Path("/proc/self/cmdline").read_bytes()
        assert b"test_chosen" not in command_line and b"test_left_out" not in command_line


    def test_left_out():
        raise AssertionError("not selected, so never run")
''')


def test_the_launcher_reads_its_selection_from_a_descriptor_and_no_test_is_on_its_command_line(tmp_path):
    (tmp_path / "test_probe.py").write_text(SUITE)
    fd = checking_run.selection_file([f"{tmp_path / 'test_probe.py'}::test_chosen"])
    try:
        command = [sys.executable, "-c", checking_run.CHECKER_LAUNCHER, "-q", "-p", "no:cacheprovider",
                   checking_run.SELECTION_FLAG, str(fd), "-p", "no:grader"]
        run = subprocess.run(command, cwd=tmp_path, pass_fds=(fd,), capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTEST_ADDOPTS": "", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    finally:
        os.close(fd)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_a_parts_selection_is_not_on_the_checking_runs_command_line(tmp_path):
    from grader.grade.batch import Batch
    from grader.grade.parts import Part

    part = Part("1-softmax", ("tests_hidden/test_x_hidden.py::test_secret_case",))
    batch = Batch.__new__(Batch)
    batch.settings = type("Settings", (), {"perf": False, "selection": (), "suite": "all"})()
    command = Batch.checker_command(batch, tmp_path, 9, part, selection_fd=7)
    assert not any("test_secret_case" in argument for argument in command)
    at = command.index(checking_run.SELECTION_FLAG)
    assert command[at + 1] == "7"
    assert batch.tests_of(part) == ("tests_hidden/test_x_hidden.py::test_secret_case",)
