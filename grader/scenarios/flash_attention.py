"""Worker-side scenarios of the hidden flash_attention tests (forward and backward: see
`grader.references.attention.attention_forward_backward`)."""

from __future__ import annotations

import torch

from grader.references.attention import attention_function


def largest_saved_tensor(modules, function_name, q, k, v, is_causal):
    """The numel of the largest tensor autograd saves for the backward of one call, how many it saves,
    and whether the output tracks gradients at all."""
    sizes = []

    def pack(tensor):
        sizes.append(tensor.numel())
        return tensor

    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        o = attention_function(modules, function_name)(q, k, v, is_causal)
    return max(sizes, default=0), len(sizes), o.grad_fn is not None


def peak_extra_memory(modules, function_name, batch, heads, n, d, is_causal):
    """Peak CUDA bytes allocated by forward + backward beyond q, k, v, grad_o (bf16)."""
    gen = torch.Generator().manual_seed(n)
    q, k, v, grad_o = (torch.randn(batch, heads, n, d, generator=gen).to("cuda", torch.bfloat16)
                       for _ in range(4))
    attention = attention_function(modules, function_name)
    for measuring in (False, True):  # the first pass compiles the kernels
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        attention(qg, kg, vg, is_causal).backward(grad_o)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del qg, kg, vg
    return peak
