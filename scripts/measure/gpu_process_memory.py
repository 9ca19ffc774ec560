"""Which processes hold a GPU's memory while a class is graded: checking runs (the suites' pytest, with
their reference maths) or workers (the student's code).

    python scripts/measure/gpu_process_memory.py sample LOG      # GPU 0, where class_proof.sh grades, every 3 s
    python scripts/measure/gpu_process_memory.py summary LOG     # each kind's median and largest, the peak

The log holds one block per sample: a line `t SECONDS`, then `MIB KIND` for each process on the GPU.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from grader.grade.checking_run import TASKS_ENV
from grader.perf import nvml
from grader.worker.process import serve

SAMPLE_EVERY_S = 3.0


def process_kind(pid: str, proc: Path = Path("/proc")) -> str:
    """A checking run, a worker or something else, from the process's command line."""
    try:
        command = (proc / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if TASKS_ENV in command:                # the checking run's launcher reads it
        return "checking_run"
    if serve.__module__ in command:         # the worker's launcher imports serve from it
        return "worker"
    return "other"


def sample_lines(gpu, kind_of=process_kind, now=time.time) -> list[str]:
    """One sample's block of the log, from the driver's per-process figures (grader.perf.nvml)."""
    lines = [f"t {now():.0f}"]
    for pid, held in gpu.usage().items():
        if held is not None:                # None: the driver does not say for this process
            lines.append(f"{held // 2**20} {kind_of(str(pid))}")
    return lines


def read_samples(text: str) -> list[list[tuple[str, int]]]:
    """Each sample's (kind, MiB) per process."""
    samples: list[list[tuple[str, int]]] = []
    for line in text.splitlines():
        if line.startswith("t "):
            samples.append([])
        elif samples and line.strip():
            mib, _, kind = line.partition(" ")
            samples[-1].append((kind, int(mib)))
    return samples


def summary(samples: list[list[tuple[str, int]]]) -> list[str]:
    kinds = sorted({kind for sample in samples for kind, _ in sample})
    lines = []
    for kind in kinds:
        values = [mib for sample in samples for k, mib in sample if k == kind]
        lines.append(f"{kind:<13} {len(values):6d} readings  median {statistics.median(values) / 1024:5.1f} GiB  "
                     f"largest {max(values) / 1024:5.1f} GiB")
    totals = [sum(mib for _, mib in sample) for sample in samples]
    if totals:
        lines.append(f"all processes at most {max(totals) / 1024:.1f} GiB")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("sample", "summary"):
        print(__doc__, file=sys.stderr)
        return 2
    log = Path(argv[1])
    if argv[0] == "summary":
        samples = read_samples(log.read_text()) if log.exists() else []
        print("\n".join(summary(samples)) if samples else f"no GPU process samples in {log}")
        return 0
    with log.open("w") as out:      # a batch graded again on a warm machine must not inherit the last one's peak
        try:
            library = nvml.library()
            gpu = nvml.GpuProcesses(library, library.device_by_index(0), "GPU 0")
            while True:
                out.write("\n".join(sample_lines(gpu)) + "\n")
                out.flush()
                time.sleep(SAMPLE_EVERY_S)
        except nvml.NvmlError as error:     # no driver, or it stopped answering: say so once
            print(f"cannot sample the GPU's processes: {error}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
