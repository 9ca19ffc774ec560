"""FlashAttention-2 forward and backward against PyTorch's SDPA, cuDNN backend (graded) and flash backend.

The FlashAttention papers' protocol: B*N = 16k tokens, hidden size 2048, so d = 64 means 32 heads and
d = 128 16 heads; N = 4096, bf16. FLOPs as the papers count them: forward 4*B*H*N^2*d (halved when
causal), backward 2.5x the forward (five matmuls, one of them recomputed, against two), timed as the
backward alone with the forward outside the timing, as the Triton tutorial does. Per head attention
does about N/2 FLOP per byte: compute-bound, right of the ridge. The tiny variants (Triton's CPU
interpreter) keep the head dims and masks on a few short sequences, against PyTorch's CPU backends
of SDPA, as cuDNN has none.
"""

from __future__ import annotations

from grader.perf.cases import Benchmark, assert_relative_error, randn

CHECK_FORWARD = "flash_attention.perf.forward"
CHECK_BACKWARD = "flash_attention.perf.backward"
TOKENS = 16384
HIDDEN = 2048
SEQ_LEN = 4096
TINY_TOKENS, TINY_HIDDEN, TINY_SEQ_LEN = 64, 128, 64
HEAD_DIMS = (64, 128)
BACKWARD_FLOP_FACTOR = 2.5
GPU_BACKENDS = {"SDPA cuDNN": "CUDNN_ATTENTION", "SDPA flash": "FLASH_ATTENTION"}   # the first is graded
CPU_BACKENDS = {"SDPA math": "MATH", "SDPA flash": "FLASH_ATTENTION"}


def benchmarks(tiny: bool = False) -> list[Benchmark]:
    sizes = (TINY_TOKENS, TINY_HIDDEN, TINY_SEQ_LEN) if tiny else (TOKENS, HIDDEN, SEQ_LEN)
    backends = CPU_BACKENDS if tiny else GPU_BACKENDS
    return [_case(direction, d, causal, sizes, backends)
            for direction in ("fwd", "bwd") for d in HEAD_DIMS for causal in (False, True)]


def _case(direction, head_dim, causal, sizes, backends) -> Benchmark:
    import torch

    tokens, hidden, n = sizes
    batch, heads = tokens // n, hidden // head_dim
    shape = (batch, heads, n, head_dim)
    forward_flops = 4.0 * batch * heads * n * n * head_dim * (0.5 if causal else 1.0)
    tensor_bytes = 2.0 * batch * heads * n * head_dim
    mask = "causal" if causal else "non-causal"
    common = dict(kernel="flash_attention", check=CHECK_FORWARD if direction == "fwd" else CHECK_BACKWARD)
    if direction == "fwd":
        return Benchmark(
            case=f"fwd bf16 B{batch} H{heads} N{n} d{head_dim} {mask}",
            target="flash_attention.flash_attention",
            make_inputs=lambda gen: tuple(randn(shape, torch.bfloat16, gen) for _ in range(3)) + (causal,),
            baselines={name: _sdpa_forward(backend) for name, backend in backends.items()},
            flops=forward_flops, bytes_moved=4 * tensor_bytes,          # read q, k, v; write o
            check_output=_check_forward, **common)
    return Benchmark(
        case=f"bwd bf16 B{batch} H{heads} N{n} d{head_dim} {mask}",
        target="grader.perf.cases.flash_attention:backward_step",
        make_inputs=lambda gen: tuple(randn(shape, torch.bfloat16, gen) for _ in range(4)) + (causal,),
        baselines={name: _sdpa_backward(backend) for name, backend in backends.items()},
        flops=BACKWARD_FLOP_FACTOR * forward_flops,
        bytes_moved=8 * tensor_bytes,              # read q, k, v, o, do; write dq, dk, dv
        check_output=_check_backward, **common)


# --- worker side ------------------------------------------------------------------------------------------


def backward_step(modules, q, k, v, grad_out, is_causal):
    """Run the student's forward once; return a callable timing its backward alone."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = modules.flash_attention.flash_attention(q, k, v, is_causal)
    return _backward_closure(out, grad_out, (q, k, v))


def _backward_closure(out, grad_out, leaves):
    def step():
        for leaf in leaves:
            leaf.grad = None
        out.backward(grad_out, retain_graph=True)
        return tuple(leaf.grad for leaf in leaves)

    return step


# --- baselines and checks -----------------------------------------------------------------------------------


def _backend(name):
    from torch.nn.attention import SDPBackend

    return getattr(SDPBackend, name)


def _sdpa_forward(backend_name):
    def factory(q, k, v, is_causal):
        import torch.nn.functional as F
        from torch.nn.attention import sdpa_kernel

        def run():
            with sdpa_kernel(_backend(backend_name)):
                return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

        return run

    return factory


def _sdpa_backward(backend_name):
    def factory(q, k, v, grad_out, is_causal):
        import torch.nn.functional as F
        from torch.nn.attention import sdpa_kernel

        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        with sdpa_kernel(_backend(backend_name)):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return _backward_closure(out, grad_out, (q, k, v))

    return factory


def _check_forward(output, inputs):
    import torch.nn.functional as F

    q, k, v, is_causal = inputs
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert_relative_error(output, expected, 2e-2, f"attention forward {tuple(q.shape)} causal={is_causal}")


def _check_backward(output, inputs):
    q, k, v, grad_out, is_causal = inputs
    import torch.nn.functional as F

    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).backward(grad_out)
    for name, actual, leaf in zip(("dq", "dk", "dv"), output, (q, k, v)):
        assert_relative_error(actual, leaf.grad, 5e-2, f"attention {name} {tuple(q.shape)} causal={is_causal}")
