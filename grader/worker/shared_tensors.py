"""Tensors across the worker boundary, both ways, with nothing the worker wrote ever unpickled here.

The checker lays out all shared memory itself and only ever reads raw bytes back:
- host tensors go through two memory files (memfd) the checker creates before the worker starts and
  hands over by descriptor: one for arguments (the checker writes, the worker reads), one for replies
  (the worker writes into ranges the checker assigned, the checker reads them with `pread`, never
  mapping them, so a worker that shrinks the file cannot crash the checker);
- CUDA tensors go through CUDA IPC handles of memory the checker allocated and exported; the worker
  opens them, never the other way round. An argument is a checker-owned copy; a reply is copied by
  the worker into a buffer the checker allocated on request, and cloned by the checker afterwards.
Every tensor crosses as its storage span (the elements its view reaches) plus shape and strides, so
non-contiguous layouts arrive as they were. The metadata of replies travels as JSON (grader.worker.channel).
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import pickle
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions: the checker creates the memory files before it spawns the
# worker, which the plugin does before this process imports torch, so both imports overlap.
MAX_DIMS = 16
MAX_REPLY_HOST_BYTES = int(os.environ.get("GRADER_MAX_REPLY_BYTES", str(16 << 30)))
_DEVICE = re.compile(r"cpu|cuda(:\d{1,2})?")


@functools.cache
def dtypes() -> dict:
    """torch's dtypes by name ("float32", "bfloat16", ...): the only dtypes a reply may name."""
    import torch

    return {str(value).removeprefix("torch."): value for value in vars(torch).values()
            if isinstance(value, torch.dtype)}


class TransportError(Exception):
    """A tensor description from the worker that does not fit what the checker laid out."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def span(shape, stride) -> int:
    """Elements of storage a view with `shape` and `stride` reaches (from its first element)."""
    if any(size == 0 for size in shape):
        return 0
    return 1 + sum((size - 1) * step for size, step in zip(shape, stride))


def overlaps(shape, stride) -> bool:
    """True unless the view's elements are distinct storage elements, by the usual test: dimensions
    longer than 1, by growing stride, each stepping past all the elements the smaller ones reach. A
    stride of 0 (an expanded tensor) overlaps. A few exotic layouts that do not overlap fail the test
    too: the worker makes whatever fails it contiguous, so only a forged reply is refused."""
    if any(size == 0 for size in shape):
        return False
    reach = 0
    for step, size in sorted((step, size) for size, step in zip(shape, stride) if size > 1):
        if step <= reach:
            return True
        reach += (size - 1) * step
    return False


def flat_span(tensor: torch.Tensor) -> torch.Tensor:
    """The storage elements `tensor` reaches, as a 1-D contiguous tensor on its device (a view)."""
    import torch

    count = span(tensor.shape, tensor.stride())
    return torch.as_strided(tensor, (count,), (1,), tensor.storage_offset())


def _address(tensor: torch.Tensor, nbytes: int):
    return (ctypes.c_char * nbytes).from_address(tensor.data_ptr())


class HostFile:
    """A memfd used with pread/pwrite only: one side writes byte ranges, the other reads them."""

    def __init__(self, fd: int):
        self.fd = fd

    @classmethod
    def create(cls, name: str) -> "HostFile":
        return cls(os.memfd_create(name, os.MFD_CLOEXEC))   # the worker gets it through pass_fds only

    def resize(self, nbytes: int) -> None:
        os.ftruncate(self.fd, 0)               # drops the previous call's pages
        os.ftruncate(self.fd, nbytes)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def write(self, offset: int, flat: torch.Tensor) -> None:
        data = flat.detach().to("cpu").contiguous()
        nbytes = data.numel() * data.element_size()
        view = memoryview(_address(data, nbytes)) if nbytes else memoryview(b"")
        done = 0
        while done < nbytes:
            done += os.pwrite(self.fd, view[done:], offset + done)

    def read(self, offset: int, count: int, dtype: torch.dtype) -> torch.Tensor:
        """`count` elements at byte `offset`, copied into a fresh tensor of this process."""
        import torch

        out = torch.empty(count, dtype=dtype)
        nbytes = count * out.element_size()
        if offset < 0 or offset + nbytes > self.size():
            raise TransportError(f"a tensor of {nbytes} bytes at {offset} lies outside the reply memory")
        view = memoryview(_address(out, nbytes)) if nbytes else memoryview(b"")
        done = 0
        while done < nbytes:
            got = os.preadv(self.fd, [view[done:]], offset + done)
            if got == 0:
                raise TransportError("the reply memory shrank while it was read")
            done += got
        return out

    def close(self) -> None:
        os.close(self.fd)


def _cuda_share(buffer: torch.Tensor) -> tuple:
    """What the worker needs to open `buffer` (a CUDA IPC handle and its metadata), for pickling."""
    from torch.multiprocessing.reductions import reduce_tensor

    return reduce_tensor(buffer)[1]


def _cuda_open(shared: tuple) -> torch.Tensor:
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    return rebuild_cuda_tensor(*shared)


# --- the checker's side ---------------------------------------------------------------------------


class CheckerTransport:
    """The checker's two memory files and the buffers of the call in flight."""

    def __init__(self):
        self.arguments = HostFile.create("grader-arguments")
        self.replies = HostFile.create("grader-replies")
        self._keep: list = []          # CUDA memory the worker may have open this call
        self._buffers: list[tuple[str, torch.dtype, int, object]] = []   # (device, dtype, count, where)

    def worker_fds(self) -> tuple[int, int]:
        return self.arguments.fd, self.replies.fd

    def dump_request(self, request) -> bytes:
        """Pickle a request for the worker, each tensor replaced by where its data was laid out."""
        import io

        import torch

        laid_out = []

        class Pickler(pickle.Pickler):
            def persistent_id(pickler, obj):  # noqa: N805 - a closure over laid_out
                if isinstance(obj, torch.Tensor):
                    return self._lay_out(obj.detach(), laid_out)
                return None

        stream = io.BytesIO()
        Pickler(stream, protocol=pickle.HIGHEST_PROTOCOL).dump(request)
        offset = 0
        sizes = [flat.numel() * flat.element_size() for flat in laid_out]
        self.arguments.resize(sum(sizes))
        for flat, nbytes in zip(laid_out, sizes):
            self.arguments.write(offset, flat)
            offset += nbytes
        return stream.getvalue()

    def _lay_out(self, tensor: torch.Tensor, laid_out: list):
        meta = (dtype_name(tensor.dtype), tuple(tensor.shape), tuple(tensor.stride()))
        flat = flat_span(tensor)
        if tensor.device.type == "cuda":
            copy = flat.clone()     # the worker maps this copy, never the checker's own tensor
            self._keep.append(copy)
            return ("cuda", meta, _cuda_share(copy))
        offset = sum(item.numel() * item.element_size() for item in laid_out)
        laid_out.append(flat)
        return ("host", meta, offset, flat.numel())

    def allocate(self, wanted) -> list[tuple]:
        """Buffers for the reply's tensors, as the worker asked: [(device, dtype name, elements)]."""
        import torch

        self._buffers = []
        placements, offset = [], 0
        for device, dtype, count in wanted:
            if device == "cpu":
                placements.append(("host", offset))
                self._buffers.append((device, dtype, count, offset))
                offset += count * torch.empty((), dtype=dtype).element_size()
            else:
                try:
                    buffer = torch.empty(count, dtype=dtype, device=device)
                except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
                    raise TransportError(f"could not allocate a {count}-element reply buffer: {error}") from None
                self._keep.append(buffer)
                placements.append(("cuda", _cuda_share(buffer)))
                self._buffers.append((device, dtype, count, buffer))
        if offset > MAX_REPLY_HOST_BYTES:
            raise TransportError(f"the reply's tensors need {offset} bytes of host memory, more than "
                                 f"the {MAX_REPLY_HOST_BYTES} the checker accepts")
        self.replies.resize(offset)
        return placements

    def tensor(self, index, shape, stride) -> torch.Tensor:
        """A checker-owned tensor from reply buffer `index`, viewed with `shape` and `stride`."""
        if not (type(index) is int and 0 <= index < len(self._buffers)):
            raise TransportError(f"the reply names buffer {index!r}, which the checker did not allocate")
        device, dtype, count, where = self._buffers[index]
        # Distinct elements, all inside the buffer the worker filled: a view's size is then bounded by
        # memory that exists, never the worker's choice (4 bytes seen as 3e9 elements).
        if overlaps(shape, stride):
            raise TransportError(f"a reply tensor of shape {list(shape)} with overlapping strides {list(stride)} "
                                 "(zero or overlapping strides: several elements in one place); the checker "
                                 "accepts only tensors whose elements are distinct")
        if span(shape, stride) > count or math.prod(shape) > count:
            raise TransportError(f"a tensor of shape {list(shape)} and strides {list(stride)} does not fit "
                                 f"its {count}-element buffer")
        flat = self.replies.read(where, count, dtype) if device == "cpu" else where.clone()
        return flat.as_strided(tuple(shape), tuple(stride), 0)

    def end_call(self) -> None:
        """The call is over: release shared copies and buffers (the worker keeps nothing of ours)."""
        self._keep.clear()
        self._buffers = []
        self.arguments.resize(0)
        self.replies.resize(0)

    def close(self) -> None:
        self.end_call()
        self.arguments.close()
        self.replies.close()


