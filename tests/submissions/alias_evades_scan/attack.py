# target: softmax
"""Cheat: torch.softmax under another name (a module-level alias the static scan does not follow),
without touching the guards. The run-time guard in the worker still sees torch.softmax being called."""
from torch import softmax as _rowwise


def softmax_triton(x):
    return _rowwise(x, dim=-1)
