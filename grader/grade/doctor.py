"""`grader doctor`: what grading would use on this machine, and how to fix what would not work.

Each check returns a Finding: a name, what was found, and, when something is wrong, a fix. Only the
findings that stop grading (no torch, a sandbox that cannot start the interpreter) make the command
exit 1; a missing Chromium or GPU is reported with its consequence and exits 0.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.grade import sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
SANDBOX_PROBE = "import grader, grader.plugin, pytest, torch; print('torch', torch.__version__)"


@dataclass(frozen=True)
class Finding:
    name: str
    detail: str
    fix: str = ""              # empty: nothing to fix
    blocking: bool = False     # grading cannot work until it is fixed

    @property
    def line(self) -> str:
        mark = "ok     " if not self.fix else ("PROBLEM" if self.blocking else "note   ")
        text = f"{mark} {self.name}: {self.detail}"
        return text + (f"\n        fix: {self.fix}" if self.fix else "")


def interpreter() -> Finding:
    kind = "venv" if sys.prefix != sys.base_prefix else "conda" if os.environ.get("CONDA_PREFIX") else "base"
    return Finding("interpreter", f"{sys.executable} (Python {sys.version.split()[0]}, {kind}, prefix {sys.prefix})")


def package(name: str, blocking: bool = True) -> Finding:
    try:
        module = importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - any import failure is the finding
        return Finding(name, f"not importable ({type(error).__name__}: {error})",
                       f"`make install` with this interpreter ({sys.executable} -m pip install {name})", blocking)
    return Finding(name, str(getattr(module, "__version__", "installed")))


def device() -> Finding:
    try:
        import torch
    except Exception:  # noqa: BLE001 - reported by package("torch")
        return Finding("device", "unknown (torch not importable)")
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        return Finding("device", f"CUDA {torch.version.cuda}, {len(names)} GPU(s): {', '.join(names)}")
    return Finding("device", "no CUDA: CPU mode, Triton kernels run in its interpreter at small sizes and "
                   "perf checks are not run here",
                   "grade on a GPU node for perf points (a CUDA build of torch and an NVIDIA driver)")


def bubblewrap(bwrap: str | None = None, run=subprocess.run) -> list[Finding]:
    """bubblewrap exists, has the options the launch uses, and starts this interpreter importing
    the grader and torch inside the same sandbox grading builds."""
    bwrap = bwrap or sandbox.find_bwrap()
    if bwrap is None:
        return [Finding("bubblewrap", "not installed: grading would run WITHOUT a sandbox",
                        "apt-get install -y bubblewrap (make install does it as root on Debian/Ubuntu)")]
    features = sandbox.bwrap_features(bwrap)
    options = ", ".join(sorted(features)) or "none of --size, --disable-userns"
    found = [Finding("bubblewrap", f"{bwrap}, options: {options}",
                     "" if "--size" in features else "bubblewrap >= 0.5 bounds the sandbox's tmpfs sizes; upgrade it")]
    with tempfile.TemporaryDirectory(prefix="grader-doctor-") as scratch:
        for folder in sandbox.scratch_folders(Path(scratch)):
            folder.mkdir()
        launch = sandbox.build_launch([sys.executable, "-c", SANDBOX_PROBE], scratch=Path(scratch),
                                      checker_root=REPO_ROOT, gpus=None, sandbox=True, bwrap=bwrap,
                                      base_env=dict(os.environ), device_nodes=sandbox.gpu_device_nodes(),
                                      keep_visible=sandbox.python_paths())
        try:
            done = run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=300)
            said = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            problem = "" if done.returncode == 0 else said[-1]
        except (OSError, subprocess.TimeoutExpired) as error:
            problem = str(error)
    if problem:
        from grader.grade.preflight import diagnose

        found.append(Finding("sandboxed interpreter", f"cannot run {sys.executable} inside bubblewrap: {problem}",
                             diagnose(problem), blocking=True))
    else:
        found.append(Finding("sandboxed interpreter", f"{sys.executable} imports grader and torch inside "
                             f"bubblewrap as uid {sandbox.SANDBOX_UID} ({done.stdout.strip()})"))
    return found


def chromium() -> Finding:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return Finding("chromium", shutil.which(name))
    return Finding("chromium", "not found: the report screenshot tests are skipped",
                   "apt-get install -y chromium (only the harness's own tests use it)")


def worker_memory() -> Finding:
    from grader.grade.sizing import default_jobs, default_worker_memory_mb, detect_gpus

    parallel = len(detect_gpus(os.environ)) or default_jobs()
    cap = default_worker_memory_mb(parallel)
    return Finding("worker memory cap", f"{cap} MiB per submission ({parallel} graded at once)")


def run_bounds(where=None, parallel: int | None = None, nproc_holds: bool | None = None) -> list[Finding]:
    """What bounds one checking run's memory and processes on this machine: a cgroup per run where the
    grader can make one, else what holds instead, and how to get the cgroup."""
    from grader.grade import cgroups, sizing

    where = cgroups.places() if where is None else where
    parallel = parallel or len(sizing.detect_gpus(os.environ)) or sizing.default_jobs()
    cap, share = sizing.default_worker_memory_mb(parallel), sizing.CHECKER_MEMORY_MB
    text = f"default {cap + share} MiB: the worker cap {cap} + {share} for the checker"
    if nproc_holds is None:
        nproc_holds = os.geteuid() != 0 and sandbox.find_bwrap() is not None
    found = cgroups.describe(where, text, sizing.RUN_PIDS_MAX, nproc_holds)
    return [Finding(what, detail, fix) for what, (detail, fix) in found.items()]


def timing_cores(gpus: list | None = None, cores: list[int] | None = None) -> Finding:
    """Which cores a GPU's perf checks time on, away from every checking run's compiles."""
    from grader.grade.sizing import detect_gpus
    from grader.perf import cores as kept_for_timing

    gpus = detect_gpus(os.environ) if gpus is None else gpus
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    if not gpus:
        return Finding("timing cores", "none kept: no GPU here, so no perf checks")
    compile_cores, kept = kept_for_timing.plan(cores, gpus)
    if not kept:
        return Finding("timing cores", f"none kept: {len(cores)} cores for {len(gpus)} GPU(s) is too few",
                       f"give grading at least {kept_for_timing.cores_needed(len(gpus))} cores, or neighbours' "
                       "compiles may slow the host of a timed kernel")
    if not kept_for_timing.launch_prefix(compile_cores):
        return Finding("timing cores", "none kept: taskset not found",
                       "apt-get install -y util-linux (taskset keeps checking runs off the timing cores)")
    shown = ", ".join(f"GPU {gpu}: core {','.join(map(str, each))}" for gpu, each in kept.items())
    return Finding("timing cores", f"{shown}; checking runs compile on the other {len(compile_cores)}")


def findings() -> list[Finding]:
    return [interpreter(), package("torch"), package("triton", blocking=False), package("numpy"),
            package("pytest"), device(), *bubblewrap(), chromium(), worker_memory(), *run_bounds(),
            timing_cores()]


def run_doctor(echo=print) -> int:
    found = findings()
    for finding in found:
        echo(finding.line)
    blocking = [f for f in found if f.blocking and f.fix]
    echo("grading can run here" if not blocking else f"{len(blocking)} problem(s) stop grading: fix them first")
    return 1 if blocking else 0
