"""Why a number is wrong: match a wrong answer against the signatures of known mistakes.

A classic mistake leaves a fingerprint. Counting only the forward pass makes 6ND come out at exactly
1/3 of the truth; caching keys but not values halves the KV cache; rounding waves down gives
floor(n / s) instead of ceil(n / s). A test that knows these fingerprints can tell the student not
only that a number is wrong but which idea to re-read. Two kinds of signature:

- a ratio got / expected (`explain_ratio`), for mistakes that scale the answer by a fixed factor;
- a known wrong value (`explain_value`), for mistakes no ratio identifies (rounding the wrong way).

`check_value` compares and fails the test with `mismatch`'s message. This module imports nothing
from pytest, so any part of the harness can build messages with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

RATIO_TOLERANCE = 1e-6
"""Relative slack when matching a ratio or a wrong value (mistakes are exact factors, answers floats)."""


def _is_number(value) -> bool:
    return isinstance(value, (int, float, Fraction)) and not isinstance(value, bool)


def _same(a, b, rel: float) -> bool:
    if _is_number(a) and _is_number(b):
        return _close(a, b, rel) or a == b
    return _equal(a, b)


def _equal(a, b) -> bool:
    """`a == b`, total: a value whose comparison raises (or answers with no truth value) is not equal."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - the student's value decides what == does; it must never crash the check
        return False


def _close(a, b, rel: float) -> bool:
    """math.isclose for any two numbers, exact where a float would overflow (an int of 4000 digits)."""
    try:
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=0.0)
    except OverflowError:
        if not (_finite(a) and _finite(b)):
            return False
        a, b = Fraction(a), Fraction(b)
        return abs(a - b) <= Fraction(rel) * max(abs(a), abs(b))


def _finite(value) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _ratio(got, expected) -> float | None:
    """got / expected as a float (+-inf when it overflows one), None when there is no ratio."""
    if not (_is_number(got) and _is_number(expected)) or expected == 0 or not _finite(expected):
        return None
    if not _finite(got):
        return math.inf
    quotient = Fraction(got) / Fraction(expected)
    try:
        return float(quotient)
    except OverflowError:
        return math.inf if quotient > 0 else -math.inf


def explain_ratio(got, expected, signatures: Mapping[float, str], *, rel: float = RATIO_TOLERANCE) -> str | None:
    """The cause in `signatures` (ratio got/expected -> cause) that `got` matches, else None.

    None as well when either value is not a number or `expected` is 0 (no ratio then).
    """
    ratio = _ratio(got, expected)
    if ratio is None:
        return None
    for factor, cause in signatures.items():
        if math.isclose(ratio, float(factor), rel_tol=rel):
            return cause
    return None


def explain_value(got, wrong_answers: Mapping[object, str], *, rel: float = RATIO_TOLERANCE) -> str | None:
    """The cause in `wrong_answers` (known wrong value -> cause) that `got` equals, else None."""
    for wrong, cause in wrong_answers.items():
        if _same(got, wrong, rel):
            return cause
    return None


def _show(value, limit: int = 200) -> str:
    """The value as the student would write it, bounded: whatever came back, this never raises."""
    try:
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
            return f"an int of about {int(value.bit_length() * 0.30103) + 1} digits"
        if isinstance(value, bool) or not _is_number(value):
            text = repr(value)
        elif isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
            text = f"{int(value):,}"
        else:
            text = f"{float(value):.10g}"
    except Exception:  # noqa: BLE001 - a value that cannot be shown is still named by its type
        text = _a(type(value).__name__)
    return text if len(text) <= limit else f"{text[:limit]}... ({_a(type(value).__name__)} of {len(text)} characters)"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def mismatch(what: str, got, expected, *, signatures: Mapping[float, str] | None = None,
             wrong_answers: Mapping[object, str] | None = None, why: str | None = None) -> str:
    """A student-facing message: what was called, what came back, what was expected and, when a
    signature matches, the likely cause; `why` (the rule being tested) is added when nothing matches."""
    lines = [f"{what} returned {_show(got)}, expected {_show(expected)}"]
    if _is_number(got) != _is_number(expected) or isinstance(got, bool) != isinstance(expected, bool):
        lines[0] += f" ({_a(type(got).__name__)} where {_a(type(expected).__name__)} was expected)"
    ratio = _ratio(got, expected) if _finite(got) else None
    if ratio is not None:
        lines[0] += f" (got / expected = {ratio:.4g})"
    cause = explain_value(got, wrong_answers or {}) or explain_ratio(got, expected, signatures or {})
    if cause:
        lines.append(f"Likely cause: {cause}")
    elif why:
        lines.append(why)
    return "\n".join(lines)


def check_value(what: str, got, expected, *, rel: float | None = None,
                signatures: Mapping[float, str] | None = None,
                wrong_answers: Mapping[object, str] | None = None, why: str | None = None) -> None:
    """Raise AssertionError(`mismatch(...)`) unless `got` equals `expected`.

    Integers are compared exactly; floats (either side) within `rel` (default 1e-9), which only
    rounding differences pass. Strings and other values with ==. Call it with a value already
    computed (`n = impl.m.f(...)`), so the failure shows the message, not the harness's call machinery.
    """
    __tracebackhide__ = True
    both_ints = isinstance(got, int) and isinstance(expected, int)
    if _is_number(got) and _is_number(expected) and not both_ints:
        equal = _close(got, expected, 1e-9 if rel is None else rel)
    else:
        equal = type(got) is type(expected) and _equal(got, expected)   # True is not the count 1
    if not equal:
        raise AssertionError(mismatch(what, got, expected, signatures=signatures,
                                      wrong_answers=wrong_answers, why=why))
