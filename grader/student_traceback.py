"""Cut a traceback down to the frames in the student's own files.

The worker's traceback runs through the worker loop, the guards and Triton's interpreter before it
reaches the student's code; none of that helps a student find the bug, and it hides the one frame
that does. What is kept: the frames whose file is in the submission folder.
"""

from __future__ import annotations

import os
import re

_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line \d+, in .+$')


def student_frames(traceback_text: str, folder: str) -> str:
    """The student's frames of `traceback_text`, each with its source line ("" when there are none).
    The exception itself is left out: the caller's message already names it."""
    root = os.path.realpath(folder) + os.sep
    lines = traceback_text.splitlines()
    kept, keep_body, tail_start = [], False, _exception_start(lines)
    for line in lines[:tail_start]:
        frame = _FRAME.match(line)
        if frame:
            keep_body = os.path.realpath(frame.group("path")).startswith(root)
            if keep_body:
                kept.append(line)
        elif keep_body and line.startswith("    "):
            kept.append(line)
    if not kept:
        return ""
    return "\n".join(["Traceback (your code only):", *kept])


def _exception_start(lines: list[str]) -> int:
    """Index of the last traceback's closing exception lines (the first unindented line after a frame)."""
    start = len(lines)
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if _FRAME.match(line) or line.startswith("    "):
            break
        start = index
    return start
