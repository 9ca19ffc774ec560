"""One checking run seen from outside: how it is started, watched, read and killed.

The runner (grader/grade/runner.py) decides what to grade and writes the outputs; this module holds the
process-level pieces it uses for each submission: the non-dumpable launcher, the bubblewrap probe,
the pre-warmed read-only checker tree, the bounded log, draining pipes, classifying how the run ended,
and killing its whole process group. Nothing here imports torch or Triton.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from grader import results
from grader.grade import sandbox
from grader.errors import GraderError

LOG_HEAD = LOG_TAIL = 100_000     # bytes of the child's output kept: head and tail, 200 KB in all
# The checking process makes itself non-dumpable before pytest starts: its /proc entries (the results
# pipe under /proc/<pid>/fd, its memory) then need CAP_SYS_PTRACE, which the sandbox drops, so the
# worker running student code cannot write into the results pipe. Exec resets this for the worker.
CHECKER_LAUNCHER = ("import ctypes, sys\n"
                    "try:\n    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0\n"
                    "except (OSError, AttributeError):\n    pass\n"
                    "import os, pytest\ncode = pytest.main(sys.argv[1:])\n"
                    "sys.stdout.flush(); sys.stderr.flush()\n"
                    "os._exit(int(code))  # skip tearing down torch: the results are written and closed\n")


def check_bwrap_works(bwrap: str) -> None:
    """Refuse to grade when bubblewrap is installed but cannot build a sandbox here (no user
    namespaces, a locked-down container): grading unsandboxed must be asked for with --no-sandbox."""
    try:
        probe = subprocess.run(sandbox.probe_argv(bwrap), capture_output=True, text=True, timeout=60)
        problem = (probe.stderr.strip() or f"exit code {probe.returncode}") if probe.returncode != 0 else ""
    except (OSError, subprocess.TimeoutExpired) as error:
        problem = str(error)
    if problem:
        raise GraderError(f"bubblewrap ({bwrap}) cannot create a sandbox on this machine: {problem[-300:]}. "
                          "Fix that, or grade without a sandbox with --no-sandbox.")


def warm_checker_tree(root: Path, suite_dirs, timeout: float = 300.0) -> None:
    """Collect the suites once, here, so Python's and pytest's bytecode caches exist before the tree
    turns read-only: every checking run then skips recompiling the suites (seconds each on a CPU).
    Then make the tree read-only (the sandbox mounts it read-only anyway)."""
    env = sandbox.child_env(dict(os.environ), scratch=root.parent / "warm", pythonpath=root, gpus=[])
    env.pop("PYTHONDONTWRITEBYTECODE")
    for folder in sandbox.scratch_folders(root.parent / "warm"):
        folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "grader")], env=env,
                       capture_output=True, timeout=timeout)
        subprocess.run([sys.executable, "-m", "pytest", "-p", "grader.plugin", "--collect-only", "-q",
                        "-p", "no:cacheprovider", *suite_dirs], cwd=root, env=env, capture_output=True,
                       timeout=timeout, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired):
        pass                       # only a speed-up: each run compiles for itself instead
    for path in root.rglob("*"):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o222)


def gpu_name_of(stream: str) -> str | None:
    """The GPU model the checking run reported in its header ("CUDA: NVIDIA H200"), if any."""
    first = stream.split("\n", 1)[0]
    try:
        header = json.loads(first)
    except ValueError:
        return None
    environment = header.get("environment") if isinstance(header, dict) else None
    if not isinstance(environment, dict) or header.get("device") != "cuda":
        return None
    name = environment.get("gpu") or str(environment.get("device", "")).removeprefix("CUDA:").strip()
    return str(name) or None


def classify_exit(code: int | None, timed_out: bool, timeout: float, stream: str) -> tuple[str, str]:
    """The run's status from how it ended; only a run that wrote its end line counts as graded."""
    finished = results.read_stream(stream).finished
    if timed_out:
        return "timeout", f"stopped after the {timeout:g} s wall-clock budget; checks that had not " \
                          "reported score zero"
    if code in (0, 1) and finished:
        return "graded", ""
    if code is not None and code < 0:
        return "crashed", f"the checking run was killed by signal {signal.Signals(-code).name}"
    meaning = {2: "interrupted", 3: "pytest internal error", 4: "pytest usage error (harness problem)",
               5: "no tests were collected"}.get(code, "ended early")
    return "crashed", f"the checking run exited with code {code} ({meaning}) before finishing"


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (it was started in its own session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class BoundedLog:
    """Keeps the first LOG_HEAD and last LOG_TAIL bytes of a stream; says how much it dropped."""

    def __init__(self, head: int = LOG_HEAD, tail: int = LOG_TAIL):
        self.head_limit, self.tail_limit = head, tail
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        self.lock = threading.Lock()

    def add(self, chunk: bytes):
        with self.lock:
            room = self.head_limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            excess = len(self.tail) - self.tail_limit
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        with self.lock:
            middle = f"\n\n[... {self.dropped} bytes of output left out ...]\n\n".encode() if self.dropped else b""
            return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


def drain(pipe, sink):
    with pipe:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            sink(chunk)


def drain_fd(fd, sink, limit: int = 32 << 20):
    """Read the results pipe; stop keeping data past `limit` bytes (a flood is not a result)."""
    kept = 0
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        for chunk in iter(lambda: pipe.read(65536), b""):
            if kept < limit:
                sink(chunk[: limit - kept])
                kept += len(chunk)


def importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
