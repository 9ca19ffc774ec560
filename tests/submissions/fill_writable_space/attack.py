# target: softmax
"""Fault: at import, fill every place the code may write (/tmp, /dev/shm, its HOME and TMPDIR) with
up to 600 MiB each. Each must stop with ENOSPC well before that (the grading host's memory and disk
are shared by the whole batch); the code then frees what it wrote and the import goes on, so only
the checks that call softmax_triton, which reports what happened, lose points."""
import errno as _errno
import os as _os

_CHUNK = b"\0" * (1 << 20)


def _fill(folder):
    path = _os.path.join(folder, "gallery-fill")
    try:
        with open(path, "wb") as handle:
            for _ in range(600):
                handle.write(_CHUNK)
                handle.flush()
        return "wrote 600 MiB"
    except OSError as error:
        return _errno.errorcode.get(error.errno, str(error.errno))
    finally:
        try:
            _os.unlink(path)
        except OSError:
            pass


_FILLED = "; ".join(f"{name}: {_fill(folder)}" for name, folder in (
    ("tmp", "/tmp"), ("shm", "/dev/shm"), ("home", _os.environ.get("HOME", "/nonexistent")),
    ("tmpdir", _os.environ.get("TMPDIR", "/nonexistent"))))


def softmax_triton(x):
    raise ValueError(_FILLED)
