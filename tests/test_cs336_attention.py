"""CS336's attention tests, rewritten from their description (reference/cs336-anchor.md section 3), run
through tests/cs336_adapter.py: the reference must pass them as they are. What they ask of the
API: [batch, n, d] inputs with no heads axis, `Function.apply(q, k, v, is_causal)` returning o, exactly
one saved tensor of shape [batch, n_queries] (the lse), and o, lse and the gradients within
rtol = atol = 1e-2 of plain attention in float32 (masked with -1e6, as their handout does).
On a machine without CUDA the Triton cases run in Triton's interpreter instead of being skipped.
"""

from __future__ import annotations

import cs336_adapter
import pytest
import torch

BATCH, N_QUERIES, N_KEYS, D = 4, 128, 128, 64


def attention_and_lse(q, k, v, is_causal=False):
    scores = torch.einsum("bqd,bkd->bqk", q, k) * D ** -0.5
    if is_causal:
        visible = torch.arange(N_QUERIES, device=q.device)[None, :, None] >= \
            torch.arange(N_KEYS, device=q.device)[None, None, :]
        scores = torch.where(visible, scores, -1e6)
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


def make_inputs(device):
    torch.random.manual_seed(0)
    q = torch.randn(BATCH, N_QUERIES, D, device=device, requires_grad=True)
    k = torch.randn(BATCH, N_KEYS, D, device=device, requires_grad=True)
    v = torch.randn(BATCH, N_KEYS, D, device=device, requires_grad=True)
    do = torch.randn(BATCH, N_QUERIES, D, device=device)
    return q, k, v, do


def check_forward(function, device, is_causal):
    q, k, v, _ = make_inputs(device)
    o = function.apply(q, k, v, is_causal)
    assert o.grad_fn.saved_tensors is not None, "save what the backward needs with ctx.save_for_backward"
    lse = [t for t in o.grad_fn.saved_tensors if t.shape == (BATCH, N_QUERIES)]
    assert len(lse) == 1, f"expected exactly one saved tensor of shape {(BATCH, N_QUERIES)} (the logsumexp)"
    o_ref, lse_ref = attention_and_lse(q, k, v, is_causal)
    torch.testing.assert_close(o, o_ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(lse[0], lse_ref, rtol=1e-2, atol=1e-2)


def check_backward(function, device, is_causal):
    q, k, v, do = make_inputs(device)
    attention_and_lse(q, k, v, is_causal)[0].backward(do)
    expected = [t.grad.detach().clone() for t in (q, k, v)]
    q, k, v, do = make_inputs(device)
    function.apply(q, k, v, is_causal).backward(do)
    for got, want in zip((q.grad, k.grad, v.grad), expected):
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def triton_device():
    pytest.importorskip("triton")
    return "cuda" if torch.cuda.is_available() else "cpu"   # cpu: the grader plugin set TRITON_INTERPRET=1


def test_flash_forward_pass_pytorch():
    check_forward(cs336_adapter.get_flashattention_autograd_function_pytorch(), "cpu", False)


@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_forward_pass_triton(is_causal):
    check_forward(cs336_adapter.get_flashattention_autograd_function_triton(), triton_device(), is_causal)


def test_flash_backward_pytorch():
    check_backward(cs336_adapter.get_flashattention_autograd_function_pytorch(), "cpu", False)


@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_backward_triton(is_causal):
    check_backward(cs336_adapter.get_flashattention_autograd_function_triton(), triton_device(), is_causal)
