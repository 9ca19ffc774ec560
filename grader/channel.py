"""The worker-to-checker channel: what the checker accepts back from the process running student code.

Unpickling runs code named by the pickle, so an ordinary `pickle.loads` of the worker's reply would let
student code execute inside the checker. `load_reply` only resolves the globals that PyTorch's
shared-memory and CUDA-IPC tensor transport needs, then `validate` admits plain values and exact
`torch.Tensor`s only (no subclasses that could lie in comparisons), cloned so the checker owns them.
"""

from __future__ import annotations

import io
import pickle

import torch

# (module, name) pairs a reply may reference: torch's tensor/storage rebuild functions and value types.
_ALLOWED_GLOBALS = {
    ("torch.multiprocessing.reductions", name) for name in (
        "rebuild_tensor", "rebuild_typed_storage", "rebuild_typed_storage_child", "rebuild_storage_fd",
        "rebuild_storage_filename", "rebuild_storage_empty", "rebuild_cuda_tensor", "rebuild_event",
        "rebuild_nested_tensor")
} | {
    ("torch.storage", "UntypedStorage"), ("torch.storage", "TypedStorage"), ("torch", "Tensor"),
    ("torch", "Size"), ("torch", "device"), ("multiprocessing.resource_sharer", "DupFd"),
    ("torch._utils", "_rebuild_tensor_v2"), ("collections", "OrderedDict"),
}
_PLAIN = (str, int, float, bool, type(None), torch.dtype, torch.device)
MAX_DEPTH = 8


class ChannelError(Exception):
    """The worker's reply was not something the checker accepts (forged, tampered or exotic)."""


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise ChannelError(f"reply references {module}.{name}, which the checker does not accept")


def load_reply(data: bytes):
    """Unpickle a worker reply, refusing any global outside the tensor-transport allow-list."""
    try:
        return _RestrictedUnpickler(io.BytesIO(data)).load()
    except ChannelError:
        raise
    except Exception as error:  # truncated, corrupted or hostile bytes
        raise ChannelError(f"unreadable reply from the worker: {type(error).__name__}: {error}") from None


def validate(value, depth: int = 0):
    """Return a checker-owned copy of `value`, or raise ChannelError if it holds anything exotic."""
    if depth > MAX_DEPTH:
        raise ChannelError("reply nested too deeply")
    if type(value) is torch.Tensor:
        return value.detach().clone()
    if isinstance(value, torch.Tensor):
        raise ChannelError(f"returned a {type(value).__name__}, a tensor subclass; return a plain tensor")
    if type(value) in _PLAIN:
        return value
    if type(value) is torch.Size:
        return torch.Size(int(v) for v in value)
    if type(value) in (tuple, list):
        return type(value)(validate(item, depth + 1) for item in value)
    if type(value) is dict:
        if not all(type(key) is str for key in value):
            raise ChannelError("returned a dict with non-string keys")
        return {key: validate(item, depth + 1) for key, item in value.items()}
    raise ChannelError(f"returned a {type(value).__name__}; only tensors, numbers, strings, "
                       "tuples, lists and dicts of those can be checked")
