# target: softmax
"""Fault: a row that saw only -inf scores ends with m = 0, l = 1 (so lse = 0) instead of m = -inf,
l = 0 (lse = -inf). Compared with rtol = 0, the bound atol + 0 * |-inf| is NaN, and a comparison with
NaN is never "above the bound": the wrong lse passed."""
_reference_update = online_softmax_update  # noqa: F821 - the reference above


def online_softmax_update(m, l, acc, scores, values=None):
    m, l, acc = _reference_update(m, l, acc, scores, values)
    unseen = l == 0
    return m.masked_fill(unseen, 0.0), l.masked_fill(unseen, 1.0), acc
