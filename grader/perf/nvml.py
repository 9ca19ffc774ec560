"""What the NVIDIA driver says each process holds on one GPU, read through NVML with ctypes.

The checker reads it (grader.perf.worker_memory): the figure comes from the kernel driver, so nothing
that runs in the worker can change it. No pip dependency: `libnvidia-ml.so.1` ships with the driver.

`GpuProcesses.usage()` maps every pid NVML lists on the GPU (compute and graphics clients) to the bytes
of device memory it holds there, or None where the driver does not say (`NVML_VALUE_NOT_AVAILABLE`:
under MIG without the privilege to see it, for one). The pids are the driver's: older drivers give a
caller inside a pid namespace (the sandbox) the host's pids, newer ones translate them to the caller's
namespace and leave out what it cannot see. grader.perf.worker_memory handles both.
"""

from __future__ import annotations

import ctypes
import threading

LIBRARY = "libnvidia-ml.so.1"
SUCCESS = 0
NOT_SUPPORTED = 3
NOT_FOUND = 6
INSUFFICIENT_SIZE = 7
FUNCTION_NOT_FOUND = 13
NOT_AVAILABLE = 2**64 - 1         # NVML_VALUE_NOT_AVAILABLE in usedGpuMemory
UUID_BUFFER = 96                  # NVML_DEVICE_UUID_V2_BUFFER_SIZE
SLACK = 8                         # room for processes that start between asking the count and the list
# Each list: the newest entry point first, then the one drivers before R510 export. Both fill
# nvmlProcessInfo_t as below. The compute list is required; the graphics list is read where it exists.
PROCESS_LISTS = (
    ("compute", ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")),
    ("graphics", ("nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2")),
)


class NvmlError(RuntimeError):
    """An NVML call failed; `code` is NVML's return value (None when no call was made)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class NvmlUnavailable(NvmlError):
    """NVML cannot answer here: no library, no driver, or no GPU that matches the CUDA device."""


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t (= nvmlProcessInfo_v2_t), what the _v2 and _v3 process lists fill."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    """The library, initialised once (nvmlInit_v2). `library` is for tests: any object whose attributes
    behave like the ctypes functions."""

    def __init__(self, library=None):
        if library is None:
            try:
                library = ctypes.CDLL(LIBRARY)
            except OSError as error:
                raise NvmlUnavailable(f"{LIBRARY} cannot be loaded ({error}): no NVIDIA driver here") from None
        self._lib = library
        init = self._function("nvmlInit_v2", [])
        if init is None:
            raise NvmlUnavailable(f"{LIBRARY} has no nvmlInit_v2: the driver is too old")
        self._check(init(), "nvmlInit_v2", unavailable=True)

    def _function(self, name: str, argtypes: list):
        """The library's function `name` with its C signature, or None where this driver lacks it."""
        try:
            function = getattr(self._lib, name)
        except AttributeError:
            return None
        function.argtypes, function.restype = argtypes, ctypes.c_int
        return function

    def error_text(self, code: int) -> str:
        describe = getattr(self._lib, "nvmlErrorString", None)
        try:
            describe.restype = ctypes.c_char_p
            return describe(code).decode("ascii", "replace")
        except Exception:  # noqa: BLE001 - only the message suffers
            return f"NVML error {code}"

    def _check(self, code: int, call: str, unavailable: bool = False) -> None:
        if code != SUCCESS:
            kind = NvmlUnavailable if unavailable else NvmlError
            raise kind(f"{call} failed: {self.error_text(code)}", code)

    def device_count(self) -> int:
        count = ctypes.c_uint(0)
        self._check(self._function("nvmlDeviceGetCount_v2", [ctypes.POINTER(ctypes.c_uint)])(
            ctypes.byref(count)), "nvmlDeviceGetCount_v2", unavailable=True)
        return count.value

    def device_by_index(self, index: int) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        function = self._function("nvmlDeviceGetHandleByIndex_v2", [ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)])
        self._check(function(index, ctypes.byref(handle)), "nvmlDeviceGetHandleByIndex_v2", unavailable=True)
        return handle

    def device_by_uuid(self, uuid: str) -> ctypes.c_void_p:
        """The GPU (or MIG device) whose UUID is `uuid`, with or without its `GPU-`/`MIG-` prefix."""
        function = self._function("nvmlDeviceGetHandleByUUID", [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)])
        bare = uuid.split("-", 1)[1] if uuid.startswith(("GPU-", "MIG-")) else uuid
        code = NOT_FOUND
        for candidate in dict.fromkeys((uuid, f"GPU-{bare}", f"MIG-{bare}")):
            handle = ctypes.c_void_p()
            code = function(candidate.encode("ascii"), ctypes.byref(handle))
            if code == SUCCESS:
                return handle
        raise NvmlUnavailable(f"NVML knows no GPU with UUID {uuid} ({self.error_text(code)})", code)

    def uuid_of(self, handle) -> str:
        buffer = ctypes.create_string_buffer(UUID_BUFFER)
        function = self._function("nvmlDeviceGetUUID", [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint])
        self._check(function(handle, buffer, UUID_BUFFER), "nvmlDeviceGetUUID")
        return buffer.value.decode("ascii", "replace")

    def process_lists(self) -> list[tuple[str, object]]:
        """(name, function) of each process list this driver has; the compute list must be there."""
        found = []
        for kind, names in PROCESS_LISTS:
            function = next((f for f in (self._function(name, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint),
                                                                  ctypes.POINTER(ProcessInfo)])
                                         for name in names) if f is not None), None)
            if function is not None:
                found.append((kind, function))
            elif kind == "compute":
                raise NvmlUnavailable(f"{LIBRARY} lists no compute processes (no {' or '.join(names)})")
        return found


