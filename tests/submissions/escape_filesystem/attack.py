# target: softmax
"""Fault/cheat: write outside the submission's scratch at import: into the checker's tree (shared by
every submission of the batch), beside the other submissions' scratch folders, into the batch's
scratch root, /var/tmp and /tmp. Then, as a root grader would allow, remount the read-only binds
read-write and try again. Each marker file names its target; none may appear on the host."""
import os as _os
import subprocess as _subprocess
from pathlib import Path as _Path

_TOKEN = "__TOKEN__"


def _write(path):
    try:
        _Path(path).write_text("escaped")
    except OSError:
        pass


_scratch = _Path(_os.environ.get("HOME", "/nonexistent/home")).parent
for _target, _folder in (("checker", _Path.cwd()), ("runs", _scratch.parent), ("root", _scratch.parent.parent),
                         ("var_tmp", _Path("/var/tmp")), ("tmp", _Path("/tmp"))):
    _write(_folder / f"gallery-escape-{_TOKEN}-{_target}")

for _mount_point in ("/", str(_Path.cwd())):
    try:
        _subprocess.run(["mount", "-o", "remount,rw,bind", _mount_point], capture_output=True, timeout=10)
    except (OSError, _subprocess.SubprocessError):
        pass
_write(_Path("/var/tmp") / f"gallery-escape-{_TOKEN}-remount_var_tmp")
_write(_Path.cwd() / f"gallery-escape-{_TOKEN}-remount_checker")
