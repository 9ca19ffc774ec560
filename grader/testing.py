"""What test files import: comparison helpers, input factories, guards' op sets, error expectations."""

from __future__ import annotations

import contextlib
import re

import pytest

from grader.guards import ATTENTION_OPS, MATMUL_OPS, SOFTMAX_OPS
from grader.impl import StudentCodeError
from grader.numerics import GRADIENT_FACTOR, OUTPUT_FACTOR, assert_close, assert_close_lowp, max_abs_error, randn

__all__ = ["ATTENTION_OPS", "MATMUL_OPS", "SOFTMAX_OPS", "GRADIENT_FACTOR", "OUTPUT_FACTOR",
           "assert_close", "assert_close_lowp", "max_abs_error", "randn", "raises_from_student"]


@contextlib.contextmanager
def raises_from_student(expected: type[BaseException], match: str | None = None):
    """Expect the student's code to raise `expected` (in-process or from the worker alike)."""
    try:
        yield
    except StudentCodeError as error:
        names = {cls.__name__ for cls in expected.__mro__}
        if error.type_name not in names and not _is_subclass_name(error.type_name, expected):
            pytest.fail(f"expected {expected.__name__}, your code raised {error.type_name}: {error.message}",
                        pytrace=False)
        _check_match(error.message, match, expected)
    except NotImplementedError:
        raise
    except expected as error:
        _check_match(str(error), match, expected)
    except Exception as error:  # noqa: BLE001 - report what was raised instead
        pytest.fail(f"expected {expected.__name__}, your code raised {type(error).__name__}: {error}",
                    pytrace=False)
    else:
        pytest.fail(f"expected {expected.__name__} to be raised, but the call returned normally",
                    pytrace=False)


def _is_subclass_name(type_name: str, expected) -> bool:
    return any(cls.__name__ == type_name for cls in _all_subclasses(expected))


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _check_match(message: str, match: str | None, expected) -> None:
    if match is not None and not re.search(match, message):
        pytest.fail(f"{expected.__name__} raised, but its message {message!r} does not match {match!r}",
                    pytrace=False)
