"""The name a student chose for the speed leaderboard: a `leaderboard_name` file in the submission.

It may sit where the module files may (flat, under `assignment/`, inside one wrapper folder). Only its
first line counts, cut to MAX_CHARS printable characters; anything else (no file, a link, binary, too
big) means no choice, and the leaderboard shows the id hashed. A folder's file is read here with
O_NOFOLLOW and a byte cap; an archive is read in a child process under the same limits as staging
(grader.grade.submission), since a hostile archive must not stall or exhaust the grader.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path, PurePosixPath

NAME_FILES = ("leaderboard_name", "leaderboard_name.txt")
MAX_CHARS = 32
MAX_BYTES = 1024
REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD_MEMORY_BYTES, CHILD_CPU_S, CHILD_TIMEOUT_S = 512 << 20, 20, 60


def chosen_name(path: Path) -> str | None:
    """The submission's chosen leaderboard name (a folder or an archive), or None."""
    path = Path(path)
    try:
        if path.is_dir() and not path.is_symlink():
            return clean(_from_folder(path))
        return clean(_from_archive(path))
    except (OSError, ValueError):
        return None


def clean(data: bytes | None) -> str | None:
    if not data:
        return None
    text = data.decode("utf-8", "replace")
    line = next((line for line in text.splitlines() if line.strip()), "")
    name = " ".join(ch for ch in line.split() if ch)
    name = "".join(ch for ch in name if ch.isprintable() and ch != "\ufffd")[:MAX_CHARS].strip()
    return name or None


def is_name_path(relpath: str) -> bool:
    parts = PurePosixPath(relpath).parts
    if not parts or parts[-1] not in NAME_FILES:
        return False
    folders = parts[:-1]
    return folders in ((), ("assignment",)) or (len(folders) == 1) or (len(folders) == 2 and folders[1] == "assignment")


def _from_folder(root: Path) -> bytes | None:
    candidates = [root / name for name in NAME_FILES] + [root / "assignment" / name for name in NAME_FILES]
    for wrapper in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "assignment"):
        candidates += [wrapper / name for name in NAME_FILES] + [wrapper / "assignment" / name for name in NAME_FILES]
    for candidate in candidates:
        if any(part.is_symlink() for part in (candidate.parent, candidate)):
            continue
        try:
            descriptor = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(descriptor).st_mode):
                return os.read(descriptor, MAX_BYTES)
        finally:
            os.close(descriptor)
    return None


def _from_archive(path: Path) -> bytes | None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from grader.course.pseudonyms import _child_main; _child_main()")
    command = [sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT), str(path)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=CHILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        reply = json.loads(done.stdout.decode("utf-8", "replace") or "null")
    except (subprocess.TimeoutExpired, ValueError):
        return None
    return reply.encode("utf-8") if isinstance(reply, str) else None


def _child_main() -> None:
    """Entry of the reading child: limits first, then the archive; its name (JSON) or null on stdout."""
    from grader.grade import archives

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_S, CHILD_CPU_S))
    found = None
    try:
        for relpath, reason, data in archives.archive_entries(Path(sys.argv[2]), is_name_path):
            if reason is None and data is not None and is_name_path(relpath):
                found = clean(data[:MAX_BYTES])
                break
    except Exception:  # noqa: BLE001 - whatever the archive does, there is simply no chosen name
        found = None
    sys.stdout.write(json.dumps(found))
