# target: softmax
"""Fault: the online update returns a str where a tuple (m, l, acc) is expected. The test's own line
`m, l, _ = impl.softmax.online_softmax_update(...)` raises ValueError while unpacking it: an exception
in the checker, raised while judging a value the student returned. It must be that student's failed
check, not a harness error that withholds the whole grade (and is regraded on every run)."""


def online_softmax_update(m, l, acc, scores, values=None):
    return "m, l and acc"
