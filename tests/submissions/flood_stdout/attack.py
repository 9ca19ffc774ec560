# target: softmax
"""Fault: 100 MB printed to stdout by the first softmax_triton call (answers stay correct). The batch
must survive it and keep the log bounded; no points change."""
import sys

_reference_softmax_triton = softmax_triton  # noqa: F821 - defined by the reference above
_flooded = []


def softmax_triton(x):
    if not _flooded:
        _flooded.append(True)
        chunk = "flood " * 10_000 + "\n"
        for _ in range(100 * (1 << 20) // len(chunk)):
            sys.stdout.write(chunk)
        sys.stdout.flush()
    return _reference_softmax_triton(x)
