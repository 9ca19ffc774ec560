"""CS336 assignment 2's attention adapters (tests/adapters.py there), answered with this project's
reference, so their attention tests run against it unchanged: each adapter returns the autograd
Function class, which they call as `.apply(q, k, v, is_causal)` on [batch, n, d] tensors.
"""

from __future__ import annotations

from solutions import flash_attention


def get_flashattention_autograd_function_pytorch() -> type:
    return flash_attention.FlashAttentionPyTorch


def get_flashattention_autograd_function_triton() -> type:
    return flash_attention.FlashAttentionTriton
