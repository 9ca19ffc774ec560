# target: matmul
"""Fault: the matmul kernel never finishes. It waits for a flag that nothing sets: on a GPU the kernel
spins on the device, in the interpreter the Python loop never ends. The worker is stopped after the
per-call timeout and killed with its CUDA context; the softmax checks run in a fresh worker."""

_reference_matmul = matmul  # noqa: F821 - the reference's, defined above


@triton.jit  # noqa: F821 - triton comes from the reference module above
def _wait_for_flag_kernel(flag_ptr):
    flag = tl.load(flag_ptr)  # noqa: F821
    while flag == 0:
        flag = tl.load(flag_ptr, volatile=True)  # noqa: F821


def matmul(a, b):
    flag = torch.zeros(1, dtype=torch.int32, device=a.device)  # noqa: F821
    _wait_for_flag_kernel[(1,)](flag)
    return _reference_matmul(a, b)
