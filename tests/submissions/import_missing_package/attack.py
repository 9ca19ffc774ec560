# target: softmax
"""Fault: softmax.py imports a package that is not installed on the grading machine."""
import gallery_package_that_does_not_exist  # noqa: F401
