# target: softmax
"""Fault: softmax_triton dereferences NULL (a segfault kills the worker). online_softmax still works."""
import ctypes


def softmax_triton(x):
    return ctypes.string_at(0)
