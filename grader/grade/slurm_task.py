"""What the jobs of `grader grade --slurm` run on the nodes (grader/grade/slurm.py writes their scripts).

    python -m grader.grade.slurm_task task PLAN     one array task: grade the students of chunk
                                              $SLURM_ARRAY_TASK_ID with the local runner, on the GPU
                                              Slurm gave it, writing only their own result folders
    python -m grader.grade.slurm_task report PLAN   the report job: rebuild the class files from disk

A task skips students whose result is current, so a requeued or repeated task regrades nothing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from grader.errors import GraderError


def run_task(plan: dict, index: int) -> int:
    from grader.grade.runner import grade_all

    chunks = plan["chunks"]
    if not 0 <= index < len(chunks):
        raise GraderError(f"array task {index} is outside the plan's {len(chunks)} chunks")
    # scancel sends SIGTERM: stop like on Ctrl-C (kill the checking runs, drop the scratch, write
    # nothing for the unfinished student) instead of dying with the scratch left behind.
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"task {index} on node {os.environ.get('SLURMD_NODENAME', '?')}: {' '.join(chunks[index])}",
          flush=True)
    # One submission at a time on a CPU-only node: the task was given one CPU's worth of the node. On a
    # GPU, the plan's per_gpu of them at once (--per-gpu with --slurm; an older plan has none: one).
    options = {"per_gpu": 1, **plan["options"]}
    return grade_all(**options, only=tuple(chunks[index]), jobs=1, class_files=False)


def run_report(plan: dict) -> int:
    from grader.points import load_points
    from grader.report.class_files import write_class_files

    options = plan["options"]
    print(write_class_files(Path(options["out"]), load_points(Path(options["points_dir"]))), flush=True)
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("task", "report"):
        print(__doc__, file=sys.stderr)
        return 2
    plan = json.loads(Path(argv[1]).read_text())
    try:
        if argv[0] == "report":
            return run_report(plan)
        return run_task(plan, int(os.environ.get("SLURM_ARRAY_TASK_ID", "-1")))
    except GraderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
