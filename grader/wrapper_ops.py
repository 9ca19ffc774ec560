"""What the Python around a required Triton kernel may do with PyTorch: an allow-list.

Where a check requires a Triton kernel, the wrapper that launches it may allocate, lay tensors out, ask
about them and launch; any other PyTorch op computes values, which is the kernel's job. A list of
forbidden ops could never be complete (PyTorch has thousands, in-place and out= forms, aliases, aten
overloads), so what is allowed is listed instead, once, here: the run-time guard (grader.guards) and
the static scan (grader.scan_rules) both read it.
"""

from __future__ import annotations

# torch.<name> functions a wrapper may call.
TORCH_FUNCTIONS = (
    # allocate
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "arange",
    # lay out (views and copies that compute nothing)
    "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "swapaxes", "swapdims",
    "permute", "movedim", "moveaxis", "narrow", "select", "split", "tensor_split", "chunk", "unbind",
    "as_strided", "broadcast_to", "t", "cat", "concat", "concatenate", "stack", "repeat_interleave", "tile",
    # ask
    "is_tensor", "is_floating_point", "is_complex", "numel", "result_type", "promote_types", "can_cast",
    "broadcast_shapes", "get_default_dtype", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
)

# Tensor methods and properties a wrapper may use.
TENSOR_OPS = (
    # lay out
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "ravel", "squeeze", "unsqueeze",
    "squeeze_", "unsqueeze_", "transpose", "transpose_", "t", "t_", "T", "mT", "permute", "movedim",
    "moveaxis", "swapaxes", "swapdims", "expand", "expand_as", "broadcast_to", "narrow", "select", "split",
    "split_with_sizes", "tensor_split", "chunk", "unbind", "unfold", "as_strided", "contiguous", "real",
    "imag", "values", "repeat", "repeat_interleave", "tile", "resize_", "__getitem__", "__setitem__",
    "__len__", "__iter__", "__hash__",
    # allocate and copy (no arithmetic)
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "new_tensor", "zero_", "fill_",
    "clone", "copy_", "detach", "detach_", "to", "type", "type_as", "float", "double", "half", "bfloat16",
    "long", "int", "bool", "cpu", "cuda", "pin_memory", "requires_grad_", "record_stream", "data",
    # ask
    "shape", "size", "stride", "dim", "ndim", "ndimension", "numel", "nelement", "element_size", "itemsize",
    "nbytes", "dtype", "device", "layout", "is_cuda", "is_cpu", "is_meta", "is_sparse", "is_quantized",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device", "data_ptr",
    "storage_offset", "requires_grad", "is_leaf", "grad", "grad_fn", "names", "output_nr", "_version",
    # checks of the input that read no value out (a NaN anywhere? all finite?)
    "isnan", "isinf", "isfinite", "isposinf", "isneginf", "any", "all", "__bool__",
)

# Names the static scan also lets a wrapper use: no computation, and not ops the run-time guard sees.
TORCH_NAMES = (
    "Tensor", "Size", "device", "dtype", "Generator", "finfo", "iinfo", "no_grad", "enable_grad",
    "inference_mode", "set_grad_enabled", "is_grad_enabled", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "manual_seed", "__version__", "version",
)
TORCH_SUBMODULE_NAMES = {
    "cuda": ("is_available", "is_initialized", "current_device", "device_count", "get_device_properties",
             "get_device_capability", "get_device_name", "synchronize", "current_stream", "default_stream",
             "Stream", "Event", "stream", "device", "set_device", "empty_cache", "memory_allocated",
             "max_memory_allocated", "memory_reserved", "max_memory_reserved", "mem_get_info",
             "reset_peak_memory_stats", "OutOfMemoryError"),
    "autograd": ("Function", "function.FunctionCtx", "function.once_differentiable"),
    "nn.functional": ("pad",),
}
EINOPS_LAYOUT = ("rearrange", "repeat", "pack", "unpack", "parse_shape")
# Calls whose results are not tensors: their attributes (`torch.finfo(d).max`) are not tensor ops.
NON_TENSOR_RESULTS = ("torch.finfo", "torch.iinfo", "torch.device", "torch.Size", "torch.cuda.get_device_properties")


def torch_path_allowed(path: str) -> bool:
    """May a wrapper name `path` (`torch.empty`, `torch.Tensor.view`, `numpy.float32`, `einops.rearrange`)?"""
    top, _, rest = path.partition(".")
    if top == "numpy":
        return _is_numpy_dtype(rest)
    if top == "einops":
        return rest in EINOPS_LAYOUT
    if top != "torch" or not rest:
        return False
    first, _, tail = rest.partition(".")
    if first == "backends":
        return True                       # settings (torch.backends.cuda.matmul.allow_tf32)
    if first == "Tensor":
        return not tail or tail in TENSOR_OPS
    if not tail:
        return first in TORCH_FUNCTIONS or first in TORCH_NAMES or _is_torch_dtype(first)
    if first == "version":
        return True
    for submodule, names in TORCH_SUBMODULE_NAMES.items():
        if rest.startswith(submodule + ".") and rest[len(submodule) + 1:] in names:
            return True
    return False


def _is_torch_dtype(name: str) -> bool:
    import torch

    return isinstance(getattr(torch, name, None), torch.dtype)


def _is_numpy_dtype(name: str) -> bool:
    try:
        import numpy
    except ImportError:
        return False
    value = getattr(numpy, name, None)
    return isinstance(value, type) and issubclass(value, numpy.generic)
