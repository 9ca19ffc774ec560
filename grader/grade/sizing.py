"""How much of this machine a batch takes: the GPUs, the submissions at once on each, the memory caps.

Nothing here imports torch: the GPUs are read from CUDA_VISIBLE_DEVICES or `nvidia-smi`.
"""

from __future__ import annotations

import os
import subprocess

from grader.errors import GraderError
from grader.grade import parts

# Private memory of the process running student code. CUDA's own host allocations count against it:
# on an H200 a full grade failed with "CUDA error: out of memory" at 2 GiB and passed at 8 GiB.
MIN_WORKER_MEMORY_MB = 8192
# A checking run's one memory bound (its cgroup, grader.grade.cgroups) is the worker's cap plus this
# share for the checker (its interpreter and torch, the tensors it lays out for the worker, CUDA's host
# side) and the files the run writes in its sandbox's tmpfs. The bound counts resident pages, shared and
# memfd ones included, where RLIMIT_DATA counts the worker's private address space: a run within its
# worker cap stays well inside it.
CHECKER_MEMORY_MB = 2048
# Tasks (processes and threads) of one checking run: torch's thread pools in the checker and the worker
# on a 128-core node and Triton's compile threads stay far below; a fork bomb stops here.
RUN_PIDS_MAX = 2048


def run_memory_bytes(worker_memory_mb: int) -> int | None:
    """The checking run's memory bound in bytes; None when the worker has no cap (--worker-memory 0)."""
    if worker_memory_mb <= 0:
        return None
    return (worker_memory_mb + CHECKER_MEMORY_MB) << 20


# A checking run's default wall-clock budget: this many times what the reference's tests of it took on the
# grading GPU while eight copies shared it (grader/grade/test_seconds.json), never under the floor. A
# submission that compiles a kernel per shape, or hangs, then frees its seat in minutes and keeps the
# points of what finished; an honest one several times slower than the reference still finishes.
BUDGET_FACTOR = 3.0
MIN_BUDGET_S = 300.0


def run_budget_s(reference_seconds: float, default_s: float) -> float:
    """The budget of a checking run whose tests took the reference `reference_seconds` (0: unknown)."""
    if reference_seconds <= 0:
        return default_s
    return max(MIN_BUDGET_S, BUDGET_FACTOR * reference_seconds)


