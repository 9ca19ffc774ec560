"""The public mixed-precision suite's worker-side scenarios, and the builders both sides share.

The model, optimizer and training loop must live next to the code under test, so each scenario is a
module-level function here, run through `impl.run(scenario, ...)` (in a worker process when grading):
it builds everything from plain tensors and returns plain values. They live in the grader, not in
the test module, because the worker runs only the grader's own functions (grader.worker.entry_points).
What decides a check is computed in the test process from what comes back: `one_step` returns the
parameters and gradients a step left, and the test compares them with its own autocast step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

STEP_LR = 1e-2   # the learning rate of `one_step` and of its checker-side reference

# ------------------------------------------------------------------ builders (both sides)


def build_mlp(weights, device):
    """Linear -> GELU -> Linear with the given fp32 weights [w1, b1, w2, b2]."""
    w1, b1, w2, b2 = weights
    model = nn.Sequential(nn.Linear(w1.shape[1], w1.shape[0]), nn.GELU(), nn.Linear(w2.shape[1], w2.shape[0]))
    with torch.no_grad():
        for param, value in zip(model.parameters(), weights):
            param.copy_(value)
    return model.to(device)


def make_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr)
    raise ValueError(name)


def single_weight_linear(value, device):
    """A 1x1 Linear without bias whose weight is `value`: loss = mean(weight * x)."""
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(value)
    return model.to(device)


def mean_output_loss(output, target):
    return output.mean()


def reference_one_step(weights, inputs, targets, device, autocast_dtype=None):
    """Checker side: one SGD step done plainly, in fp32 or under torch.autocast: (parameters, gradients)."""
    model = build_mlp(weights, device)
    optimizer = make_optimizer("sgd", model.parameters(), STEP_LR)
    with torch.autocast(device_type=torch.device(device).type, dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        loss = F.mse_loss(model(inputs.to(device)), targets.to(device))
    loss.float().backward()
    optimizer.step()
    return [p.detach().cpu() for p in model.parameters()], [p.grad.detach().cpu() for p in model.parameters()]


# ------------------------------------------------------------------ scenarios (run where the student code is)


def scenario_train_mlp(modules, weights, inputs, targets, steps, compute_dtype, optimizer_name, lr, device):
    model = build_mlp(weights, device)
    optimizer = make_optimizer(optimizer_name, model.parameters(), lr)
    batch = (inputs.to(device), targets.to(device))
    losses = [modules.mixed_precision.mixed_precision_step(model, optimizer, batch, F.mse_loss,
                                                           compute_dtype=compute_dtype)
              for _ in range(steps)]
    return [float(loss) for loss in losses], [p.detach().cpu() for p in model.parameters()]


def one_step(modules, weights, inputs, targets, compute_dtype, device):
    """One step (SGD, STEP_LR): what the step returned, and the parameters and gradients it left."""
    model = build_mlp(weights, device)
    optimizer = make_optimizer("sgd", model.parameters(), STEP_LR)
    loss = modules.mixed_precision.mixed_precision_step(model, optimizer, (inputs.to(device), targets.to(device)),
                                                        F.mse_loss, compute_dtype=compute_dtype)
    return (loss, [p.detach().cpu() for p in model.parameters()],
            [None if p.grad is None else p.grad.detach().cpu() for p in model.parameters()])


def scenario_tiny_updates(modules, start, lr, steps, device):
    """loss = mean(w * 1) has gradient 1, so SGD moves w by exactly lr per step."""
    model = single_weight_linear(start, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    batch = (torch.ones(4, 1, device=device), torch.zeros(4, 1, device=device))
    for _ in range(steps):
        modules.mixed_precision.mixed_precision_step(model, optimizer, batch, mean_output_loss)
    return float(model.weight.detach().reshape(-1)[0]), model.weight.dtype


def scenario_scaled_sgd_step(modules, start, lr, init_scale, device):
    """One fp16 step with a scaler on loss = mean(w * 1): the true gradient is 1, the scaled one init_scale."""
    model = single_weight_linear(start, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)   # SGD, not Adam: Adam's update ignores the scale
    scaler = modules.mixed_precision.DynamicLossScaler(init_scale=init_scale)
    batch = (torch.ones(4, 1, device=device), torch.zeros(4, 1, device=device))
    modules.mixed_precision.mixed_precision_step(model, optimizer, batch, mean_output_loss,
                                                 compute_dtype=torch.float16, scaler=scaler)
    grad = model.weight.grad
    return float(model.weight.detach().reshape(-1)[0]), None if grad is None else float(grad.reshape(-1)[0])


def scenario_fp16_without_scaler(modules, weights, inputs, targets, device):
    model = build_mlp(weights, device)
    optimizer = make_optimizer("sgd", model.parameters(), 1e-2)
    modules.mixed_precision.mixed_precision_step(model, optimizer, (inputs.to(device), targets.to(device)),
                                                 F.mse_loss, compute_dtype=torch.float16)


def scenario_injected_inf(modules, weights, inputs, targets, init_scale, device):
    model = build_mlp(weights, device)
    optimizer = make_optimizer("sgd", model.parameters(), 0.1)
    scaler = modules.mixed_precision.DynamicLossScaler(init_scale=init_scale)
    modules.mixed_precision.mixed_precision_step(model, optimizer, (inputs.to(device), targets.to(device)),
                                                 F.mse_loss, compute_dtype=torch.float16, scaler=scaler)
    return [p.detach().cpu() for p in model.parameters()], float(scaler.get_scale())


def scenario_scaler_arithmetic(modules, init_scale):
    """scale(), unscale_() and update() by hand on one parameter."""
    scaler = modules.mixed_precision.DynamicLossScaler(init_scale=init_scale)
    param = nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scaled = scaler.scale(torch.tensor(3.0))
    param.grad = torch.tensor([init_scale, 2 * init_scale, -init_scale])
    found_finite = scaler.unscale_(optimizer)
    unscaled = param.grad.clone()
    param.grad = torch.tensor([1.0, float("inf"), 0.0])
    found_inf = scaler.unscale_(optimizer)
    scaler.update(found_inf)
    return float(scaled), unscaled, bool(found_finite), bool(found_inf), float(scaler.get_scale())
