"""`make test`: the public suite in-process, finished in a worker when the student's code kills pytest.

In-process is the default so that breakpoints and prints work (grader.impl.InProcessImpl). But a Triton
kernel that loads or stores outside a tensor can kill the process under test outright (the CPU
interpreter aborts with "Fatal Python error: Aborted"): pytest then prints no failure and no points.
So the suite runs in a child pytest that writes its results stream (grader.results); when that child
stops before its end line (a signal, `os._exit`), the tests it never reported run again, once, with
`--isolate` (each call in a worker
process, where a death costs only the test it happened in) and `--resume-from`, which prints the
failures of the first run and the points of both together. A normal exit, Ctrl-C included, is passed on.

Usage: python -m grader.local_run [pytest arguments]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from grader import results

# Stopped by the student (Ctrl-C, a second Ctrl-C, a terminal closed): never a reason to run on.
INTERRUPTED = {2, -signal.SIGINT, 128 + signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP}


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-p", "grader.plugin", *argv]
    with tempfile.TemporaryDirectory(prefix="grader-local-") as folder:
        first = Path(folder) / "in_process.jsonl"
        code = _run([*pytest, "--results-json", str(first)])
        if not _died(code, first) or "--isolate" in argv:
            return code
        print(_died_banner(code, first), flush=True)
        return _run([*pytest, "--isolate", "--resume-from", str(first),
                     "--results-json", str(Path(folder) / "isolated.jsonl")])


def _died(code: int, stream: Path) -> bool:
    """The run started its tests and never finished them: a signal, or an exit its code forced (a
    pytest-timeout or `os._exit` ends without the stream's end line). Not when nothing ran (a usage or
    collection error) or the student stopped it."""
    if code in INTERRUPTED:
        return False
    read = results.read_stream(stream.read_text(encoding="utf-8") if stream.is_file() else "")
    return read.results is not None and not read.finished


def _run(command: list[str]) -> int:
    """The child's exit status; a Ctrl-C reaches the child (same terminal), which stops it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        signal.signal(signal.SIGINT, previous)


def _died_banner(code: int, stream: Path) -> str:
    read = results.read_stream(stream.read_text(encoding="utf-8") if stream.is_file() else "")
    reported = len(read.results.tests) if read.results else 0
    return (f"\nThe test process {_death(code)} after {reported} tests had reported: your code killed it (a Triton "
            "load or store outside a tensor does that; check its masks).\nRunning the tests it did not finish "
            "again, each call in a separate process (--isolate), so that a crash costs only its own test:\n")


def _death(code: int) -> str:
    number = -code if code < 0 else code - 128 if code > 128 else None
    try:
        name = signal.Signals(number).name if number else None
    except ValueError:
        name = None
    return f"died from {name} (exit code {code})" if name else f"stopped with exit code {code}"


# --- the resumed run's side (the plugin's --resume-from) ----------------------------------------------


def resume(config, items, run) -> None:
    """Leave out the tests an earlier run of this selection reported, and count its records here."""
    stream = Path(config.getoption("--resume-from"))
    read = results.read_stream(stream.read_text(encoding="utf-8") if stream.is_file() else "")
    selected = {item.nodeid for item in items}
    earlier = [record for record in (read.results.tests if read.results else ()) if record.nodeid in selected]
    done = {record.nodeid for record in earlier}
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
    items[:] = [item for item in items if item.nodeid not in done]
    run.records.extend(earlier)
    run.earlier = earlier


def write_earlier_run(terminalreporter, earlier, died_in) -> None:
    """--resume-from: the failures the run that died never printed, and where it died."""
    failed = [record for record in earlier if record.outcome == results.FAILED]
    if failed:
        terminalreporter.section("failures of the in-process run, before it died")
        for record in failed:
            terminalreporter.write_line(f"FAILED {record.nodeid}: {record.message}", red=True)
    if died_in:
        terminalreporter.write_line(f"The in-process run died in {died_in}; it and the tests after it ran "
                                    "again here, in a worker process. The points below count both runs.",
                                    yellow=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
