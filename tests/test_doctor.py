"""`grader doctor` says what grading would use here and gives a fix for each problem it finds."""

import sys

import torch
from click.testing import CliRunner

from grader.cli import main
from grader.grade import doctor, sandbox


def test_doctor_prints_interpreter_packages_device_sandbox_chromium_and_memory_cap():
    result = CliRunner().invoke(main, ["doctor"])
    text = result.output
    assert sys.executable in text and f"torch: {torch.__version__}" in text
    for name in ("triton:", "numpy:", "device:", "bubblewrap:", "chromium:", "worker memory cap:", "timing cores:"):
        assert name in text, name
    assert ("GPU(s):" in text) == torch.cuda.is_available() and ("CPU mode" in text) != torch.cuda.is_available()
    if sandbox.find_bwrap():
        assert "imports grader and torch inside bubblewrap" in text, text
    assert result.exit_code == 0, text


def test_a_sandbox_that_cannot_start_the_interpreter_is_a_blocking_problem_with_a_fix(tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: execvp /tmp/x/venv/bin/python: No such file or directory' >&2\nexit 1\n")
    fake.chmod(0o755)
    found = doctor.bubblewrap(str(fake))[-1]
    assert found.blocking and "No such file or directory" in found.detail
    assert "--no-sandbox" in found.fix and found.line.startswith("PROBLEM")


def test_a_missing_package_says_how_to_install_it():
    found = doctor.package("grader_doctor_no_such_package")
    assert found.blocking and "make install" in found.fix and "not importable" in found.detail


def test_no_bubblewrap_is_reported_with_the_install_command(monkeypatch):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    (found,) = doctor.bubblewrap()
    assert "WITHOUT a sandbox" in found.detail and "apt-get install -y bubblewrap" in found.fix


def test_doctor_exits_nonzero_when_a_problem_stops_grading(monkeypatch):
    monkeypatch.setattr(doctor, "findings", lambda: [doctor.Finding("torch", "missing", "make install", True)])
    lines = []
    assert doctor.run_doctor(lines.append) == 1 and "stop grading" in lines[-1]


def test_timing_cores_are_named_per_gpu_and_too_few_cores_get_a_fix():
    found = doctor.timing_cores(gpus=["0", "1"], cores=list(range(16)))
    assert not found.fix and "GPU 0: core 0" in found.detail and "GPU 1: core 1" in found.detail
    assert "other 14" in found.detail
    few = doctor.timing_cores(gpus=["0"], cores=[0, 1])
    assert "too few" in few.detail and "at least 3 cores" in few.fix and not few.blocking
    assert "no GPU" in doctor.timing_cores(gpus=[], cores=[0, 1]).detail
