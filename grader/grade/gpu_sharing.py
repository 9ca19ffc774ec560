"""What sharing a GPU with other submissions (`--per-gpu N`) can do to a grade, read from its result.

Timing is protected by the GPU lock (grader.perf.gpu_lock); memory is not. Every checker and worker on a GPU
keeps what its caching allocator once reserved, so on the H200 six references at once ran it out of
its 140 GiB: tests failed with "CUDA out of memory" and CUBLAS_STATUS_ALLOC_FAILED in code that passes
alone. Nor is a run's time wholly its own: it waits while its neighbours time alone. A grade cut by
either is not the student's: the runner withholds it and grades the submission again with the GPU to
itself, where running out of memory or time is the code's own doing.
"""

from __future__ import annotations

import re

from grader.report.model import TIMEOUT, test_name
from grader.results import FAILED, HARNESS_ERROR, TestRecord

# torch's OutOfMemoryError ("CUDA out of memory. Tried to allocate ..."), the driver's own error, and the
# libraries' failed allocations (cuBLAS handles, cuDNN workspaces). Not Triton's "out of resource:
# shared memory", which is a kernel's tile choice and the same on an idle GPU.
OUT_OF_GPU_MEMORY = re.compile(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError"
                               r"|\b[A-Z]+_STATUS_ALLOC_FAILED\b|cudaErrorMemoryAllocation")


def out_of_gpu_memory(tests: list[TestRecord]) -> list[str]:
    """The tests that failed (or errored in the harness) because the GPU's memory ran out."""
    return [test.nodeid for test in tests
            if test.outcome in (FAILED, HARNESS_ERROR) and OUT_OF_GPU_MEMORY.search(test.message or "")]


def harness_errors(tests: list[TestRecord]) -> list[str]:
    return [test.nodeid for test in tests if test.outcome == HARNESS_ERROR]


def withheld_reason(status: str, tests: list[TestRecord], shared_by: int,
                    gpu: str | None) -> tuple[str, bool] | None:
    """Why the grade of a run that ended as `status` and reported `tests` cannot stand, and whether
    grading alone would settle it; None when it stands.

    Memory that ran out, or a run that timed out, while `shared_by` > 1 checking runs shared the GPU
    (other submissions', or this one's other parts): grade alone. A harness error in any test: the
    grade would be short of points that are not the student's to lose, so it is no grade (regraded on
    the next run, listed for staff)."""
    short = out_of_gpu_memory(tests)
    if short and shared_by > 1:
        return (f"GPU {gpu}'s memory ran out while {shared_by} checking runs shared it, in {_listed(short)}: "
                "not this submission's doing; graded again with the GPU to itself", True)
    if status == TIMEOUT and shared_by > 1:   # its waits for the GPU count in the run's time
        return (f"timed out while {shared_by} checking runs shared GPU {gpu}: graded again with the GPU to "
                "itself", True)
    broken = harness_errors(tests)
    if broken:
        return (f"harness error in {_listed(broken)} (not the student's fault): no grade until it is "
                "regraded", False)
    return None


def _listed(nodeids: list[str]) -> str:
    names = [test_name(nodeid) for nodeid in nodeids]
    shown = ", ".join(names[:3])
    return f"{len(names)} test{'s' if len(names) != 1 else ''} ({shown}{', ...' if len(names) > 3 else ''})"
