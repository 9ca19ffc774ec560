"""Public tests for the `mixed_precision` problem: the autocast step, loss scaling, low-precision sums.

The model, optimizer and training loop must live next to the code under test, so each scenario is a
module-level function of `grader.references.mixed_precision` run through `impl.run(scenario, ...)` (in a
worker process when grading). It builds everything from plain tensors and returns plain values; the
checks below compare them with a reference this process computes itself.
"""

import pytest
import torch
import torch.nn.functional as F

from grader.diagnose_tensors import scaled_by
from grader.references.mixed_precision import (
    STEP_LR,
    build_mlp,
    make_optimizer,
    one_step,
    reference_one_step,
    scenario_fp16_without_scaler,
    scenario_injected_inf,
    scenario_scaled_sgd_step,
    scenario_scaler_arithmetic,
    scenario_tiny_updates,
    scenario_train_mlp,
)
from grader.testing import assert_close, assert_close_lowp, raises_from_student, randn


def mlp_weights(gen, d_in=16, d_hidden=32, d_out=4):
    return [randn((d_hidden, d_in), gen=gen, scale=d_in ** -0.5), randn((d_hidden,), gen=gen, scale=0.1),
            randn((d_out, d_hidden), gen=gen, scale=d_hidden ** -0.5), randn((d_out,), gen=gen, scale=0.1)]


# ------------------------------------------------------------------ checker-side references


def reference_train_mlp(weights, inputs, targets, steps, optimizer_name, lr, device, autocast_dtype=None):
    """The same training done plainly: fp32, or plain torch.autocast when autocast_dtype is given."""
    model = build_mlp(weights, device)
    optimizer = make_optimizer(optimizer_name, model.parameters(), lr)
    inputs, targets = inputs.to(device), targets.to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device_type=torch.device(device).type, dtype=autocast_dtype or torch.bfloat16,
                            enabled=autocast_dtype is not None):
            loss = F.mse_loss(model(inputs), targets)
        loss.float().backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, [p.detach().cpu() for p in model.parameters()]


def regression_batch(gen, n=64, d_in=16, d_out=4):
    return randn((n, d_in), gen=gen), randn((n, d_out), gen=gen)


# ------------------------------------------------------------------ tests


@pytest.mark.check("mixed_precision.step.dtypes")
def test_master_params_and_grads_stay_fp32_while_linears_run_in_bf16(impl, gen, device):
    weights, (inputs, targets) = mlp_weights(gen), regression_batch(gen)
    loss, params, grads = impl.run(one_step, weights, inputs, targets, torch.bfloat16, device)
    assert isinstance(loss, float), f"mixed_precision_step must return a Python float, got {type(loss).__name__}"
    assert [p.dtype for p in params] == [torch.float32] * 4, f"parameters must stay fp32: {[p.dtype for p in params]}"
    assert None not in grads, "after mixed_precision_step every parameter must have its .grad"
    assert [g.dtype for g in grads] == [torch.float32] * 4, f"gradients must be fp32: {[g.dtype for g in grads]}"
    # The dtypes are judged by the values, here: the gradients of an autocast step are not an fp32 step's.
    autocast_params, autocast_grads = reference_one_step(weights, inputs, targets, device, torch.bfloat16)
    _, fp32_grads = reference_one_step(weights, inputs, targets, device)
    off = max(float((g - a).abs().max()) for g, a in zip(grads, autocast_grads))
    fp32_off = max(float((f - a).abs().max()) for f, a in zip(fp32_grads, autocast_grads))
    assert off <= 0.25 * fp32_off, (
        f"the gradients differ from those of torch.autocast(bf16) by {off:.3g}, and an fp32 step's by {fp32_off:.3g}: "
        "the Linear layers should run in bf16 under autocast, with the backward outside it")
    for index, (param, grad, start) in enumerate(zip(params, grads, weights)):
        assert_close(param, start - STEP_LR * grad, atol=4e-7 * (1 + float(start.abs().max())),
                     what=f"parameter {index} after one SGD step",
                     context="fp32 master weights updated by the fp32 gradients, bf16")


@pytest.mark.check("mixed_precision.step.matches_fp32")
def test_five_sgd_steps_track_fp32_training(impl, gen, device):
    weights, (inputs, targets) = mlp_weights(gen), regression_batch(gen)
    args = (weights, inputs, targets, 5)
    losses, params = impl.run(scenario_train_mlp, *args, torch.bfloat16, "sgd", 0.1, device)
    ref_losses, ref_params = reference_train_mlp(*args, "sgd", 0.1, device)
    naive_losses, naive_params = reference_train_mlp(*args, "sgd", 0.1, device, autocast_dtype=torch.bfloat16)
    # allowed error: twice what plain autocast's bf16 rounding does to the same run (docs/numerics.md)
    assert_close_lowp(torch.tensor(losses), torch.tensor(ref_losses), torch.tensor(naive_losses),
                      floor=1e-6, what="losses", context="5 SGD steps, bf16")
    for index, (param, ref, naive) in enumerate(zip(params, ref_params, naive_params)):
        assert param.dtype == torch.float32, f"parameter {index} is {param.dtype}, expected fp32"
        assert_close_lowp(param, ref, naive, floor=1e-6, what=f"parameter {index}", context="after 5 SGD steps, bf16")


