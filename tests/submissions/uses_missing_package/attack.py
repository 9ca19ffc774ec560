# target: softmax
"""Fault: softmax_triton calls a package outside the allowed list: only the checks that call it are lost,
each with a message naming the package and the allowed imports; the online softmax keeps its points."""
import gallery_package_that_does_not_exist as _fast


def softmax_triton(x):
    return _fast.normalize_rows(x)
