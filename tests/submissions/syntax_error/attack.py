# target: softmax
"""Fault: softmax.py does not parse."""


def softmax_triton(x:
    return x
