"""`grader grade`: the entry point that turns the options and the machine into Settings and runs a Batch.

Nothing here imports torch or Triton (tests/test_runner.py proves it).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from grader.grade import parts, sizing
from grader.grade.batch import Batch
from grader.grade.settings import DEFAULT_TIMEOUT, REPO_ROOT, Settings
from grader.points import POINTS_DIR


def grade_all(submissions, out="reports", suite="all", gpus=None, jobs=None, timeout=None, only=(),
              force=False, no_sandbox=False, no_perf=False, tests_root=None, points_dir=None,
              quiet=False, worker_memory=None, class_files=True, per_gpu=None, split=None,
              selection=()) -> int:
    """The `grader grade` command; returns the exit status (0, or 130 on Ctrl-C). `split` (default: on
    a GPU) runs each submission's problems as checking runs of their own at once (grader.grade.parts).
    `selection`: the tests to run instead of the suites' folders (the Gradescope autograder's choice)."""
    use_detected = gpus is None or gpus.strip().lower() == "all"
    gpu_list = sizing.detect_gpus(os.environ) if use_detected else sizing.parse_gpus(gpus)
    if gpu_list and per_gpu is None:
        per_gpu = sizing.default_per_gpu(len(gpu_list))
    elif gpu_list and per_gpu > 1:
        warning = sizing.per_gpu_memory_warning(per_gpu, sizing.gpu_memory_total())
        if warning:
            click.echo(f"warning: {warning}", err=True)
    slots = sizing.gpu_slots(gpu_list, per_gpu or 1) if gpu_list else [None] * (jobs or sizing.default_jobs())
    split = bool(gpu_list) if split is None else split
    parts_each = parts.parts_per_submission(len(slots)) if split else 1
    workers = len(slots) * parts_each                    # a worker per part
    memory = sizing.default_worker_memory_mb(workers) if worker_memory is None else worker_memory
    settings = Settings(submissions=Path(submissions), out=Path(out), suite=suite, slots=slots,
                        gpu_mode=bool(gpu_list), timeout=float(timeout or DEFAULT_TIMEOUT), timeout_option=timeout,
                        only=tuple(only),
                        force=force, sandbox=not no_sandbox, perf=not no_perf,
                        tests_root=Path(tests_root or REPO_ROOT), points_dir=Path(points_dir or POINTS_DIR),
                        quiet=quiet, worker_memory_mb=memory, worker_memory_option=worker_memory,
                        class_files=class_files, per_gpu=per_gpu or 1, split=split, parts_each=parts_each,
                        selection=tuple(selection))
    return Batch(settings).run()
