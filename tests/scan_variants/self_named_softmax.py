# target: softmax
"""A variant of the reference: the Triton wrapper launches through the submission's own module-level
function named `softmax`, which is not torch.softmax. It must score what the reference scores."""

_launch_rows = softmax_triton  # noqa: F821 - the reference above


def softmax(x):
    """The student's own helper, named after what it computes."""
    return _launch_rows(x)


def softmax_triton(x):
    return softmax(x)
