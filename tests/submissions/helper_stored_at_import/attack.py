# target: softmax
"""Cheat: torch.softmax in a helper that the entry reaches only through stores made at import (an
attribute of a module-level object, and a method added to torch.Tensor, called as `x.gallery_rows()`),
run under torch._C.DisableTorchFunction so the run-time guard (a TorchFunctionMode) sees nothing."""


class _Helpers:
    pass


helpers = _Helpers()


def _rows(x):
    with torch._C.DisableTorchFunction():  # noqa: F821 - torch is imported by the reference above
        return torch.softmax(x, dim=-1)  # noqa: F821


helpers.rows = _rows
torch.Tensor.gallery_rows = _rows  # noqa: F821
_reference_softmax_triton = softmax_triton  # noqa: F821 - the reference above
_calls = []


def softmax_triton(x):
    _calls.append(1)
    _reference_softmax_triton(x[:1])  # the alibi launch
    return helpers.rows(x) if len(_calls) % 2 else x.gallery_rows()
