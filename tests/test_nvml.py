"""NVML read through ctypes (grader.perf.nvml): per-process device memory as the driver reports it, with
a fake library shaped like libnvidia-ml on the CPU."""

from __future__ import annotations

import ctypes
import types

import pytest

from grader.perf import nvml, worker_memory
from grader.perf.worker_memory import MemoryUnavailable

MIB = 2**20


def fake_library(processes, v3=True, uuids=("GPU-1111",), init=nvml.SUCCESS):
    """Functions shaped like libnvidia-ml's: they fill what ctypes.byref and the ProcessInfo array point to."""
    def processes_list(handle, count_ref, infos):
        count = count_ref._obj
        if count.value < len(processes):
            count.value = len(processes)
            return nvml.INSUFFICIENT_SIZE
        for slot, (pid, used) in zip(infos, processes):
            slot.pid, slot.usedGpuMemory = pid, used
        count.value = len(processes)
        return nvml.SUCCESS

    def by_uuid(uuid, handle_ref):
        if uuid.decode() not in uuids:
            return nvml.NOT_FOUND
        handle_ref._obj.value = 1 + uuids.index(uuid.decode())
        return nvml.SUCCESS

    def uuid_of(handle, buffer, size):
        buffer.value = uuids[handle.value - 1].encode()
        return nvml.SUCCESS

    functions = {"nvmlInit_v2": lambda: init, "nvmlDeviceGetHandleByUUID": by_uuid, "nvmlDeviceGetUUID": uuid_of,
                 "nvmlErrorString": lambda code: b"Driver Not Loaded" if code == 9 else b"Unknown Error",
                 "nvmlDeviceGetComputeRunningProcesses_v2": processes_list}
    if v3:
        functions["nvmlDeviceGetComputeRunningProcesses_v3"] = processes_list
    return types.SimpleNamespace(**{name: _plain(function) for name, function in functions.items()})


def _plain(function):
    """A function object of its own (ctypes' argtypes and restype are set on it)."""
    return lambda *args: function(*args)


def test_nvml_lists_per_process_memory_and_retries_a_list_that_outgrew_its_buffer():
    processes = [(1000 + i, i * MIB) for i in range(40)] + [(9, nvml.NOT_AVAILABLE)]
    gpu = nvml.open_gpu("1111", nvml.Nvml(fake_library(processes)))      # torch's UUID has no "GPU-"
    usage = gpu.usage()
    assert gpu.label == "GPU-1111"
    assert usage[1039] == 39 * MIB and usage[9] is None and len(usage) == 41


def test_nvml_falls_back_to_the_v2_process_list_on_an_older_driver():
    gpu = nvml.open_gpu("GPU-1111", nvml.Nvml(fake_library([(42, 3 * MIB)], v3=False)))
    assert gpu.usage() == {42: 3 * MIB}


def test_nvml_that_cannot_start_or_find_the_gpu_is_unavailable():
    with pytest.raises(nvml.NvmlUnavailable, match="Driver Not Loaded"):
        nvml.Nvml(fake_library([], init=9))
    with pytest.raises(nvml.NvmlUnavailable, match="no GPU with UUID GPU-2222"):
        nvml.open_gpu("GPU-2222", nvml.Nvml(fake_library([])))


def _has_nvml() -> bool:
    try:
        ctypes.CDLL(nvml.LIBRARY)
    except OSError:
        return False
    return True


@pytest.mark.skipif(_has_nvml(), reason="this machine has an NVIDIA driver")
def test_a_machine_without_a_driver_says_the_figure_is_unavailable():
    with pytest.raises(nvml.NvmlUnavailable, match="cannot be loaded"):
        nvml.Nvml()
    with pytest.raises(MemoryUnavailable):
        worker_memory.open_reader()