# Math libraries' thread pools (torch's intra-op OpenMP, MKL, OpenBLAS) size themselves to every core
# they may use. Sixteen checking runs on sixteen cores, each with a pool of fifteen, spin against each
# other at every parallel region: eight processes of the PyTorch FlashAttention's CPU checks on two cores
# took 20-27 s with two threads each and 0.8-0.9 s with one. A run gets its share of the cores instead.
THREAD_POOL_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_pool_env(cores: int, runs_at_once: int) -> dict[str, str]:
    """The environment that gives each of `runs_at_once` checking runs its share of `cores` threads."""
    threads = str(max(1, cores // max(1, runs_at_once)))
    return {name: threads for name in THREAD_POOL_ENV}


def parse_gpus(text: str) -> list[str]:
    """`--gpus 0,1` -> ["0", "1"]; `--gpus ""` or "none" -> [] (CPU only)."""
    if text.strip().lower() in ("", "none", "cpu"):
        return []
    gpus = [part.strip() for part in text.split(",") if part.strip()]
    if len(set(gpus)) != len(gpus):
        raise GraderError(f"--gpus {text!r}: a GPU is listed twice")
    return gpus


def absent_gpus(requested: list[str], available: list[str]) -> str | None:
    """What is wrong with asking for `requested` GPUs on a machine that has `available`; None when
    every one of them is there."""
    missing = [gpu for gpu in requested if gpu not in available]
    if not missing:
        return None
    have = f"it has GPU{'s' if len(available) > 1 else ''} {', '.join(available)}" if available else \
        "it has no GPU (nvidia-smi lists none); --gpus '' grades on the CPU"
    return f"GPU {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on this machine: {have}"


def detect_gpus(env, run=subprocess.run) -> list[str]:
    """GPUs visible to us without importing torch: CUDA_VISIBLE_DEVICES if set, else `nvidia-smi -L`."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [part.strip() for part in visible.split(",") if part.strip() and part.strip() != "-1"]
    try:
        listing = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if listing.returncode != 0:
        return []
    lines = [line for line in listing.stdout.splitlines() if line.startswith("GPU ")]
    return [str(index) for index in range(len(lines))]


def default_worker_memory_mb(parallel: int, physical_bytes: int | None = None) -> int:
    """Half of the machine's memory shared over the workers that may run at once (a submission split
    into parts has one per part; the other half is for the checkers and the system), but never below
    what CUDA and the suites are known to need."""
    if physical_bytes is None:
        physical_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    share = physical_bytes // 2 // max(1, parallel) // 2**20
    return max(MIN_WORKER_MEMORY_MB, int(share))


def default_jobs() -> int:
    """Submissions at once on the CPU: one per two of the cores this process may use."""
    return max(1, parts.usable_cores() // 2)


# What one submission graded with perf checks needs, measured on the H200 (docs/history/grading-h200.md): two
# cores (four at once kept 16 cores 21-22% busy on average, 50% at the busiest 5 s: their compiles
# run one at a time per worker), 8 GiB of worker cap plus the checker's few GiB, and the largest perf
# inputs with the wall window's sets on the GPU.
CORES_PER_SUBMISSION = 2
RAM_PER_SUBMISSION = 16 << 30
# H200: four references started together peaked at 108 GiB in all, twice (checkers 22-23 GiB at most,
# workers 11); six ran out of its 140 GiB
GPU_MEMORY_PER_SUBMISSION = 27 << 30
MAX_DEFAULT_PER_GPU = 4             # H200, 4 vs 1: 3.2x without perf checks, 2.45-2.65x with; 6 ran out of memory


def default_per_gpu(gpus: int, cores: int | None = None, ram_bytes: int | None = None,
                    gpu_memory_bytes: int | None = None) -> int:
    """How many submissions to grade at once on each GPU: what the cores, the RAM and the GPU's memory
    each allow per GPU, whichever is least, between 1 and MAX_DEFAULT_PER_GPU."""
    cores = parts.usable_cores() if cores is None else cores   # a Slurm task's, not the node's
    if ram_bytes is None:
        ram_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if gpu_memory_bytes is None:
        gpu_memory_bytes = gpu_memory_total()
    gpus = max(1, gpus)
    limits = [cores // gpus // CORES_PER_SUBMISSION, ram_bytes // gpus // RAM_PER_SUBMISSION]
    if gpu_memory_bytes:
        limits.append(gpu_memory_bytes // GPU_MEMORY_PER_SUBMISSION)
    return max(1, min(MAX_DEFAULT_PER_GPU, *limits))


def per_gpu_memory_warning(per_gpu: int, gpu_memory_bytes: int | None) -> str | None:
    """What a --per-gpu beyond the GPU's memory will cost (None when it fits or is unknown)."""
    wanted = per_gpu * GPU_MEMORY_PER_SUBMISSION
    if not gpu_memory_bytes or wanted <= gpu_memory_bytes:
        return None
    return (f"--per-gpu {per_gpu} may need {wanted >> 30} GiB of GPU memory ({GPU_MEMORY_PER_SUBMISSION >> 30} GiB "
            f"per submission) and the GPU has {gpu_memory_bytes >> 30} GiB: submissions that run out of it are "
            f"graded again alone, which costs time; --per-gpu {max(1, gpu_memory_bytes // GPU_MEMORY_PER_SUBMISSION)} "
            "fits")


def gpu_memory_total(run=subprocess.run) -> int | None:
    """The smallest visible GPU's memory in bytes, from nvidia-smi (None without it)."""
    try:
        done = run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                   capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    values = [int(float(line)) for line in done.stdout.split() if line.strip().replace(".", "").isdigit()]
    return min(values) << 20 if done.returncode == 0 and values else None


def gpu_slots(gpus: list[str], per_gpu: int) -> list[str]:
    """Each GPU `per_gpu` times, interleaved, so a batch smaller than the slots spreads over the GPUs."""
    return [gpu for _ in range(per_gpu) for gpu in gpus]
