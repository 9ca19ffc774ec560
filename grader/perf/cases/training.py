"""The bf16 mixed-precision training step against the same step written plainly with autocast.

The model is an MLP stack (4 blocks of 2048 -> 8192 -> 2048, 134M fp32 master parameters, AdamW) on
8192 tokens, so the step is dominated by bf16 matmuls. FLOPs: 6 per parameter per token (forward 2,
backward 4). Bytes: the optimizer's pass over fp32 weights, gradients and two Adam moments (read and
write, 32 bytes per parameter); activations are not counted, so the intensity shown is an upper bound.
The tiny variant (CPU) is the same stack, narrower, on fewer tokens.
"""

from __future__ import annotations

from grader.perf.cases import Benchmark, randn

CHECK = "mixed_precision.perf.step"
WIDTH = 2048
EXPANSION = 4          # hidden width over model width
HIDDEN = EXPANSION * WIDTH
BLOCKS = 4
TOKENS = 8192
TINY_WIDTH, TINY_TOKENS = 32, 64


def parameter_count(width: int) -> int:
    return BLOCKS * (2 * width * EXPANSION * width + width + EXPANSION * width)


PARAMS = parameter_count(WIDTH)

_models: dict = {}     # per process, role and width: built once, reused across calls (the step mutates it)


def benchmarks(tiny: bool = False) -> list[Benchmark]:
    import torch

    width, tokens = (TINY_WIDTH, TINY_TOKENS) if tiny else (WIDTH, TOKENS)
    params = parameter_count(width)
    return [Benchmark(
        kernel="training",
        case=f"bf16 autocast MLP {BLOCKS}x({width}->{EXPANSION * width}->{width}) AdamW, {tokens} tokens",
        target="grader.perf.cases.training:student_step",
        make_inputs=lambda gen: (randn((tokens, width), torch.float32, gen),
                                 randn((tokens, width), torch.float32, gen)),
        baselines={"eager autocast step": eager_step},
        flops=6.0 * params * tokens,
        bytes_moved=32.0 * params,
        check_output=_check,
        check=CHECK,
    )]


def build(role: str, device, width: int = WIDTH):
    """(model, optimizer, loss_fn) for `role` on `device`, the same initial weights for every role."""
    key = (role, str(device), width)
    if key not in _models:
        import torch
        from torch import nn

        generator_state = torch.random.get_rng_state()
        torch.manual_seed(0)
        layers = []
        for _ in range(BLOCKS):
            layers += [nn.Linear(width, EXPANSION * width), nn.GELU(), nn.Linear(EXPANSION * width, width)]
        torch.random.set_rng_state(generator_state)
        model = nn.Sequential(*layers).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        _models[key] = (model, optimizer, nn.functional.mse_loss)
    return _models[key]


def student_step(modules, inputs, targets):
    """Worker side: one call of the student's mixed_precision_step on a persistent model."""
    model, optimizer, loss_fn = build("student", inputs.device, inputs.shape[-1])
    step = modules.mixed_precision.mixed_precision_step
    return lambda: step(model, optimizer, (inputs, targets), loss_fn)


def eager_step(inputs, targets):
    """The baseline: zero grads, autocast forward, backward and AdamW step, as PyTorch's docs write it."""
    import torch

    model, optimizer, loss_fn = build("baseline", inputs.device, inputs.shape[-1])

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(inputs.device.type, dtype=torch.bfloat16):
            loss = loss_fn(model(inputs), targets)
        loss.float().backward()
        optimizer.step()
        return loss.item()

    return step


def _check(output, inputs):
    import math

    if not (isinstance(output, float) and math.isfinite(output)):
        raise AssertionError(f"the training step returned {output!r}, not a finite float loss")
