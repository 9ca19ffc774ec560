"""Without bubblewrap, each checking run is pid 1 of its own pid namespace with private /tmp and
/dev/shm (grader.grade.containment): daemons die with it, the runner is out of its reach."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from grader.grade import containment

UNSHARE = containment.find_unshare()
pytestmark = pytest.mark.skipif(not containment.works(UNSHARE), reason="unshare cannot create namespaces here")


def run_wrapped(code: str, keep: Path) -> subprocess.CompletedProcess:
    argv = containment.wrap([sys.executable, "-c", code], UNSHARE, keep=keep)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=keep)


def test_the_run_is_pid_1_sees_no_parent_and_a_private_tmp_that_keeps_the_scratch(tmp_path):
    (tmp_path / "scratch-file").write_text("kept")
    out = run_wrapped("import os, sys; print(os.getpid(), os.getppid()); "
                      "print(open('scratch-file').read()); "
                      "open('/dev/shm/trust-probe', 'w').close()", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "0", "kept"]
    assert not Path("/dev/shm/trust-probe").exists()


def test_a_setsid_daemon_dies_with_the_run(tmp_path):
    token = f"containment-daemon-{uuid.uuid4().hex[:8]}"
    code = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
            f"'{token}'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
    assert run_wrapped(code, tmp_path).returncode == 0
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, token)]
    assert alive == []


def _cmdline_has(proc: Path, token: str) -> bool:
    try:
        return token.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False
