"""Worker-side scenarios of the hidden flash_attention tests (forward and backward: see
`grader.references.attention.attention_forward_backward`).

What autograd keeps for a backward is read from the graph (`saved_for_backward`) and sent to the
checker, which measures it; the checker then runs the backward again in a fresh worker from those
tensors alone (`replay_backward`), so that a forward that keeps more somewhere else (a global, a
cache) gives a backward that no longer matches the one autograd ran.

`peak_extra_memory` runs one forward and backward for the memory check, which the checker measures from
outside the worker (grader.perf.worker_memory)."""

from __future__ import annotations

import torch

from grader.references.attention import attention_function

PLAIN = (bool, int, float, str, type(None), torch.dtype)


def saved_for_backward(modules, function_name, q, k, v, grad_o, is_causal):
    """One call and its backward: what the forward left on its autograd node (ctx.save_for_backward's
    tensors, and the tensors and plain values set on ctx), and the gradients autograd computed."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = attention_function(modules, function_name)(q, k, v, is_causal)
    node = o.grad_fn
    if node is None or not hasattr(node, "saved_tensors"):
        raise TypeError(f"{function_name}: the output has no autograd.Function node, so no backward can run")
    saved = [None if t is None else t.detach().clone() for t in node.saved_tensors]
    kept = dict(vars(node))
    tensors = {name: value.detach().clone() for name, value in kept.items() if isinstance(value, torch.Tensor)}
    plain = {name: value for name, value in kept.items() if isinstance(value, PLAIN)}
    others = sorted(set(kept) - set(tensors) - set(plain))
    o.backward(grad_o)
    return saved, tensors, plain, others, (q.grad, k.grad, v.grad)


class ReplayedContext:
    """What a backward may read of its ctx: the saved tensors and the attributes the forward set."""

    def __init__(self, saved, attributes, needs_input_grad):
        self.__dict__.update(attributes)
        self.saved_tensors = tuple(saved)
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True


def replay_backward(modules, function_name, saved, tensors, plain, grad_o):
    """The backward of `function_name` run from `saved_for_backward`'s tensors and values alone."""
    function = getattr(modules.flash_attention, function_name)
    ctx = ReplayedContext(saved, {**plain, **tensors}, (True, True, True, False))
    with torch.no_grad():
        grads = function.backward(ctx, grad_o)
    return tuple(grads[:3])


def peak_extra_memory(modules, function_name, batch, heads, n, d, is_causal):
    """One forward + backward at length n (bf16). The checker reads the driver's figure for this process
    around the call (grader.perf.worker_memory); what this returns, the peak CUDA bytes the worker's
    allocator reports beyond q, k, v and grad_o, is the worker's claim: it can fail the check, never pass it."""
    torch.cuda.empty_cache()   # blocks cached by an earlier call (an autotuner's scratch) go back to the driver
    gen = torch.Generator().manual_seed(n)
    q, k, v, grad_o = (torch.randn(batch, heads, n, d, generator=gen).to("cuda", torch.bfloat16)
                       for _ in range(4))
    attention = attention_function(modules, function_name)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    attention(qg, kg, vg, is_causal).backward(grad_o)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base
