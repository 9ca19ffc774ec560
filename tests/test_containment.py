"""Without bubblewrap, each checking run is pid 1 of its own pid namespace with private /tmp and
/dev/shm (grader.grade.containment): daemons die with it, the runner is out of its reach, and what it
needs from the host's /tmp (venv, checkout, scratch) comes back, read-only where it only reads."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from grader.grade import containment, sandbox

UNSHARE = containment.find_unshare()
pytestmark = pytest.mark.skipif(not containment.works(UNSHARE), reason="unshare cannot create namespaces here")


def run_wrapped(code: str, keep: Path, *args: str, readonly=(), as_root=None) -> subprocess.CompletedProcess:
    # the interpreter comes back too, as the runner brings it back: a venv may live in the host's /tmp
    argv = containment.wrap([sys.executable, "-c", code, *args], UNSHARE, writable=[keep],
                            readonly=[*readonly, *sandbox.python_paths()], as_root=as_root)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=keep)


def test_the_run_is_pid_1_sees_no_parent_and_a_private_tmp_that_keeps_the_scratch(tmp_path):
    (tmp_path / "scratch-file").write_text("kept")
    out = run_wrapped("import os, sys; print(os.getpid(), os.getppid()); "
                      "print(open('scratch-file').read()); "
                      "open('/dev/shm/trust-probe', 'w').close()", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "0", "kept"]
    assert not Path("/dev/shm/trust-probe").exists()


# Imports a package from a read-only folder, writes its scratch, looks for a sibling it was not given.
NEEDS_PROBE = """
import errno, os, sys
code, scratch, secret = sys.argv[1:]
sys.path.insert(0, code)
import pkg
print(pkg.WHERE)
open(os.path.join(scratch, "out"), "w").write("written")
print(os.path.exists(secret))
try:
    open(os.path.join(code, "planted"), "w")
except OSError as error:
    print(errno.errorcode[error.errno])
"""


@pytest.mark.parametrize("as_root", [None, False], ids=["as-launched", "user-namespace"])
def test_what_the_run_needs_from_the_host_tmp_comes_back_and_nothing_else(host_tmp, as_root):
    # as-launched: root here, plain mounts; user-namespace: the host's mounts are locked (nosuid...)
    code, scratch, secret = host_tmp / "code", host_tmp / "scratch", host_tmp / "secret"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "__init__.py").write_text("WHERE = 'from the host tmp'\n")
    scratch.mkdir()
    secret.write_text("staff only")
    out = run_wrapped(NEEDS_PROBE, scratch, str(code), str(scratch), str(secret), readonly=[code],
                      as_root=as_root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["from the host tmp", "False", "EROFS"]
    assert (scratch / "out").read_text() == "written"
    assert not (code / "planted").exists()


def test_a_symlink_on_the_way_comes_back_as_a_symlink_and_its_target_with_it(host_tmp):
    # a venv reached through a link (/tmp/venv -> real): the child resolves the same link
    (host_tmp / "real" / "lib").mkdir(parents=True)
    (host_tmp / "real" / "lib" / "site.txt").write_text("through the link")
    (host_tmp / "venv").symlink_to("real")
    (host_tmp / "scratch").mkdir()
    code = "import os, sys; print(open(sys.argv[1]).read()); print(os.readlink(sys.argv[2]))"
    out = run_wrapped(code, host_tmp / "scratch", str(host_tmp / "venv" / "lib" / "site.txt"),
                      str(host_tmp / "venv"), readonly=[host_tmp / "venv" / "lib"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["through the link", "real"]


def test_the_plan_binds_parents_first_and_only_what_no_bound_folder_already_shows(host_tmp):
    for name in ("outer/inner", "ro/rw"):
        (host_tmp / name).mkdir(parents=True)
    plan = containment.bind_plan(
        writable=[host_tmp / "outer", host_tmp / "ro" / "rw", "/tmp", "/usr/lib", host_tmp / "missing"],
        readonly=[host_tmp / "outer" / "inner", host_tmp / "ro"])
    # inner: the writable outer shows it; rw: writable inside a read-only folder; /tmp itself, a path
    # outside the private folders and a missing one: nothing
    assert plan == [["bind", f"{host_tmp}/outer", "rw"], ["bind", f"{host_tmp}/ro", "ro"],
                    ["bind", f"{host_tmp}/ro/rw", "rw"]]


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
