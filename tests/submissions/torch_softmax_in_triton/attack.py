# target: softmax
"""Cheat: the 'Triton' softmax is torch.softmax. The guard forbids it inside the call."""


def softmax_triton(x):
    return torch.softmax(x, dim=-1)  # noqa: F821 - torch is imported by the reference above