@pytest.mark.check("mixed_precision.step.master_weights")
def test_hundred_tiny_sgd_steps_move_fp32_master_weight(impl, device):
    # the premise: in bf16, 1 - 1e-3 rounds back to 1 (spacing below 1.0 is 2^-8 ~ 0.0039)
    pure_bf16 = torch.tensor(1.0, dtype=torch.bfloat16)
    for _ in range(100):
        pure_bf16 = pure_bf16 - torch.tensor(1e-3, dtype=torch.bfloat16)
    assert float(pure_bf16) == 1.0
    weight, dtype = impl.run(scenario_tiny_updates, 1.0, 1e-3, 100, device)
    assert dtype == torch.float32, f"the master weight must stay fp32, got {dtype}"
    assert abs(weight - 0.9) < 1e-4, (
        f"after 100 SGD steps of 1e-3 the weight should be 0.9, got {weight} (1.0 means updates were lost)")


@pytest.mark.check("mixed_precision.scaler.validation")
def test_fp16_without_scaler_is_a_value_error(impl, gen, device):
    inputs, targets = regression_batch(gen)
    with raises_from_student(ValueError):
        impl.run(scenario_fp16_without_scaler, mlp_weights(gen), inputs, targets, device)


@pytest.mark.check("mixed_precision.scaler.dynamic")
def test_scale_unscale_and_backoff_arithmetic(impl):
    scaled, unscaled, found_finite, found_inf, scale_after = impl.run(scenario_scaler_arithmetic, 8.0)
    assert scaled == 24.0, f"scale(3.0) with scale 8 should be 24.0, got {scaled}"
    assert_close(unscaled, torch.tensor([1.0, 2.0, -1.0]), atol=0.0, what="gradients after unscale_")
    assert found_finite is False, "unscale_ reported inf/NaN for finite gradients"
    assert found_inf is True, "unscale_ did not report an inf gradient"
    assert scale_after == 4.0, f"after an overflow the scale should back off 8 -> 4, got {scale_after}"


@pytest.mark.check("mixed_precision.scaler.unscaled_update")
def test_scaled_fp16_sgd_step_uses_the_unscaled_gradient(impl, device):
    scale = 1024.0
    weight, grad = impl.run(scenario_scaled_sgd_step, 1.0, 1e-3, scale, device)
    never_unscaled = (f"the gradients were never divided by the loss scale S = {scale:g}: the update is S times "
                      "too large. Unscale (grad / S) before optimizer.step(), e.g. with scaler.step(optimizer)")
    assert grad is not None, "after mixed_precision_step the weight has no .grad"
    assert_close(torch.tensor(grad), torch.tensor(1.0), atol=1e-6, what="weight.grad after the step",
                 context=f"fp16, DynamicLossScaler(init_scale={scale:g}), loss = mean(w * 1)",
                 signatures=(scaled_by(scale, never_unscaled),))
    assert_close(torch.tensor(1.0 - weight), torch.tensor(1e-3), atol=1e-6, what="SGD update of w (lr 1e-3)",
                 context=f"fp16, DynamicLossScaler(init_scale={scale:g}), w = 1.0",
                 signatures=(scaled_by(scale, never_unscaled),))


@pytest.mark.check("mixed_precision.scaler.dynamic")
def test_injected_inf_skips_step_and_halves_scale(impl, gen, device):
    weights = mlp_weights(gen)
    inputs, targets = regression_batch(gen)
    inputs[3, 5] = float("inf")
    params, scale = impl.run(scenario_injected_inf, weights, inputs, targets, 1024.0, device)
    for index, (param, start) in enumerate(zip(params, weights)):
        assert torch.equal(param, start), f"parameter {index} changed although its gradient was inf/NaN"
    assert scale == 512.0, f"the scale should halve 1024 -> 512 after an overflow, got {scale}"


@pytest.mark.check("mixed_precision.accumulate")
def test_thousand_hundredths_sum_to_ten_only_in_fp32(impl, device):
    values = torch.full((1000,), 0.01, device=device)
    fp32_sum = impl.mixed_precision.accumulate(values, torch.float32)
    fp16_sum = impl.mixed_precision.accumulate(values, torch.float16)
    assert fp32_sum.dtype == torch.float32 and fp16_sum.dtype == torch.float16, (
        f"accumulate must return acc_dtype: got {fp32_sum.dtype}, {fp16_sum.dtype}")
    assert abs(float(fp32_sum) - 10.0) < 1e-3, f"fp32 accumulator: expected 10.0, got {float(fp32_sum)}"
    expected = torch.tensor(0.0, dtype=torch.float16)
    for value in values.cpu():                       # the same sequential sum, rounded to fp16 each time
        expected = expected + value.to(torch.float16)
    assert float(fp16_sum) == float(expected), (
        f"fp16 accumulator: a sequential fp16 sum gives {float(expected)}, got {float(fp16_sum)}")
    assert float(fp16_sum) < 9.99, "the fp16 sum should lose part of the small addends"
