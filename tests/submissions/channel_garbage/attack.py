# target: softmax
"""Cheat/fault: before answering, write garbage (a well-framed message that is not a valid pickle,
then a raw pickle of os.system) into every socket and pipe the worker holds, which includes its own
end of the channel to the checker. The checker must refuse it as a failed call, never run it."""
import os as _os
import pickle as _pickle
import struct as _struct


class _RunsCode:
    def __reduce__(self):
        return _os.system, ("touch /var/tmp/gallery-escape-__TOKEN__-channel",)


def _frames():
    garbage = b"GALLERY-GARBAGE-" * 4
    hostile = _pickle.dumps(("ok", _RunsCode(), {"launches": 1, "forbidden": []}))
    return [_struct.pack("!i", len(payload)) + payload for payload in (garbage, hostile)]


_reference_softmax_triton = softmax_triton  # noqa: F821


def softmax_triton(x):
    y = _reference_softmax_triton(x)
    for name in _os.listdir("/proc/self/fd"):
        try:
            if _os.readlink(f"/proc/self/fd/{name}").startswith(("socket:", "pipe:")) and int(name) > 2:
                for frame in _frames():
                    _os.write(int(name), frame)
        except OSError:
            pass
    return y
