"""Which exceptions in the checker are the student's: those raised while judging a value their code returned.

A test calls the student's code, gets a value back and judges it. When the judging itself raises
(`math.isfinite` on a 4000-digit int, `result["key"]` on the str returned where a dict was expected,
`o, lse = ...` on a single tensor), the test did not fail an assertion, yet the fault is the value's:
it is a failed test for the student, never a harness error that withholds the grade.

The impl records each value it hands back (`ReturnedValues.record`, with the caller's frame and the
instruction that made the call). After a test raises, `culprit` walks the traceback's frames of
checker code (tests and the grader, not libraries) and reads each one's failing expression from its
bytecode, whose positions survive even when the source file is gone (a hidden test's, after
collection): the instruction that raised, and the instructions inside its source span that computed
its operands. The exception is the student's when one of those operands is a returned value (or a
part of one): a local bound to it, or the very call through the impl that returned it. Values
derived from a returned one (`out.float()`) are new objects and do not count; an expression that
touches only the checker's own values (a bug in a test's reference maths) stays a harness error.
"""

from __future__ import annotations

import collections
import dis
import os
import sys
from types import CodeType, FrameType, TracebackType

KEPT = 8                     # latest returned values remembered per test (perf loops return thousands)
HOLD_BYTES = 16 << 20        # a value holding more tensor data is remembered weakly: never kept alive
MAX_PARTS = 10_000           # parts of one returned value looked into (a long list of tensors)
_LOADS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_NAME", "LOAD_GLOBAL"}
_CALLS = {"CALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_EX", "CALL_FUNCTION_KW"}
_GRADER = os.path.dirname(os.path.realpath(__file__))


class ReturnedValues:
    """The values the student's code returned during the current test, and where each call was made."""

    def __init__(self):
        self._values: collections.deque = collections.deque(maxlen=KEPT)

    def clear(self) -> None:
        self._values.clear()

    def record(self, value, caller: FrameType | None) -> None:
        where = (id(caller), caller.f_code, caller.f_lasti) if caller is not None else None
        if _tensor_bytes(value) > HOLD_BYTES:      # a perf check's outputs must be freed as they were
            value = _Weakly(value)
        self._values.append((value, where))

    def culprit(self, traceback: TracebackType | None, checker_files=()) -> tuple[bool, object]:
        """(True, the returned value) when the exception of `traceback` was raised while checker code
        judged a value the student returned; (False, None) otherwise."""
        values = [(_live(value), where) for value, where in self._values]
        values = [(value, where) for value, where in values if value is not _MISSING]
        if not values:
            return False, None
        parts = _parts([value for value, _ in values])
        calls = {where: value for value, where in values if where is not None}
        for tb in reversed(list(_walk(traceback))):
            frame = tb.tb_frame
            if not _is_checker(frame.f_code.co_filename, checker_files):
                continue
            names, call_offsets = _operands(frame.f_code, tb.tb_lasti)
            for offset in call_offsets:
                if (id(frame), frame.f_code, offset) in calls:
                    return True, calls[(id(frame), frame.f_code, offset)]
            for name in names:
                value = frame.f_locals.get(name, _MISSING)
                if value is not _MISSING and id(value) in parts and _distinct(value):
                    return True, value
        return False, None


class _Weakly:
    """A returned value too large to keep alive: weak references to its tensors (a lone tensor stands for
    the whole value; the containers of a large value are not looked into)."""

    def __init__(self, value):
        import weakref

        self.refs = [weakref.ref(part) for part in _walk_parts([value]) if _is_tensor(part)]
        self.lone = _is_tensor(value)


def _live(value):
    if not isinstance(value, _Weakly):
        return value
    tensors = [ref() for ref in value.refs]
    tensors = [tensor for tensor in tensors if tensor is not None]
    if value.lone:
        return tensors[0] if tensors else _MISSING
    return tuple(tensors) if tensors else _MISSING


def _is_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _tensor_bytes(value) -> int:
    total = 0
    for part in _walk_parts([value]):
        if _is_tensor(part):
            total += part.numel() * part.element_size()
    return total


_MISSING = object()


def caller_outside() -> FrameType | None:
    """The innermost frame on the stack outside the module of the function that asks (the impl's)."""
    frame = sys._getframe(1)
    filename = frame.f_code.co_filename
    while frame is not None and frame.f_code.co_filename == filename:
        frame = frame.f_back
    return frame


def describe(value, limit: int = 80) -> str:
    """"a str ('abc...')": the returned value's type and the start of its repr, whatever it is."""
    noun = type(value).__name__
    article = "an" if noun[:1].lower() in "aeiou" else "a"
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an int of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still described by its type
        return f"{article} {noun}"
    return f"{article} {noun} ({text if len(text) <= limit else text[:limit] + '...'})"


def _walk(traceback):
    while traceback is not None:
        yield traceback
        traceback = traceback.tb_next


def _is_checker(filename: str, checker_files) -> bool:
    path = os.path.realpath(filename)
    return path.startswith(_GRADER + os.sep) or any(path.startswith(root) for root in checker_files)


def _distinct(value) -> bool:
    """Only values that are objects of their own: None, bools, small ints, one-character strings and
    torch's dtypes are shared by everyone, so a checker's `dim = 1` is never the student's 1."""
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -5 <= value <= 256
    if isinstance(value, (str, bytes, tuple)):
        return len(value) > 1 or isinstance(value, tuple) and len(value) == 1
    return isinstance(value, (float, complex, list, dict, set)) or _is_tensor(value)


def _walk_parts(values):
    """The values and everything inside their lists, tuples and dicts, each once (bounded)."""
    seen: set[int] = set()
    stack = list(values)
    while stack and len(seen) < MAX_PARTS:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        yield value
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())


def _parts(values) -> set[int]:
    return {id(part) for part in _walk_parts(values)}


def _operands(code: CodeType, lasti: int) -> tuple[list[str], list[int]]:
    """The names loaded and the calls made to compute the operands of the instruction at `lasti`: the
    instructions before it inside its source span, and the one right before it (the value it unpacks)."""
    instructions = [i for i in dis.get_instructions(code) if i.offset <= lasti]
    if not instructions or instructions[-1].offset != lasti:
        return [], []
    failing = instructions[-1]
    span = _span(failing)
    names, calls = [], []
    for position, instruction in enumerate(reversed(instructions[:-1])):
        if position > 0 and (span is None or not _within(_span(instruction), span)):
            break
        if instruction.opname in _LOADS:
            names.append(instruction.argval)
        elif instruction.opname in _CALLS:
            calls.append(instruction.offset)
    return names, calls


def _span(instruction):
    p = instruction.positions
    if p is None or None in (p.lineno, p.end_lineno, p.col_offset, p.end_col_offset):
        return None
    return (p.lineno, p.col_offset), (p.end_lineno, p.end_col_offset)


def _within(inner, outer) -> bool:
    return inner is not None and outer[0] <= inner[0] and inner[1] <= outer[1]
