"""The channel between the checker and the worker: framing, the named messages, and their one reader.

Checker to worker, the requests (`Setup`, `Call`, `Buffers`, `Resume`) are pickled: the worker runs student code
anyway, so nothing it unpickles is a new risk. Worker to checker, every message is JSON that
`read_reply` turns into one of `Ready`, `NeedBuffers`, `Compiling`, `Compiled`, `Ok`, `NotDone`, `Failed` or
`Refused`, checking
each field's type: no byte the worker sends is ever unpickled or run here, and errors come back as
text, never as objects. Reply tensors are raw bytes in memory the checker laid out
(grader.worker.shared_tensors); the JSON only says which buffer, shape and strides. What comes back is
plain values and exact `torch.Tensor`s the checker owns.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass

from grader.worker.shared_tensors import MAX_DIMS, TransportError, dtype_name, dtypes, overlaps, parse_device

FRAME = struct.Struct("!i")
MAX_REPLY_FRAME = 64 << 20        # bytes of JSON per reply: values and tensor metadata, not tensor data
MAX_DEPTH = 8
MAX_TEXT = 8000                   # characters kept of a message or traceback from the worker
MAX_COMPILE_NOTICES = 1000        # Triton compiles one call may announce: far above any autotuning sweep
_CONTAINERS = {"list": list, "tuple": tuple}


class ChannelError(Exception):
    """The worker's reply was not something the checker accepts (forged, tampered or exotic)."""


# --- framing: a 4-byte length, then the payload -----------------------------------------------------


def send_frame(sock: socket.socket, data: bytes, timeout: float | None = None) -> None:
    """One frame; with `timeout`, TimeoutError unless the other end took it all within that many seconds
    (the checker's sends: a worker that stops reading must not stall it)."""
    if timeout is None:
        sock.sendall(FRAME.pack(len(data)))
        sock.sendall(data)
        return
    sock.settimeout(timeout)
    try:
        sock.sendall(FRAME.pack(len(data)) + data)
    finally:
        sock.settimeout(None)


def recv_frame(sock: socket.socket, limit: int | None = None) -> bytes:
    """One frame; EOFError when the other end is gone; ChannelError when the length is absurd."""
    (length,) = FRAME.unpack(_recv_exactly(sock, FRAME.size))
    if length < 0 or (limit is not None and length > limit):
        raise ChannelError(f"unreadable reply from the worker: a frame of {length} bytes")
    return _recv_exactly(sock, length)


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the channel closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# --- checker to worker (pickled by the checker) -------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    spec: object                  # grader.worker.modules.ImplSpec
    extra_sys_path: tuple
    scratch: str | None
    compile_notices: bool = False  # say when a Triton compile starts and ends (a GPU shared by submissions)
    cuda_context: bool = False     # open the CUDA context before "ready", before any student code runs


@dataclass(frozen=True)
class Call:
    kind: str                     # "call": target = (module, function); "run": target(modules, ...)
    target: object
    args: tuple
    kwargs: dict
    forbid: tuple
    require_triton: bool


@dataclass(frozen=True)
class Buffers:
    placements: list              # where each asked-for reply tensor goes (grader.worker.shared_tensors)


@dataclass(frozen=True)
class Resume:                     # after `Compiled`: the checker holds the GPU lock again, launch on
    pass


# --- worker to checker (JSON, read by `read_reply` only) ------------------------------------------------


@dataclass(frozen=True)
class Ready:
    pass


@dataclass(frozen=True)
class NeedBuffers:
    wanted: list                  # [(device, dtype, elements)], one per tensor of the coming reply


@dataclass(frozen=True)
class Compiling:                  # a Triton compile starts: CPU work, the GPU lock may go to others
    pass


@dataclass(frozen=True)
class Compiled:                   # it ended: the worker waits for `Resume` before launching anything
    pass


@dataclass(frozen=True)
class Ok:
    value: object
    launches: int
    forbidden: list


@dataclass(frozen=True)
class NotDone:                    # the student's code raised NotImplementedError
    message: str
    traceback: str


@dataclass(frozen=True)
class Failed:                     # the student's code raised anything else
    type_name: str
    message: str
    traceback: str
    cuda_broken: bool             # the worker's CUDA context is gone: it exits after this reply


@dataclass(frozen=True)
class Refused:                    # the worker could not express the result (an object, a subclass)
    message: str


def dump_reply(kind: str, **fields) -> bytes:
    """Worker side: one JSON message."""
    return json.dumps({"kind": kind, **fields}, allow_nan=True).encode()


