# target: softmax
# device: gpu
"""Cheat: run the kernel on a side stream that the caller's stream never waits for. CUDA events on the
timed stream then see almost nothing; the output is complete only after a device-wide synchronize.
Defence: the timing is also a span of back-to-back calls closed by a device-wide synchronize."""

_reference_softmax_triton = softmax_triton  # noqa: F821
_side_stream = []


def softmax_triton(x):
    if not (x.is_cuda and x.numel() >= 1 << 20):      # only the big, timed inputs
        return _reference_softmax_triton(x)
    if not _side_stream:
        _side_stream.append(torch.cuda.Stream())  # noqa: F821
    side = _side_stream[0]
    side.wait_stream(torch.cuda.current_stream())  # noqa: F821 - the input is ready; nothing waits back
    with torch.cuda.stream(side):  # noqa: F821
        return _reference_softmax_triton(x)
