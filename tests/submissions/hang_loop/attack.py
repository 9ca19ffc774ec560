# target: softmax
"""Fault: an infinite Python loop in one function (online_softmax). Only the check calling it is lost:
the worker is stopped after the per-call timeout and the next call gets a fresh worker."""


def online_softmax(x, block_size):
    while True:
        pass