def encode_value(value, tensors: list, depth: int = 0):
    """Worker side: `value` as JSON-able data; its tensors are appended to `tensors` for the buffers."""
    import torch

    if depth > MAX_DEPTH:
        raise ChannelError("reply nested too deeply")
    if type(value) is torch.Tensor:
        if overlaps(value.shape, value.stride()):   # an expanded tensor: the checker takes distinct elements only
            value = value.contiguous()
        tensors.append(value)
        return {"tensor": [len(tensors) - 1, list(value.shape), list(value.stride())]}
    if isinstance(value, torch.Tensor):
        raise ChannelError(f"returned a {type(value).__name__}, a tensor subclass; return a plain tensor")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is torch.dtype:
        return {"dtype": dtype_name(value)}
    if type(value) is torch.device:
        return {"device": str(value)}
    if type(value) is torch.Size:
        return {"size": [int(v) for v in value]}
    if type(value) in (tuple, list):
        return {type(value).__name__: [encode_value(item, tensors, depth + 1) for item in value]}
    if type(value) is dict:
        if not all(type(key) is str for key in value):
            raise ChannelError("returned a dict with non-string keys")
        return {"dict": [[key, encode_value(item, tensors, depth + 1)] for key, item in value.items()]}
    raise ChannelError(f"returned a {type(value).__name__}; only tensors, numbers, strings, "
                       "tuples, lists and dicts of those can be checked")


def read_reply(data: bytes, transport=None):
    """Checker side, the one reader: a message object, or ChannelError. `transport`
    (grader.worker.shared_tensors.CheckerTransport) turns tensor references into checker-owned tensors."""
    try:
        message = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # not JSON: garbage, truncated or hostile bytes
        raise ChannelError(f"unreadable reply from the worker: {type(error).__name__}") from None
    if type(message) is not dict or type(message.get("kind")) is not str:
        raise ChannelError("unreadable reply from the worker: not a message")
    try:
        return _READERS.get(message["kind"], _unknown)(message, transport)
    except TransportError as error:
        raise ChannelError(str(error)) from None
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as error:
        raise ChannelError(f"malformed reply from the worker ({message['kind'][:40]}: "
                           f"{type(error).__name__})") from None


def _unknown(message, transport):
    raise ChannelError(f"malformed reply from the worker (kind {message['kind'][:40]!r})")


def _text(value) -> str:
    if type(value) is not str:
        raise TypeError("text expected")
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + " [...]"


def _count(value) -> int:
    if type(value) is not int or value < 0:
        raise ValueError("a count must be a non-negative integer")
    return value


def _need_buffers(message, transport):
    wanted = message["wanted"]
    if type(wanted) is not list:
        raise TypeError("wanted")
    return NeedBuffers([(parse_device(device), dtypes()[dtype], _count(count))
                        for device, dtype, count in wanted])


def _ok(message, transport):
    forbidden = message["forbidden"]
    if type(forbidden) is not list:
        raise TypeError("forbidden")
    return Ok(_decode(message["value"], transport, 0), _count(message["launches"]),
              [_text(name)[:100] for name in forbidden])


def _failed(message, transport):
    if type(message["cuda_broken"]) is not bool:
        raise TypeError("cuda_broken")
    return Failed(_text(message["type_name"])[:200], _text(message["message"]), _text(message["traceback"]),
                  message["cuda_broken"])


_READERS = {
    "ready": lambda message, transport: Ready(),
    "need_buffers": _need_buffers,
    "compiling": lambda message, transport: Compiling(),
    "compiled": lambda message, transport: Compiled(),
    "ok": _ok,
    "not_done": lambda message, transport: NotDone(_text(message["message"]), _text(message["traceback"])),
    "failed": _failed,
    "refused": lambda message, transport: Refused(_text(message["message"])),
}


def _decode(node, transport, depth: int):
    import torch

    if depth > MAX_DEPTH:
        raise ChannelError("reply nested too deeply")
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is not dict or len(node) != 1:
        raise ChannelError("malformed reply from the worker (a value that is not tagged)")
    (tag, body), = node.items()
    if tag in _CONTAINERS:
        if type(body) is not list:
            raise TypeError(tag)
        return _CONTAINERS[tag](_decode(item, transport, depth + 1) for item in body)
    if tag == "dict":
        if type(body) is not list:
            raise TypeError(tag)
        return {_text(key): _decode(item, transport, depth + 1) for key, item in body}
    if tag == "dtype":
        return dtypes()[body]
    if tag == "device":
        return torch.device(parse_device(body))
    if tag == "size":
        return torch.Size(_count(item) for item in body)
    if tag == "tensor":
        if transport is None:
            raise ChannelError("a tensor in a reply that cannot carry one")
        index, shape, stride = body
        if type(shape) is not list or type(stride) is not list or len(shape) != len(stride) \
                or len(shape) > MAX_DIMS:
            raise TypeError("tensor layout")
        return transport.tensor(index, [_count(s) for s in shape], [_count(s) for s in stride])
    raise ChannelError(f"malformed reply from the worker (a value tagged {tag[:40]!r})")
