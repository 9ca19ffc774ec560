# target: softmax
"""Fault: softmax.py imports a package that is not installed on the grading machine (nor allowed), and
never uses it: the import binds a placeholder (grader.worker.allowed_imports), so nothing is lost."""
import gallery_package_that_does_not_exist  # noqa: F401