class GpuProcesses:
    """Per-process device memory on one GPU. Safe to call from a sampling thread."""

    def __init__(self, nvml: Nvml, handle, label: str = ""):
        self._nvml, self._handle, self.label = nvml, handle, label
        self._lists = nvml.process_lists()
        self._room = {kind: 16 for kind, _ in self._lists}   # entries to offer: grows with what was seen
        self._lock = threading.Lock()

    def usage(self) -> dict[int, int | None]:
        """pid -> bytes held on this GPU (None: the driver does not say), over every list."""
        with self._lock:
            found: dict[int, int | None] = {}
            for kind, function in self._lists:
                entries = self._entries(kind, function)
                if entries is None:
                    continue
                for entry in entries:
                    used = None if entry.usedGpuMemory == NOT_AVAILABLE else int(entry.usedGpuMemory)
                    seen = found.get(entry.pid, 0)
                    # a process in both lists: each reports its whole footprint, so take it once
                    found[entry.pid] = None if used is None or seen is None else max(seen, used)
            return found

    def _entries(self, kind: str, function):
        """One list's entries (None when this driver does not support that list on this GPU)."""
        for _ in range(4):
            room = self._room[kind]
            infos, count = (ProcessInfo * room)(), ctypes.c_uint(room)
            code = function(self._handle, ctypes.byref(count), infos)
            if code == SUCCESS:
                return infos[:count.value]
            if code == INSUFFICIENT_SIZE:
                self._room[kind] = max(room * 2, count.value + SLACK)
                continue
            if kind != "compute" and code in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
                return None
            raise NvmlError(f"listing {kind} processes failed: {self._nvml.error_text(code)}", code)
        raise NvmlError(f"the {kind} process list kept growing while it was read")


_shared: Nvml | None = None
_shared_lock = threading.Lock()


def library() -> Nvml:
    """This process's NVML, initialised on first use (NvmlUnavailable where it cannot be)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Nvml()
        return _shared


def open_gpu(uuid: str | None, nvml: Nvml | None = None) -> GpuProcesses:
    """The GPU with this UUID (a CUDA device's), or the only GPU when no UUID is known."""
    nvml = nvml or library()
    if uuid:
        handle = nvml.device_by_uuid(uuid)
    elif nvml.device_count() == 1:
        handle = nvml.device_by_index(0)
    else:
        raise NvmlUnavailable("the CUDA device's UUID is unknown and NVML sees several GPUs: which one is "
                              "the worker's cannot be told")
    return GpuProcesses(nvml, handle, nvml.uuid_of(handle))
