"""The environment a grade was measured in, and whether it is fit to grade on.

`fingerprint()` is written into every report and `grader bench` output: GPU name and count, driver,
CUDA, torch, Triton and cuDNN versions, SM/memory clocks before and after the measurements, the
measured device-to-device copy bandwidth and bf16 8192^3 matmul throughput, and other processes on the
GPU. `retry_reasons()` compares one measurement per process with the GPU model's norm
(perf-anchors 9.1 item 6): a slow or shared GPU makes a run to retry, never a low grade.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys

COPY_BYTES = 1 << 30                  # 1 GiB fp32 source: far beyond L2, so HBM is what gets measured
MATMUL_N = 8192                       # bf16 8192^3, random data (zeros run ~10% faster: perf-anchors 5.3)
MEASURE_REP_MS = 100

# Per GPU model (matched as a substring of the name): below these a run is retried, not graded.
# H200: perf-anchors 9.1 item 6 (copy 4.22-4.26 TB/s and matmul 640-798 TFLOP/s measured). H100 SXM:
# the same compute; bandwidth scaled by the spec ratio 3.35/4.8 from the H200 floor.
NORMS = {
    "H200": {"copy_gbs": 3800.0, "matmul_tflops": 600.0},
    "H100 80GB HBM3": {"copy_gbs": 2650.0, "matmul_tflops": 600.0},
}


def fingerprint(measure: bool = True) -> dict:
    """Everything a grade depends on besides the code; `measure` adds copy and matmul throughput."""
    info = {
        "python": platform.python_version(),
        "torch": _version("torch"),
        "triton": _version("triton"),
        "cuda": None, "cudnn": None, "gpu_name": None, "gpu_count": 0, "driver": None,
        "clocks_before": None, "clocks_after": None, "copy_gbs": None, "matmul_tflops": None,
        "other_gpu_processes": [],
    }
    try:
        import torch
    except ImportError:
        return info
    info["cuda"] = torch.version.cuda
    info["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if not torch.cuda.is_available():
        return info
    info["gpu_name"] = torch.cuda.get_device_name()
    info["gpu_count"] = torch.cuda.device_count()
    uuid = info["gpu_uuid"] = _gpu_uuid(torch)
    smi = query_gpu(uuid)
    info["driver"] = smi.get("driver")
    info["clocks_before"] = smi.get("clocks")
    if measure:
        info["copy_gbs"] = round(measure_copy_gbs(), 1)
        info["matmul_tflops"] = round(measure_matmul_tflops(), 1)
        info["clocks_after"] = query_gpu(uuid).get("clocks")
    info["other_gpu_processes"] = other_gpu_processes(uuid)
    info["calibration"] = calibration_match(info["gpu_name"])
    return info


def problems(info: dict) -> list[str]:
    """Why the measured environment is not fit to grade on (empty when it is, or when no norm is known)."""
    reasons = []
    norm = norm_for(info.get("gpu_name"))
    if norm and info.get("copy_gbs") is not None and info["copy_gbs"] < norm["copy_gbs"]:
        reasons.append(f"copy bandwidth {info['copy_gbs']:.0f} GB/s is below this GPU's norm "
                       f"({norm['copy_gbs']:.0f} GB/s)")
    if norm and info.get("matmul_tflops") is not None and info["matmul_tflops"] < norm["matmul_tflops"]:
        reasons.append(f"bf16 {MATMUL_N}^3 matmul at {info['matmul_tflops']:.0f} TFLOP/s is below this "
                       f"GPU's norm ({norm['matmul_tflops']:.0f} TFLOP/s)")
    if info.get("other_gpu_processes"):
        pids = ", ".join(str(pid) for pid in info["other_gpu_processes"])
        reasons.append(f"other processes are using the GPU (pids {pids})")
    return reasons


@functools.lru_cache(maxsize=1)
def session_fingerprint() -> dict:
    """One measured fingerprint per process (the measurements take about a second)."""
    return fingerprint(measure=True)


def retry_reasons() -> list[str]:
    """Reasons to retry rather than grade: the session's measurements, plus a fresh process check.

    While this run holds its GPU's lock exclusively (several submissions share the GPU), the other
    submissions' processes are there by design and are not running kernels: they are not a reason."""
    from grader.perf import gpu_lock

    info = dict(session_fingerprint())
    sharing = gpu_lock.current().held_exclusively
    info["other_gpu_processes"] = [] if sharing else other_gpu_processes(_gpu_uuid_or_none())
    return problems(info)


def norm_for(gpu_name: str | None) -> dict | None:
    for model, norm in NORMS.items():
        if gpu_name and model in gpu_name:
            return norm
    return None


