"""One checking run seen from outside: how it is started, watched, read and killed.

The batch (grader/grade/batch.py) decides what to grade and writes the outputs; this module runs one
checking run for it (`watch`: launch in a new session, drain its output and results pipe, kill its
whole process group on the wall-clock budget, read the results once) and holds the process-level
pieces around that: the non-dumpable launcher, the pre-warmed read-only checker tree, the bounded log
and classifying how the run ended. Nothing here imports torch or Triton.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader import results
from grader.grade import cgroups, sandbox
from grader.report.model import HARNESS_ERROR
from grader.report.plain_text import printable


@dataclass
class Outcome:
    """What one checking run produced, before scoring: its results stream is read once, here."""

    status: str                  # graded | timeout | crashed | harness_error
    reason: str
    exit_code: int | None
    duration: float
    stream: str                  # the results stream (JSON lines)
    log: str                     # head and tail of stdout+stderr
    read: results.StreamRead = field(default=None, repr=False)   # the stream, read (grader.results)

    def __post_init__(self):
        if self.read is None:
            self.read = results.read_stream(self.stream)


def watch(argv: list[str], *, env: dict, cwd: str, results_fd: tuple[int, int], pass_fds=(),
          timeout: float, started=lambda process, at: None, ended=lambda process: None,
          cgroup: cgroups.RunCgroup | None = None) -> Outcome:
    """Run one checking run to its end or its wall-clock budget and return what it produced.

    `results_fd` is the (read, write) ends of the pipe the checker writes its results to: the child gets
    the write end, and this process keeps only the read end. `started(process, perf_counter at launch)`
    and `ended(process)` let the caller track the run (progress, Ctrl-C). The whole process group is
    killed when the run ends, however it ends. With `cgroup` (created, and joined by `argv`'s prefix)
    the run also ends as a whole when the kernel kills one of its processes for the run's memory bound,
    and every process in the cgroup is killed at the end."""
    read_end, write_end = results_fd
    start = time.perf_counter()
    try:
        process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, pass_fds=(write_end, *pass_fds),
                                   start_new_session=True)
    except OSError as error:
        os.close(read_end)
        return Outcome(HARNESS_ERROR, f"harness error: could not start the checking run: {error}", None, 0.0,
                       "", "")
    finally:
        os.close(write_end)                     # the checker holds the only write end now
    started(process, start)
    log, stream = BoundedLog(), bytearray()
    readers = [threading.Thread(target=drain, args=(process.stdout, log.add), daemon=True),
               threading.Thread(target=drain_fd, args=(read_end, stream.extend), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        timed_out = wait(process, start + timeout, cgroup)
    finally:
        kill_group(process)
        if cgroup is not None:
            cgroup.kill()
        ended(process)
    for reader in readers:
        reader.join(timeout=5)
    text = bytes(stream).decode("utf-8", errors="replace")
    read = results.read_stream(text)
    if cgroup is not None:
        log.add(bound_note(cgroup).encode())
    status, reason = classify_exit(process.returncode, timed_out, timeout, read, log.text())
    if cgroup is not None and cgroup.oom_killed():
        status, reason = over_memory(cgroup.memory_bytes, read)
    return Outcome(status, reason, process.returncode, time.perf_counter() - start, text, log.text(), read)


def wait(process: subprocess.Popen, deadline: float, cgroup: cgroups.RunCgroup | None) -> bool:
    """Wait for the run to end; True when its wall-clock budget ran out first. A cgroup v1 OOM kills
    one process of the run, and the kernel may pick the checker while the worker keeps what it holds:
    the run stops here as soon as the kernel has killed anything for the bound (v2 does it itself)."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return True
        try:
            process.wait(timeout=min(left, OOM_POLL_S) if cgroup is not None else left)
            return False
        except subprocess.TimeoutExpired:
            if cgroup is not None and cgroup.oom_killed():
                return False


OOM_POLL_S = 0.5


def over_memory(memory_bytes: int | None, read: results.StreamRead) -> tuple[str, str]:
    """A run the kernel stopped at its memory bound. After the results header, student code was
    running: the student's failure. Before it, only the harness ran: the bound is too small for it."""
    bound = f"{memory_bytes >> 20} MiB" if memory_bytes else "its bound"
    if read.results is None:
        return HARNESS_ERROR, (f"harness error: the checking run went over its memory bound ({bound}) before "
                               "any student code ran: raise --worker-memory")
    return "crashed", (f"the checking run used more than {bound} of memory (private, shared and memfd pages "
                       "and files in its scratch, the worker cap plus the checker's share) and was stopped; "
                       "checks that had not reported score zero")


def bound_note(cgroup: cgroups.RunCgroup) -> str:
    """A last log line: the run's peaks against its bounds, and forks refused, for whoever reads it."""
    peaks, parts = cgroup.peaks(), []
    if "memory" in peaks:
        limit = f" of {cgroup.memory_bytes >> 20} MiB" if cgroup.memory_bytes else ""
        parts.append(f"memory peak {peaks['memory'] >> 20} MiB{limit}")
    if "tasks" in peaks:
        parts.append(f"tasks peak {peaks['tasks']} of {cgroup.pids_max}")
    refused = cgroup.forks_refused()
    if refused:
        parts.append(f"{refused} forks refused at the bound")
    return f"\n[grader] checking run's cgroup: {', '.join(parts) or 'no figures'}\n"


LOG_HEAD = LOG_TAIL = 100_000     # bytes of the child's output kept: head and tail, 200 KB in all
# Which tests a run checks (a part's node ids name hidden tests) never appear on its command line, which
# the worker could read in /proc/<checker>/cmdline: they travel in an unlinked file behind this
# descriptor, which the launcher reads and closes before pytest starts, so before any worker exists.
SELECTION_FLAG = "--grader-selection-fd"
# The checking process makes itself non-dumpable before pytest starts: its /proc entries (the results
# pipe under /proc/<pid>/fd, its memory) then need CAP_SYS_PTRACE, which the sandbox drops, so the
# worker running student code cannot write into the results pipe. Exec resets this for the worker.
# Where no pids cgroup can be made, the sandbox's user namespace still lets RLIMIT_NPROC count this run's
# tasks alone (the kernel counts per user namespace), unless the uid outside is root, which it exempts.
# Set before pytest starts, so the worker inherits it.
TASKS_ENV = "GRADER_RUN_TASKS"
LIMIT_TASKS = ("import os, resource\n"
               f"if os.environ.get({TASKS_ENV!r}, '').isdigit():\n"
               f"    tasks = int(os.environ[{TASKS_ENV!r}])\n"
               "    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))\n")
CHECKER_LAUNCHER = (LIMIT_TASKS + "import ctypes, sys\n"
                    "try:\n    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0\n"
                    "except (OSError, AttributeError):\n    pass\n"
                    "import os, pytest\nargs = sys.argv[1:]\n"
                    f"if {SELECTION_FLAG!r} in args:\n"
                    f"    at = args.index({SELECTION_FLAG!r})\n"
                    "    with os.fdopen(int(args[at + 1]), encoding='utf-8') as chosen:\n"
                    "        args[at:at + 2] = [line for line in chosen.read().splitlines() if line]\n"
                    "code = pytest.main(args)\n"
                    "sys.stdout.flush(); sys.stderr.flush()\n"
                    "os._exit(int(code))  # skip tearing down torch: the results are written and closed\n")


def selection_file(tests) -> int:
    """A descriptor of an unlinked file holding `tests`, one a line, at offset 0: for SELECTION_FLAG."""
    import tempfile

    with tempfile.TemporaryFile() as handle:
        handle.write("".join(f"{test}\n" for test in tests).encode("utf-8"))
        handle.flush()
        fd = os.dup(handle.fileno())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


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


def gpu_name_of(read: results.StreamRead) -> str | None:
    """The GPU model the checking run reported in its header ("CUDA: NVIDIA H200"), if any."""
    header = read.results
    if header is None or header.device != "cuda":
        return None
    environment = header.environment
    name = environment.get("gpu") or str(environment.get("device", "")).removeprefix("CUDA:").strip()
    return str(name) or None


def classify_exit(code: int | None, timed_out: bool, timeout: float, read: results.StreamRead,
                  log: str = "") -> tuple[str, str]:
    """The run's status from how it ended; only a run that wrote its end line counts as graded.
    The checker writes its results header when collection ends, before any student code runs: a
    run without it, a pytest internal or usage error (3, 4) or a collection error is the harness's
    fault (harness_error), and its reason is the decisive line of the log, not the exit code."""
    finished, started = read.finished, read.results is not None
    collection_failed = code == 2 and ("error during collection" in log or "ERROR collecting" in log)
    if code in (3, 4) or collection_failed or (not started and not finished):
        meaning = {2: "a staff suite failed to collect", 3: "pytest internal error",
                   4: "pytest usage error"}.get(code, "the checking run never reached the tests")
        how = f"stopped after the {timeout:g} s wall-clock budget" if timed_out else \
            f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0 else \
            f"exit code {code}"
        return HARNESS_ERROR, f"harness error ({meaning}, {how}): {decisive_line(log) or 'no output'}"
    if timed_out:
        return "timeout", f"stopped after the {timeout:g} s wall-clock budget; checks that had not " \
                          "reported score zero"
    if code in (0, 1) and finished:
        return "graded", ""
    if code is not None and code < 0:
        return "crashed", f"the checking run was killed by signal {signal.Signals(-code).name}"
    meaning = {2: "interrupted", 5: "no tests were collected"}.get(code, "ended early")
    return "crashed", f"the checking run exited with code {code} ({meaning}) before finishing"


# The lines that say why a run could not start, most telling first: bubblewrap's own error, pytest's
# internal error, an exception line (ImportError: ...), a collection error.
DECISIVE = (re.compile(r"^bwrap: .+"), re.compile(r"^INTERNALERROR> .*\w+(Error|Exception)\b.*"),
            re.compile(r"^(E\s+)?[\w.]*(Error|Exception|Exit): .+"), re.compile(r"^ERROR .+"))


def decisive_line(log: str, limit: int = 300) -> str:
    """The one line of a failed run's log that names the cause: the last match of the first pattern
    of DECISIVE that matches at all; else the last non-empty line."""
    lines = [line.rstrip() for line in log.splitlines() if line.strip()]
    for pattern in DECISIVE:
        found = [line for line in lines if pattern.match(line)]
        if found:
            return found[-1][:limit]
    return lines[-1][:limit] if lines else ""


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the child's whole session: its process group, and the groups of its own inside it (the
    worker leads one, so that it can be stopped between calls). It was started in a session of its own."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in session_members(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def session_members(session: int) -> list[int]:
    """The processes of session `session`, from /proc (empty where /proc is missing)."""
    members = []
    try:
        entries = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return members
    for name in entries:
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(session):
            members.append(int(name))
    return members


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
            # the child's output is the student's: every reader (log.txt, a harness error's reason
            # printed on the runner's terminal) gets it without terminal escapes
            return printable(bytes(self.head + middle + self.tail).decode("utf-8", errors="replace"))


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
