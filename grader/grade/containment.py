"""What holds a checking run that bubblewrap does not (--no-sandbox, or no bwrap): its own pid and
mount namespaces through util-linux `unshare` (issue 14, hole 7).

- The checker is pid 1 of a new pid namespace. When it ends, the kernel kills every process left in
  the namespace, daemons that called setsid included; `--kill-child` ends it when the runner kills
  `unshare`. Nothing in the namespace can name, so signal, the runner or anything else outside it,
  and pid 1 cannot be killed from inside, so the worker cannot kill the checker either.
- /tmp and /dev/shm are fresh tmpfs mounts, gone with the run: nothing is left in the host's.
What it is NOT: a filesystem sandbox. Files the grading user can read or write stay readable and
writable, the network is reachable, and the report says the grade ran without a sandbox.
Root can always do this; other users need unprivileged user namespaces (`--map-root-user`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Run as pid 1 before the checker: holds the batch's scratch (often under /tmp) open, mounts fresh
# tmpfs on /tmp and /dev/shm, binds the scratch back through its descriptor, then becomes the checker.
# Python, not sh: os.open takes a free descriptor, where sh's `exec 3<` could clobber an inherited one.
_SETUP = ("import os, subprocess, sys\n"
          "keep = sys.argv[1]\n"
          "fd = os.open(keep, os.O_RDONLY | os.O_DIRECTORY)\n"
          "for target, name in (('/tmp', 'grader-tmp'), ('/dev/shm', 'grader-shm')):\n"
          "    subprocess.run(['mount', '-t', 'tmpfs', name, target], check=True)\n"
          "os.makedirs(keep, exist_ok=True)\n"
          "subprocess.run(['mount', '--no-canonicalize', '--bind', f'/proc/self/fd/{fd}', keep], check=True,\n"
          "               pass_fds=(fd,))\n"
          "os.close(fd)\n"
          "os.execvp(sys.argv[2], sys.argv[2:])\n")


def find_unshare() -> str | None:
    return shutil.which("unshare")


def wrap(command: list[str], unshare: str, keep: Path, as_root: bool | None = None) -> list[str]:
    """`command` as pid 1 of new pid and mount namespaces, with private /tmp and /dev/shm; the folder
    `keep` (the batch's scratch) stays where it is."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    user = [] if as_root else ["--map-root-user"]
    return [unshare, *user, "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--",
            sys.executable, "-I", "-c", _SETUP, str(keep), *command]


def works(unshare: str | None) -> bool:
    """Whether `wrap` can run here (root, or unprivileged user namespaces allowed)."""
    if unshare is None:
        return False
    try:
        return subprocess.run(wrap(["true"], unshare, Path("/tmp")), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
