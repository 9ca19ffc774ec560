"""Why a tensor is wrong: the fingerprints of known mistakes, checked when a comparison fails.

A classic bug leaves a recognisable result. Softmax without subtracting the max turns exp(1000) into
inf and the output into NaN; an online softmax that forgets to rescale the old sum gives 2.5 where the
lecture's example gives 2; a loss scaler that never unscales makes every update S times too large.
A test lists the signatures that fit what it checks; `explain` returns the first that matches, and the
comparison helpers (grader.numerics) add it to the failure message as "Likely cause: ...".

A signature is a function (actual, expected) -> bool, built here, paired with the cause to print.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Signature = tuple[Callable[[torch.Tensor, torch.Tensor], bool], str]


def non_finite(cause: str) -> Signature:
    """Matches when the result has inf/NaN where the expected value is finite."""
    def test(actual, expected):
        return bool((~torch.isfinite(actual.double()) & torch.isfinite(expected.double())).any())
    return test, cause


def scaled_by(factor: float, cause: str, *, rel: float = 1e-3) -> Signature:
    """Matches when the result is `factor` times the expected value (where that value is not ~0)."""
    def test(actual, expected):
        actual, expected = actual.double(), expected.double()
        big = expected.abs() > expected.abs().max() * 1e-3
        if not bool(big.any()) or not bool(torch.isfinite(actual).all()):
            return False
        return bool(torch.allclose(actual[big], factor * expected[big], rtol=rel, atol=0.0))
    return test, cause


def equals(values, cause: str, *, atol: float = 1e-5, first_only: bool = False) -> Signature:
    """Matches when every element of the result (or only its first, `first_only`) is one of the known
    wrong `values`; the lecture's worked examples have exact wrong answers (2.6 for a missing rescale)."""
    values = values if isinstance(values, (tuple, list)) else (values,)

    def test(actual, expected):
        got = actual.double().reshape(-1)[:1] if first_only else actual.double()
        return bool(torch.isfinite(got).all()) and any(
            bool(torch.allclose(got, torch.full_like(got, float(wrong)), rtol=0.0, atol=atol)) for wrong in values)
    return test, cause


def explain(actual: torch.Tensor, expected: torch.Tensor, signatures: Sequence[Signature]) -> str | None:
    """The cause of the first signature `actual` matches, else None."""
    for test, cause in signatures:
        if test(actual, expected):
            return cause
    return None
