"""Operations Triton's CPU interpreter cannot run, though a GPU runs them: a limit of the machine, never
the student's failure. A test that hits one is "not run here", with the reason; the grading GPU runs it.

The interpreter wraps whatever a kernel raises in an InterpreterError holding `repr()` of the original,
so the fingerprints below are that repr: only errors the interpreter itself raises for an operation it
lacks, never one Triton raises on a GPU too (`atomic_max does not support fp16` is Triton's own rule).
The write-up's list of the interpreter's limits is `LIMITS`, so the two cannot drift apart.
"""

from __future__ import annotations

import re

LIMITS = (
    (re.compile(r"ValueError\('Unsupported data type'\)|^Unsupported data type$"),
     "atomic operations on some dtypes (tl.atomic_add on bfloat16, tl.atomic_xchg on float32, ...)"),
    (re.compile(r"extern_elementwise not supported in interpreter mode"),
     "extern functions called through tl.extern_elementwise"),
    (re.compile(r"inline_asm not supported in interpreter mode"),
     "inline assembly (tl.inline_asm_elementwise)"),
)
INTERPRETER_ERROR = "InterpreterError"


def interpreter_limit(type_name: str, message: str) -> str | None:
    """What the interpreter cannot do, when an error of `type_name` with `message` says it hit that."""
    if type_name not in (INTERPRETER_ERROR, "ValueError", "NotImplementedError"):
        return None
    for pattern, what in LIMITS:
        if pattern.search(message or ""):
            return what
    return None


def limit_in_chain(error: BaseException | None) -> str | None:
    """`interpreter_limit` of `error` or of an error it was raised from (an in-process run's exception)."""
    seen = set()
    while error is not None and id(error) not in seen:
        what = interpreter_limit(type(error).__name__, str(error))
        if what is not None and _raised_in_interpreter(error):
            return what
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _raised_in_interpreter(error: BaseException) -> bool:
    """The InterpreterError itself, or an error from Triton's own interpreter code (its last frame)."""
    if type(error).__name__ == INTERPRETER_ERROR:
        return True
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and "triton" in frame.tb_frame.f_code.co_filename


def not_run_reason(what: str, detail: str) -> str:
    return (f"not run here: Triton's CPU interpreter cannot run {what} ({detail.strip()[:200]}); a GPU runs "
            "it, so this check counts only where it can run (the grading GPU)")
