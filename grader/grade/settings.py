"""What one `grader grade` run was asked to do, resolved: suites, GPUs and slots, budgets, sandbox, parts.

`Settings` is built once by the entry point (grader.grade.runner.grade_all), from the options and the
machine's defaults (grader.grade.sizing), and read by everything after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.grade.sizing import MIN_WORKER_MEMORY_MB
from grader.points import POINTS_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]
SUITE_DIRS = {"public": ("tests_public",), "hidden": ("tests_hidden",), "all": ("tests_public", "tests_hidden")}
DEFAULT_TIMEOUT = 1800.0          # seconds per submission (the full GPU suite takes a few minutes)


@dataclass(kw_only=True)
class Settings:
    submissions: Path
    out: Path
    suite: str = "all"
    slots: list[str | None] = field(default_factory=lambda: [None])   # GPU per worker; None: CPU
    gpu_mode: bool = False
    timeout: float = DEFAULT_TIMEOUT
    timeout_option: float | None = None   # --timeout as given; None: each run's budget from the reference's time
    only: tuple[str, ...] = ()
    force: bool = False
    sandbox: bool = True
    perf: bool = True
    tests_root: Path = REPO_ROOT
    points_dir: Path = POINTS_DIR
    quiet: bool = False
    worker_memory_mb: int = MIN_WORKER_MEMORY_MB
    worker_memory_option: int | None = None   # --worker-memory as given; None: the machine's default
    class_files: bool = True     # False in a Slurm task: only the report job writes them
    per_gpu: int = 1                   # submissions graded at once on each GPU
    split: bool = False                # each submission's problems in checking runs of their own, side by side
    parts_each: int = 1                # at most this many parts per submission when split (the cores' share)
    selection: tuple[str, ...] = ()    # tests each run checks instead of the suites' folders (the autograder's)
