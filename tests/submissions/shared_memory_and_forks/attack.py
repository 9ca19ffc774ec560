# target: softmax
# worker-memory: 1024
"""Fault: softmax_triton holds memory the worker's private cap (RLIMIT_DATA) does not see, and starts
processes by the thousand. First it starts up to 2500 `sleep` processes (posix_spawn: quick), says on
stderr how many started, and ends them; then it fills a shared anonymous mapping and a memfd of the
worker cap plus 512 MiB each, touching every page, and returns the right answer. Graded with a 1024
MiB worker cap it holds 3 GiB in all: modest, so the machine is safe even where nothing stops it. A
bound per checking run must refuse part of the processes and end the run for its memory."""
import mmap as _mmap
import os as _os
import signal as _signal
import sys as _sys

_FORKS = 2500
_STEP = 64 << 20


def _forks():
    children = []
    try:
        for _ in range(_FORKS):
            children.append(_os.posix_spawn("/bin/sleep", ["sleep", "60"], {}))
    except OSError as error:
        print(f"gallery-forks: refused ({type(error).__name__})", file=_sys.stderr)
    print(f"gallery-forks: started {len(children)} of {_FORKS}", file=_sys.stderr, flush=True)
    for child in children:
        _os.kill(child, _signal.SIGKILL)
    for child in children:
        _os.waitpid(child, 0)


def _touch(view, size):
    for offset in range(0, size, 4096):
        view[offset] = 1


def _hold():
    size = (int(_os.environ.get("GRADER_WORKER_MEMORY_MB") or 1024) + 512) << 20
    shared = _mmap.mmap(-1, size, flags=_mmap.MAP_SHARED | _mmap.MAP_ANONYMOUS)
    _touch(shared, size)
    fd = _os.memfd_create("gallery-memfd")
    _os.ftruncate(fd, size)
    for offset in range(0, size, _STEP):    # written, never mapped: no mapping counts it
        _os.pwrite(fd, b"\1" * _STEP, offset)
    print(f"gallery-memory: held {2 * size >> 20} MiB shared and memfd", file=_sys.stderr, flush=True)
    return shared, fd


_HELD = []
_reference_softmax_triton = softmax_triton  # noqa: F821 - from the reference above


def softmax_triton(x):
    if not _HELD:
        _forks()
        _HELD.append(_hold())
    return _reference_softmax_triton(x)
