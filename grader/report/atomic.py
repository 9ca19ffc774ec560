"""Write a file so that readers see the old content or the new, never half of it, and so that any
number of writers (Slurm tasks on several nodes, a report job) may write the same file at once."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file of its own beside `path`, then rename it over `path`. The
    temporary name is unique per call: a shared name lets one writer rename away another's file."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # errors=: a name that is not UTF-8 (kept as surrogates) must not stop a report being written
        with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace", newline="") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)           # mkstemp makes it 0600; reports are read by others
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
