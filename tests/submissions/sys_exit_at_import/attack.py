# target: softmax
"""Fault: sys.exit(0) at import. SystemExit is an exception, not an exit, inside the worker: each
softmax call reports it as the student's error."""
import sys

sys.exit(0)
