# target: softmax
"""Cheat: flood the checker with 'compiled' notices it never asked for (this run shares no GPU, so the
worker was told to send none), and never read its answers. A checker that answers each with a blocking
send, outside the call's deadline, fills the worker's unread socket and stalls until the submission's
whole wall-clock budget is gone. Notices must be refused unless asked for, and every send bounded."""
import os as _os
import struct as _struct

_COMPILED = b'{"kind": "compiled"}'
_FRAME = _struct.pack("!i", len(_COMPILED)) + _COMPILED


def _sockets():
    for name in _os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2 and _os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                yield int(name)
        except OSError:
            pass


def softmax_triton(x):
    for fd in list(_sockets()):
        try:
            for _ in range(200_000):
                _os.write(fd, _FRAME)
        except OSError:
            pass
    _os._exit(0)