def calibration_match(gpu_name: str | None, calibration: dict | None = None) -> dict:
    """Which calibrated model's ladders apply to `gpu_name`, and the warning a report shows if not exact."""
    from grader.points import calibrated_gpu, load_calibration

    calibration = load_calibration() if calibration is None else calibration
    model = calibrated_gpu(calibration, gpu_name)
    if model is None:
        warning = f"no calibrated ladders: the default ladders apply on {gpu_name or 'this machine'}"
    elif model != gpu_name:
        warning = f"ladders were calibrated on {model!r}, not on this GPU ({gpu_name!r})"
    else:
        warning = None
    return {"model": model, "exact": model is not None and model == gpu_name, "warning": warning}


# --- measurements --------------------------------------------------------------------------------------


def measure_copy_gbs(n_bytes: int = COPY_BYTES) -> float:
    """Device-to-device copy bandwidth in GB/s, counting the read and the write."""
    import torch
    from triton.testing import do_bench

    source = torch.randn(n_bytes // 4, device="cuda")
    target = torch.empty_like(source)
    milliseconds = do_bench(lambda: target.copy_(source), rep=MEASURE_REP_MS, return_mode="median")
    return 2 * n_bytes / (milliseconds * 1e-3) / 1e9


def measure_matmul_tflops(n: int = MATMUL_N) -> float:
    """torch.matmul (cuBLAS) throughput on random bf16 n x n x n, in TFLOP/s."""
    import torch
    from triton.testing import do_bench

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=generator)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=generator)
    milliseconds = do_bench(lambda: torch.matmul(a, b), rep=MEASURE_REP_MS, return_mode="median")
    return 2 * n ** 3 / (milliseconds * 1e-3) / 1e12


# --- nvidia-smi ------------------------------------------------------------------------------------------


def query_gpu(uuid: str | None) -> dict:
    """Driver and current clocks of the GPU `uuid` (or the first GPU), {} when nvidia-smi is missing."""
    fields = "uuid,driver_version,clocks.sm,clocks.mem"
    rows = _smi(["--query-gpu=" + fields, "--format=csv,noheader,nounits"])
    rows = [row for row in rows if len(row) == 4]
    chosen = next((row for row in rows if uuid and row[0] == uuid), rows[0] if rows else None)
    if chosen is None:
        return {}
    return {"driver": chosen[1], "clocks": {"sm_mhz": _int(chosen[2]), "mem_mhz": _int(chosen[3])}}


def other_gpu_processes(uuid: str | None) -> list[int]:
    """Compute processes on GPU `uuid` that are neither this process nor its descendants (a worker).

    nvidia-smi reports pids as the driver sees them. Inside a sandbox or container with its own pid
    namespace they do not match ours (ours is then missing from the list although this process holds
    a CUDA context), and telling ours from others is impossible: nothing is reported, and the copy and
    matmul norms remain the check.
    """
    rows = _smi(["--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader,nounits"])
    listed = [_int(row[0]) for row in rows if len(row) == 2 and (not uuid or row[1] == uuid)]
    return foreign_pids(listed, _own_process_tree(), os.getpid())


def foreign_pids(listed: list, ours: set[int], me: int) -> list[int]:
    """Pids in `listed` outside `ours`; none when `me` is not listed (pids from another namespace)."""
    if me not in listed:
        return []
    return sorted(pid for pid in listed if pid is not None and pid not in ours)


def _smi(arguments: list[str]) -> list[list[str]]:
    try:
        done = subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line.strip()]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (empty where /proc is missing). The command name in
    /proc/PID/stat may hold spaces; the parent pid follows its closing paren."""
    children: dict[int, list[int]] = {}
    try:
        entries = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    found, stack = [], list(children.get(pid, []))
    while stack:
        child = stack.pop()
        if child not in found:
            found.append(child)
            stack.extend(children.get(child, []))
    return found


def _own_process_tree() -> set[int]:
    """This process and all its descendants, from /proc (Linux); just this process elsewhere."""
    return {os.getpid(), *descendants(os.getpid())}


def _gpu_uuid(torch) -> str | None:
    try:
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    except (AttributeError, RuntimeError):
        return None
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"


def _gpu_uuid_or_none() -> str | None:
    import torch

    return _gpu_uuid(torch) if torch.cuda.is_available() else None


def _version(package: str) -> str | None:
    module = sys.modules.get(package)
    if module is None:
        try:
            from importlib.metadata import PackageNotFoundError, version
        except ImportError:  # pragma: no cover
            return None
        try:
            return version(package)
        except PackageNotFoundError:
            return None
    return getattr(module, "__version__", None)


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except (TypeError, ValueError):
        return None
