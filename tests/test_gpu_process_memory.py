"""scripts/measure/gpu_process_memory.py: which processes hold the GPU's memory during a class proof."""
import importlib.util
import sys
import types
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "measure" / "gpu_process_memory.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("gpu_process_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_sample_names_each_process_by_its_kind(tool):
    held = {101: 3060 * 2**20, 202: 912 * 2**20, 303: 40 * 2**20, 404: None}   # 404: the driver does not say
    kinds = {"101": "checking_run", "202": "worker", "303": "other", "404": "other"}
    lines = tool.sample_lines(types.SimpleNamespace(usage=lambda: held), kind_of=kinds.get, now=lambda: 1000.0)
    assert lines == ["t 1000", "3060 checking_run", "912 worker", "40 other"]


def test_the_summary_gives_each_kinds_median_and_largest_and_the_peak_over_all(tool):
    log = "t 1\n3072 checking_run\n1024 worker\nt 4\n5120 checking_run\n2048 worker\n1024 checking_run\n"
    lines = tool.summary(tool.read_samples(log))
    assert lines[0].startswith("checking_run") and "median   3.0 GiB" in lines[0] and "largest   5.0 GiB" in lines[0]
    assert lines[1].startswith("worker") and "median   1.5 GiB" in lines[1] and "largest   2.0 GiB" in lines[1]
    assert lines[2] == "all processes at most 8.0 GiB"


def test_the_command_line_of_a_checking_run_and_a_worker_tell_them_apart(tool, tmp_path):
    from grader.grade.checking_run import CHECKER_LAUNCHER
    from grader.worker.process import launch_argv

    commands = {"11": "\0".join([sys.executable, "-c", CHECKER_LAUNCHER, "-p", "grader.plugin"]).encode(),
                "12": "\0".join(launch_argv(3, 4, 5)).encode()}
    for pid, command in commands.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(command)
    assert [tool.process_kind(pid, proc=tmp_path) for pid in ("11", "12", "13")] == ["checking_run", "worker", "gone"]


def test_a_summary_of_no_samples_says_so(tool, tmp_path, capsys):
    assert tool.main(["summary", str(tmp_path / "missing.log")]) == 0
    assert "no GPU process samples" in capsys.readouterr().out


def test_sampling_into_a_log_a_previous_batch_wrote_starts_it_afresh(tool, tmp_path, monkeypatch):
    log = tmp_path / "honest-gpu-processes.log"
    log.write_text("t 1\n72000 checking_run\n")      # a previous batch's peak, same step, same machine
    samples = iter([["t 9", "2048 worker"]])

    def one_sample_then_no_driver(gpu):
        try:
            return next(samples)
        except StopIteration:
            raise tool.nvml.NvmlError("the driver went away") from None

    library = types.SimpleNamespace(device_by_index=lambda index: index)
    monkeypatch.setattr(tool.nvml, "library", lambda: library)
    monkeypatch.setattr(tool.nvml, "GpuProcesses", lambda *args: object())
    monkeypatch.setattr(tool, "sample_lines", one_sample_then_no_driver)
    monkeypatch.setattr(tool.time, "sleep", lambda seconds: None)
    assert tool.main(["sample", str(log)]) == 1
    assert tool.summary(tool.read_samples(log.read_text()))[-1] == "all processes at most 2.0 GiB"