def parse_device(text) -> str:
    import torch

    if not (type(text) is str and _DEVICE.fullmatch(text)):
        raise TransportError(f"reply buffer on device {text!r}, which the checker does not accept")
    if text.startswith("cuda") and not torch.cuda.is_available():
        raise TransportError("reply buffer on CUDA, which this checker does not have")
    return text


# --- the worker's side ----------------------------------------------------------------------------


class WorkerTransport:
    """Opens what the checker laid out; writes replies where the checker said."""

    def __init__(self, arguments_fd: int, replies_fd: int):
        self.arguments = HostFile(arguments_fd)
        self.replies = HostFile(replies_fd)

    def load_request(self, data: bytes):
        transport = self

        class Unpickler(pickle.Unpickler):
            def persistent_load(self, pid):
                return transport._rebuild(pid)

        import io

        return Unpickler(io.BytesIO(data)).load()

    def _rebuild(self, pid) -> torch.Tensor:
        kind, (dtype, shape, stride) = pid[0], pid[1]
        if kind == "cuda":
            flat = _cuda_open(pid[2])
        else:
            flat = self.arguments.read(pid[2], pid[3], dtypes()[dtype])
        return flat.as_strided(shape, stride, 0)

    @staticmethod
    def wanted(tensors) -> list[tuple[str, str, int]]:
        return [(str(t.device), dtype_name(t.dtype), span(t.shape, t.stride())) for t in tensors]

    def fill(self, placements, tensors) -> None:
        """Write each tensor's storage span where the checker placed its buffer."""
        import torch

        for placement, tensor in zip(placements, tensors):
            flat = flat_span(tensor.detach())
            if placement[0] == "host":
                self.replies.write(placement[1], flat)
            else:
                target = _cuda_open(placement[1])
                target.copy_(flat)
                del target
        if any(placement[0] == "cuda" for placement in placements):
            torch.cuda.synchronize()
