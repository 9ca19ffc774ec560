"""Perf checks: timing a submission against its baseline, and what keeps that timing honest and quiet.

The measurement is `in_worker` (timing where the kernel runs), `refresh` (new input values per call),
`measure` (the checker's rounds), `wall_window` (the checker's bound) and `record` (the perf record);
`gpu_lock` gives a perf check its GPU alone among submissions sharing it, `pausing` stops the worker
while the baseline is timed, `cores` keeps a CPU core free for the timed process, and `environment`
says what the GPU was and whether it was fit to time on.

GPU memory seen from outside the worker: `nvml` reads what the driver says each process holds,
`worker_memory` measures a worker's call with it, and `memory_growth` judges growth with the length.
"""

from grader.perf.in_worker import (
    DEFAULT_REP_MS,
    DEFAULT_WARMUP_MS,
    SYNC_SLACK,
    bench_median,
    call_repeatedly,
    capture_device_sync,
    claimed_ms,
    device_synchronize,
    release_cached_memory,
    resolve_target,
    span_floor_ms,
    synced_call_ms,
    time_kernel,
)
from grader.perf.measure import (
    EARLY_SPREAD,
    GRADED_MIN_ROUNDS,
    LATER_ROUND_WARMUP_MS,
    MAX_ROUNDS,
    WARMUP_ENV,
    measure_ratio,
    quickest_ratio,
)
from grader.perf.record import PerfResult, Round, WallWindow, graded_claims, throughput
from grader.perf.refresh import clone_inputs, refresh_inputs, replay_refreshes
from grader.perf.wall_window import (
    HOST_ALLOWANCE_MS,
    MAX_WALL_CALLS,
    MAX_WALL_SETS,
    WALL_AUDITS,
    WALL_INPUT_BUDGET_BYTES,
    WALL_LONG_FACTOR,
    WALL_PASSES,
    WALL_SLACK,
    WALL_WINDOW_MS,
)

AUDIENCE = "students"   # the public suite and `make bench` time kernels with it (grader/layout.py)

__all__ = [
    "DEFAULT_REP_MS", "DEFAULT_WARMUP_MS", "EARLY_SPREAD", "GRADED_MIN_ROUNDS", "HOST_ALLOWANCE_MS",
    "LATER_ROUND_WARMUP_MS", "MAX_ROUNDS", "MAX_WALL_CALLS", "MAX_WALL_SETS", "PerfResult", "Round", "SYNC_SLACK",
    "WALL_AUDITS", "WALL_INPUT_BUDGET_BYTES", "WALL_LONG_FACTOR", "WALL_PASSES", "WALL_SLACK", "WALL_WINDOW_MS",
    "WARMUP_ENV", "WallWindow", "bench_median", "call_repeatedly", "capture_device_sync", "claimed_ms",
    "clone_inputs", "device_synchronize", "graded_claims", "measure_ratio", "quickest_ratio", "refresh_inputs",
    "release_cached_memory", "replay_refreshes", "resolve_target", "span_floor_ms", "synced_call_ms", "throughput",
    "time_kernel",
]
