"""Fresh values for every timed call: each floating input rolled and sign-flipped in place.

A memoised output is a cheat the claim itself defends against: every timed call sees new values
(`refresh_inputs` rolls and sign-flips each floating input in place between calls, outside the
timing) and the checker replays the same refreshes (`replay_refreshes`) to check the last output, so a
memo keyed on an address, a layout or sampled values misses. The values stay the same set, so the
kernel's cost does not change.
"""

from __future__ import annotations

import random


def refresh_inputs(inputs, seed: int, step: int) -> None:
    """Step `step` of the refresh sequence of `seed`: each contiguous floating tensor in `inputs` is
    rolled by a pseudo-random offset and maybe negated, in place. Same values, new positions: the
    inputs keep their distribution (and the kernel its cost), while any memo key misses."""
    shift, sign = _refresh_step(seed, step)
    for tensor in _floating_tensors(inputs):
        _roll_flip(tensor, shift, sign)


def replay_refreshes(inputs, seed: int, steps: int) -> None:
    """What `steps` refreshes did to the worker's copy, done to `inputs` at once (the checker's side)."""
    if steps <= 0:
        return
    total_shift, total_sign = 0, 1
    for step in range(1, steps + 1):
        shift, sign = _refresh_step(seed, step)
        total_shift, total_sign = total_shift + shift, total_sign * sign
    for tensor in _floating_tensors(inputs):
        _roll_flip(tensor, total_shift, total_sign)


def _refresh_step(seed: int, step: int) -> tuple[int, int]:
    draw = random.Random(f"{seed}:{step}")
    return draw.randrange(1, 1 << 40), draw.choice((1, -1))


def _roll_flip(tensor, shift: int, sign: int) -> None:
    numel = tensor.numel()
    if numel < 2:
        if sign < 0:
            tensor.neg_()
        return
    import torch

    flat = tensor.view(-1)
    flat.copy_(torch.roll(flat, shift % numel))
    if sign < 0:
        flat.neg_()


def _floating_tensors(value):
    if hasattr(value, "is_floating_point") and hasattr(value, "numel"):
        if value.is_floating_point() and value.is_contiguous():
            yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _floating_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _floating_tensors(item)


def clone_inputs(value):
    if hasattr(value, "clone") and hasattr(value, "numel"):
        return value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(clone_inputs(item) for item in value)
    if isinstance(value, dict):
        return {key: clone_inputs(item) for key, item in value.items()}
    return value
