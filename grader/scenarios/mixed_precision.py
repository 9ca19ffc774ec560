"""Worker-side scenarios of the hidden mixed_precision tests, and the builders both sides share (the
tests build the same model for their fp32 and plain-autocast references)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from grader.references.mixed_precision import mean_output_loss, single_weight_linear

# ------------------------------------------------------------------ builders (both sides)


def build_mlp(weights, device):
    """Linear -> LayerNorm -> GELU -> Linear with the given fp32 weights."""
    w1, b1, ln_w, ln_b, w2, b2 = weights
    model = nn.Sequential(nn.Linear(w1.shape[1], w1.shape[0]), nn.LayerNorm(w1.shape[0]), nn.GELU(),
                          nn.Linear(w2.shape[1], w2.shape[0]))
    with torch.no_grad():
        for param, value in zip(model.parameters(), weights):
            param.copy_(value)
    return model.to(device)


def make_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    raise ValueError(name)


def product_loss(output, target):
    """sum(output * target): the upstream gradient of output is target."""
    return (output * target).sum()


def params_of(model):
    return [p.detach().cpu().clone() for p in model.parameters()]


# ------------------------------------------------------------------ scenarios (worker side)


def scenario_train_mlp(modules, weights, batches, compute_dtype, init_scale, optimizer_name, lr, device):
    """One step per batch; a DynamicLossScaler(init_scale, growth_interval=10**6) when init_scale is given."""
    mp = modules.mixed_precision
    model = build_mlp(weights, device)
    optimizer = make_optimizer(optimizer_name, model.parameters(), lr)
    scaler = None if init_scale is None else mp.DynamicLossScaler(init_scale=init_scale, growth_interval=10**6)
    losses = [mp.mixed_precision_step(model, optimizer, (x.to(device), y.to(device)), F.mse_loss,
                                      compute_dtype=compute_dtype, scaler=scaler) for x, y in batches]
    return losses, params_of(model)


def scenario_grads_after_repeated_steps(modules, weights, inputs, targets, device):
    """Three steps on one batch with lr = 0; the gradients after each step."""
    model = build_mlp(weights, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    grads = []
    for _ in range(3):
        modules.mixed_precision.mixed_precision_step(model, optimizer, (inputs.to(device), targets.to(device)),
                                                     F.mse_loss)
        grads.append([p.grad.detach().cpu().clone() for p in model.parameters()])
    return grads


def scenario_tiny_updates(modules, start, optimizer_name, lr, steps, device):
    """`steps` steps of loss = mean(w * 1) from w = start; the weight after them."""
    model = single_weight_linear(start, device)
    optimizer = make_optimizer(optimizer_name, model.parameters(), lr)
    batch = (torch.ones(8, 1, device=device), torch.zeros(8, 1, device=device))
    for _ in range(steps):
        modules.mixed_precision.mixed_precision_step(model, optimizer, batch, mean_output_loss)
    return float(model.weight.detach().reshape(-1)[0])


def scenario_tiny_gradient(modules, tiny, compute_dtype, init_scale, device):
    """Weight 0, input `tiny`, upstream gradient `tiny`, one SGD(lr=1) step: (grad, weight after)."""
    mp = modules.mixed_precision
    model = single_weight_linear(0.0, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = None if init_scale is None else mp.DynamicLossScaler(init_scale=init_scale)
    batch = (torch.full((1, 1), tiny, device=device), torch.full((1, 1), tiny, device=device))
    mp.mixed_precision_step(model, optimizer, batch, product_loss, compute_dtype=compute_dtype, scaler=scaler)
    return float(model.weight.grad.reshape(-1)[0]), float(model.weight.detach().reshape(-1)[0])


def scenario_scale_schedule(modules, weights, batches, compute_dtype, init_scale, growth_interval, device):
    """Steps through batches with a fresh scaler; records the scale and parameters after every step."""
    mp = modules.mixed_precision
    model = build_mlp(weights, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = mp.DynamicLossScaler(init_scale=init_scale, growth_interval=growth_interval)
    scales, params = [], []
    for x, y in batches:
        mp.mixed_precision_step(model, optimizer, (x.to(device), y.to(device)), F.mse_loss,
                                compute_dtype=compute_dtype, scaler=scaler)
        scales.append(float(scaler.get_scale()))
        params.append(params_of(model))
    return scales, params
