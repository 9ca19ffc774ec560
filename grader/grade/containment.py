"""What holds a checking run that bubblewrap does not (--no-sandbox, or no bwrap): its own pid and
mount namespaces through util-linux `unshare`.

- The checker is pid 1 of a new pid namespace. When it ends, the kernel kills every process left in
  the namespace, daemons that called setsid included; `--kill-child` ends it when the runner kills
  `unshare`. Nothing in the namespace can name, so signal, the runner or anything else outside it,
  and pid 1 cannot be killed from inside, so the worker cannot kill the checker either.
- /tmp and /dev/shm are fresh tmpfs mounts, gone with the run: nothing is left in the host's. What
  the run needs from the host's (a checkout, venv or scratch under /tmp) is bound back, and only
  that: `bind_plan` lists it, read-only where the run only reads.
What it is NOT: a filesystem sandbox. Files the grading user can read or write stay readable and
writable, the network is reachable, and the report says the grade ran without a sandbox.
Root can always do this; other users need unprivileged user namespaces (`--map-root-user`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The folders each run gets fresh. They themselves are never bound back: that would undo the point.
PRIVATE = ("/tmp", "/dev/shm")

# Run as pid 1 before the checker: opens what `bind_plan` binds back while the host's /tmp still
# shows (O_PATH: files, folders, even unreadable ones), mounts the fresh tmpfs, binds each path back
# through its descriptor (read-only ones remounted so, keeping the nosuid/nodev/noexec a user
# namespace may not drop), recreates the symlinks, then becomes the checker.
# Python, not sh: os.open takes a free descriptor, where sh's `exec 3<` could clobber an inherited one.
_SETUP = ("import json, os, subprocess, sys\n"
          "private, steps = json.loads(sys.argv[1])\n"
          "fds = {path: os.open(path, os.O_PATH) for kind, path, _ in steps if kind == 'bind'}\n"
          "for target in private:\n"
          "    subprocess.run(['mount', '-t', 'tmpfs', 'grader-private', target], check=True)\n"
          "for kind, path, how in steps:\n"
          "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
          "    if kind == 'link':\n"
          "        if not os.path.lexists(path):\n"
          "            os.symlink(how, path)\n"
          "        continue\n"
          "    fd = fds.pop(path)\n"
          "    source = f'/proc/self/fd/{fd}'\n"
          "    if os.path.isdir(source):\n"
          "        os.makedirs(path, exist_ok=True)\n"
          "    elif not os.path.exists(path):\n"
          "        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))\n"
          "    subprocess.run(['mount', '--no-canonicalize', '--bind', source, path], check=True,\n"
          "                   pass_fds=(fd,))\n"
          "    os.close(fd)\n"
          "    if how == 'ro':\n"
          "        flags = os.statvfs(path).f_flag\n"
          "        kept = [name for bit, name in ((os.ST_NOSUID, 'nosuid'), (os.ST_NODEV, 'nodev'),\n"
          "                                       (os.ST_NOEXEC, 'noexec')) if flags & bit]\n"
          "        subprocess.run(['mount', '-o', ','.join(['remount', 'bind', 'ro', *kept]), path], check=True)\n"
          "os.execvp(sys.argv[2], sys.argv[2:])\n")


def find_unshare() -> str | None:
    return shutil.which("unshare")


def wrap(command: list[str], unshare: str, *, writable=(), readonly=(), as_root: bool | None = None) -> list[str]:
    """`command` as pid 1 of new pid and mount namespaces, with private /tmp and /dev/shm; of the
    paths given, those the private folders would hide are bound back (`bind_plan`)."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    user = [] if as_root else ["--map-root-user"]
    plan = json.dumps([list(PRIVATE), bind_plan(writable, readonly)])
    return [unshare, *user, "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--",
            sys.executable, "-I", "-c", _SETUP, plan, *command]


def bind_plan(writable, readonly, private=PRIVATE) -> list[list[str]]:
    """What the run must find again under the `private` folders, parents first: ["bind", path, "rw"
    or "ro"] or ["link", path, its target]. Each path counts as written and as resolved (a venv's
    python -> python3 -> /usr/bin/python3.11); a symlink on the way is recreated, and the walk goes
    on from where it points. A path that a bound folder already shows is left to it, unless it must
    be writable inside a read-only one. Paths elsewhere, or missing, need nothing."""
    binds: dict[str, str] = {}
    links: dict[str, str] = {}
    todo = [(str(p), "rw") for p in writable] + [(str(p), "ro") for p in readonly]
    seen = set()
    while todo:
        path, how = todo.pop()
        if not os.path.isabs(path) or (path, how) in seen:
            continue
        seen.add((path, how))
        for candidate in dict.fromkeys((os.path.normpath(path), os.path.realpath(path))):
            found = _walk(candidate, private)
            if found is None:
                continue
            if found[0] == "link":
                links[found[1]] = os.readlink(found[1])
                todo.append((found[2], how))
            elif binds.get(candidate) != "rw":
                binds[candidate] = how
    steps = sorted([["link", path, target] for path, target in links.items()] +
                   [["bind", path, how] for path, how in binds.items()],
                   key=lambda step: (step[1].count("/"), step[1]))
    kept = []
    for kind, path, how in steps:
        shown_by = [step for step in kept if step[0] == "bind" and path.startswith(step[1] + "/")]
        if shown_by and (kind == "link" or shown_by[-1][2] == "rw" or shown_by[-1][2] == how):
            continue
        kept.append([kind, path, how])
    return kept


def _walk(path: str, private) -> tuple | None:
    """("bind", path) when `path` lies strictly inside a private folder and no symlink is on the way,
    ("link", the first symlink, the path with that symlink resolved) when one is; None when it lies
    elsewhere or does not exist."""
    root = next((folder for folder in private if path.startswith(folder + "/")), None)
    if root is None:
        return None
    prefix = root
    for part in Path(path).relative_to(root).parts:
        prefix = os.path.join(prefix, part)
        if not os.path.lexists(prefix):
            return None
        if os.path.islink(prefix):
            return "link", prefix, os.path.realpath(prefix) + path[len(prefix):]
    return "bind", path


def works(unshare: str | None) -> bool:
    """Whether `wrap` can run here (root, or unprivileged user namespaces allowed), binds included."""
    if unshare is None:
        return False
    try:
        probe = Path(tempfile.mkdtemp(prefix="grader-containment-", dir=PRIVATE[0]))   # hidden, so bound back
    except OSError:
        return False
    try:
        (probe / "rw").mkdir()     # a writable folder inside a read-only one: both kinds of bind
        argv = wrap(["test", "-d", str(probe / "rw")], unshare, writable=[probe / "rw"], readonly=[probe])
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(probe, ignore_errors=True)
