# target: softmax
"""Fault: softmax_triton keeps allocating 256 MB blocks, each small enough to pass the kernel's
overcommit check, the way a leak in a loop does. The worker's memory cap (RLIMIT_DATA, at least 8 GiB
by default) makes the allocator refuse one of them long before the node runs out. The blocks are never
touched, so if the cap were missing this attack would hold address space, not memory, and say so."""

_BLOCK_BYTES = 256 * 2**20
_GIVE_UP_BYTES = 64 * 2**30


def softmax_triton(x):
    blocks = []
    while len(blocks) * _BLOCK_BYTES < _GIVE_UP_BYTES:
        blocks.append(torch.empty(_BLOCK_BYTES, dtype=torch.uint8))  # noqa: F821 - from the reference above
    raise RuntimeError(f"gallery: no memory cap, held {len(blocks) * _BLOCK_BYTES >> 30} GiB")
