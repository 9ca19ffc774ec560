# target: softmax
# device: gpu
"""Cheat: memoise the output on what identifies a repeated input cheaply (its address, layout and a
sample of its values), and replay it while do_bench calls again and again with the same tensor.
Defence: every timed call sees new values (rolled and sign-flipped in place), and its output is checked."""

_reference_softmax_triton = softmax_triton  # noqa: F821
_memo = {}


def softmax_triton(x):
    if not (x.is_cuda and x.numel() >= 1 << 20):
        return _reference_softmax_triton(x)
    flat = x.view(-1)
    sample = tuple(flat[:: max(1, flat.numel() // 4)][:4].tolist())
    key = (x.data_ptr(), tuple(x.shape), tuple(x.stride()), x.dtype, sample)
    if key not in _memo:
        if len(_memo) > 64:
            _memo.clear()
        _memo[key] = _reference_softmax_triton(x)
    return _memo[key]
