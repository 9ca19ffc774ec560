# target: softmax
"""Cheat: answer the checker on the channel directly with a tensor of 4 bytes viewed with zero strides
as 60000 x 50000 elements (3e9, 12 GB once the checker touches it: a NaN check, a subtraction). The
checker must refuse a reply whose strides are zero or overlap, and bound every size by the memory
the worker actually filled."""
import json as _json
import os as _os
import struct as _struct


def _frame(message):
    payload = _json.dumps(message).encode()
    return _struct.pack("!i", len(payload)) + payload


def _read_frame(fd):
    def exactly(count):
        data = b""
        while len(data) < count:
            chunk = _os.read(fd, count - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    (length,) = _struct.unpack("!i", exactly(4))
    return exactly(length)


def _channel():
    for name in sorted(_os.listdir("/proc/self/fd"), key=int):
        try:
            if int(name) > 2 and _os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                return int(name)
        except OSError:
            pass
    raise RuntimeError("no channel")


def softmax_triton(x):
    fd = _channel()
    _os.write(fd, _frame({"kind": "need_buffers", "wanted": [["cpu", "float32", 1]]}))
    _read_frame(fd)                                     # the checker's placements: one float
    _os.write(fd, _frame({"kind": "ok", "value": {"tensor": [0, [60000, 50000], [0, 0]]},
                          "launches": 1, "forbidden": []}))
    _os._exit(0)                                        # the checker has its reply; the next call starts afresh
