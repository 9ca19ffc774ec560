"""The checker's import path, sealed before student code runs.

pytest puts the suites' folders on `sys.path` while it collects, and `python -c` puts the working
folder there. In a graded run the hidden suite's folder is a writable disposable copy, so a student
could plant `hmac.py` there and have the checker import it the next time something imports hmac
lazily. `seal` drops every such folder once collection is over, and imports beforehand the standard
modules the checker (pytest's reporting, the plugin, torch) may otherwise import late.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

# Imported now so that no later `import x` in the checker can look for them on disk.
PRELOAD = ("hmac", "hashlib", "secrets", "json", "pickle", "random", "statistics", "difflib", "pprint",
           "textwrap", "html", "csv", "decimal", "fractions", "tempfile", "shutil", "traceback", "linecache",
           "tokenize", "inspect", "ast", "dis", "struct", "socket", "selectors", "signal", "threading",
           "queue", "uuid", "base64", "binascii", "zlib", "gzip", "copy", "io", "codecs", "encodings.idna",
           "unicodedata", "locale", "gettext", "string", "re", "fnmatch", "glob", "platform", "subprocess",
           "multiprocessing", "multiprocessing.connection", "concurrent.futures", "ctypes", "numbers",
           "operator", "functools", "itertools", "contextlib", "dataclasses", "enum", "typing", "warnings",
           "weakref", "math", "cmath", "bisect", "heapq", "array", "collections.abc", "email", "zipfile",
           "tarfile", "xml.etree.ElementTree", "pdb", "bdb", "code", "codeop", "timeit", "calendar",
           "datetime", "time", "colorsys", "numpy", "torch", "pytest", "_pytest.assertion.util", "_pytest.python_api")


def preload() -> list[str]:
    """Import PRELOAD; return the names that could not be imported (not installed here)."""
    missing = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def writable_entries(path: list[str], unsafe_roots) -> list[str]:
    """Entries of `path` that are the working folder ('' or '.') or lie inside one of `unsafe_roots`."""
    roots = [Path(root).resolve() for root in unsafe_roots if root]
    unsafe = []
    for entry in path:
        if entry in ("", "."):
            unsafe.append(entry)
            continue
        resolved = Path(entry).resolve()
        if any(resolved == root or root in resolved.parents for root in roots):
            unsafe.append(entry)
    return unsafe


def interpreter_folders() -> set[Path]:
    """The interpreter's installation and its environment (sys.prefix, the base Python's prefix): its
    standard library and site-packages, which torch and pytest import from late. A Python or a venv
    under HOME (pyenv, conda, the handout's `.venv`) keeps them; where student code could write there, it
    could rewrite the checker's torch as well, so dropping them would guard nothing."""
    import site

    folders = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, site.getusersitepackages()}
    return {Path(folder).resolve() for folder in folders if folder}


def _inside(path: Path, folders: set[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def seal(suite_folders, environ=os.environ) -> list[str]:
    """Preload, then drop from `sys.path` the working folder and everything inside the suites'
    folders, the disposable copy, TMPDIR and HOME, except the grader's tree and the interpreter's own
    library folders. Returns what was dropped."""
    preload()
    roots = [*suite_folders, environ.get("GRADER_DISPOSABLE_TESTS"), environ.get("TMPDIR"), environ.get("HOME")]
    grader_home = Path(__file__).resolve().parents[2]   # the read-only checker tree: needed, kept
    interpreter = interpreter_folders()
    dropped = [entry for entry in writable_entries(sys.path, roots)
               if entry in ("", ".") or not (Path(entry).resolve() == grader_home
                                            or _inside(Path(entry).resolve(), interpreter))]
    sys.path[:] = [entry for entry in sys.path if entry not in dropped]
    importlib.invalidate_caches()
    return dropped
