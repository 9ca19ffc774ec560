# target: flash_attention
# modules: softmax matmul flash_attention
# device: gpu
"""Cheat: attention that keeps an n x n bf16 score buffer per head from the forward until the next
call (what a naive attention saves for its backward), and forges what the worker's allocator reports:
torch.cuda's memory counters say nothing was ever allocated, so a check that reads them in the worker
sees a flat footprint. The memory check reads the driver's figure for the worker from the checker
(grader.perf.worker_memory), which no code in the worker can change: the n x n growth shows. GPU only:
the check measures device memory."""
import torch as _torch

_reference_flash_attention = flash_attention  # noqa: F821 - the reference's, defined above
_kept = []


def flash_attention(q, k, v, is_causal=False):
    _kept[:] = [_torch.empty(*q.shape[:-1], k.shape[-2], dtype=_torch.bfloat16, device=q.device)]
    return _reference_flash_attention(q, k, v, is_causal)


def _nothing_allocated(device=None):
    return 0


_torch.cuda.memory_allocated = _nothing_allocated
_torch.cuda.max_memory_allocated = _nothing_allocated
