"""Hidden tests for the `mixed_precision` problem: fp16 + scaling, underflow, the scale schedule, variants.

The scenarios run through `impl.run` (where the student code lives) are in
`grader.scenarios.mixed_precision`, never here: the worker imports a scenario's module, and this file
must not be readable by student code. The checks compare what they return with references computed here.
"""

import pytest
import torch
import torch.nn.functional as F

from grader.perf.cases import training as training_benchmarks
from grader.perf.measure import measure_graded_case
from grader.scenarios.mixed_precision import (
    build_mlp,
    make_optimizer,
    params_of,
    product_loss,
    scenario_grads_after_repeated_steps,
    scenario_scale_schedule,
    scenario_tiny_gradient,
    scenario_tiny_updates,
    scenario_train_mlp,
    single_weight_linear,
)
from grader.testing import assert_close, assert_close_lowp, randn

TINY = 1e-4   # input and upstream gradient: their product 1e-8 is below fp16's smallest subnormal (6e-8)


def mlp_weights(gen, d_in=24, d_hidden=48, d_out=3):
    return [randn((d_hidden, d_in), gen=gen, scale=d_in ** -0.5), randn((d_hidden,), gen=gen, scale=0.1),
            1.0 + randn((d_hidden,), gen=gen, scale=0.1), randn((d_hidden,), gen=gen, scale=0.1),
            randn((d_out, d_hidden), gen=gen, scale=d_hidden ** -0.5), randn((d_out,), gen=gen, scale=0.1)]


def regression_batch(gen, n=48, d_in=24, d_out=3):
    return randn((n, d_in), gen=gen), randn((n, d_out), gen=gen)


# ------------------------------------------------------------------ references


def reference_train_mlp(weights, batches, optimizer_name, lr, device, autocast_dtype=None, loss_scale=1.0):
    """Plain fp32 training, or plain torch.autocast with a fixed loss scale."""
    model = build_mlp(weights, device)
    optimizer = make_optimizer(optimizer_name, model.parameters(), lr)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast(device_type=torch.device(device).type, dtype=autocast_dtype or torch.bfloat16,
                            enabled=autocast_dtype is not None):
            loss = F.mse_loss(model(x.to(device)), y.to(device)).float()
        (loss * loss_scale).backward()
        for param in model.parameters():
            param.grad.div_(loss_scale)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, params_of(model)


def assert_run_tracks_fp32(run, reference, naive, context):
    (losses, params), (ref_losses, ref_params), (naive_losses, naive_params) = run, reference, naive
    assert_close_lowp(torch.tensor(losses), torch.tensor(ref_losses), torch.tensor(naive_losses), floor=1e-6,
                      what="losses", context=context)
    for index, (param, ref, naive_param) in enumerate(zip(params, ref_params, naive_params)):
        assert param.dtype == torch.float32, f"[{context}] parameter {index} is {param.dtype}, expected fp32"
        assert_close_lowp(param, ref, naive_param, floor=1e-6, what=f"parameter {index}", context=context)


# ------------------------------------------------------------------ step variants


@pytest.mark.check("mixed_precision.step.variants")
def test_fp16_with_scaler_and_adamw_tracks_fp32(impl, gen, device):
    weights = mlp_weights(gen)
    batches = [regression_batch(gen) for _ in range(6)]
    run = impl.run(scenario_train_mlp, weights, batches, torch.float16, 256.0, "adamw", 3e-3, device)
    reference = reference_train_mlp(weights, batches, "adamw", 3e-3, device)
    naive = reference_train_mlp(weights, batches, "adamw", 3e-3, device, autocast_dtype=torch.float16,
                                loss_scale=256.0)
    assert_run_tracks_fp32(run, reference, naive, "6 AdamW steps, fp16, scale 256")


@pytest.mark.check("mixed_precision.step.variants")
def test_bf16_layernorm_mlp_eight_sgd_steps_track_fp32(impl, gen, device):
    weights = mlp_weights(gen)
    batches = [regression_batch(gen) for _ in range(8)]
    run = impl.run(scenario_train_mlp, weights, batches, torch.bfloat16, None, "sgd", 0.05, device)
    reference = reference_train_mlp(weights, batches, "sgd", 0.05, device)
    naive = reference_train_mlp(weights, batches, "sgd", 0.05, device, autocast_dtype=torch.bfloat16)
    assert_run_tracks_fp32(run, reference, naive, "8 SGD steps, bf16, LayerNorm MLP")


@pytest.mark.check("mixed_precision.step.variants")
def test_gradients_are_zeroed_between_steps(impl, gen, device):
    inputs, targets = regression_batch(gen)
    grads = impl.run(scenario_grads_after_repeated_steps, mlp_weights(gen), inputs, targets, device)
    for step in (1, 2):
        for index, (grad, first) in enumerate(zip(grads[step], grads[0])):
            assert_close(grad, first, atol=1e-7, rtol=1e-5, what=f"gradient {index} at step {step + 1}",
                         context="same batch, lr 0: gradients must not accumulate across steps")


@pytest.mark.check("mixed_precision.step.variants")
@pytest.mark.parametrize("optimizer_name,lr,steps,expected", [("sgd", 5e-4, 200, 0.9), ("adam", 2e-3, 40, 0.92)],
                         ids=["sgd-200x5e-4", "adam-40x2e-3"])
def test_tiny_updates_accumulate_in_master_weights(impl, device, optimizer_name, lr, steps, expected):
    # Adam's step for a constant gradient is lr (m_hat / sqrt(v_hat) = 1), so both runs move by lr * steps
    weight = impl.run(scenario_tiny_updates, 1.0, optimizer_name, lr, steps, device)
    assert abs(weight - expected) < 2e-4, (
        f"{optimizer_name}: {steps} steps of {lr} should take 1.0 to {expected}, got {weight}")


# ------------------------------------------------------------------ loss scaling: underflow


def plain_fp16_tiny_gradient(device):
    """What torch.autocast in fp16 without scaling does to the 1e-8 gradient (the premise: 0)."""
    model = single_weight_linear(0.0, device)
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.float16):
        loss = product_loss(model(torch.full((1, 1), TINY, device=device)), torch.full((1, 1), TINY, device=device))
    loss.float().backward()
    return float(model.weight.grad.reshape(-1)[0])


@pytest.mark.check("mixed_precision.scaler.underflow")
def test_tiny_fp16_gradient_survives_with_scaling(impl, device):
    assert plain_fp16_tiny_gradient(device) == 0.0    # premise: unscaled fp16 loses it
    grad, weight = impl.run(scenario_tiny_gradient, TINY, torch.float16, 2.0**16, device)
    assert abs(grad - 1e-8) < 2e-10, f"with scale 2^16 the 1e-8 gradient should survive unscaled, got {grad}"
    assert abs(weight + 1e-8) < 2e-10, f"SGD(lr=1) from 0 should reach -1e-8, got {weight}"


@pytest.mark.check("mixed_precision.scaler.underflow")
def test_scale_of_one_loses_the_tiny_fp16_gradient(impl, device):
    grad, _ = impl.run(scenario_tiny_gradient, TINY, torch.float16, 1.0, device)
    assert grad == 0.0, f"with scale 1 the fp16 gradient of 1e-8 underflows to 0; got {grad} (is the loss scaled?)"


@pytest.mark.check("mixed_precision.scaler.underflow")
def test_bf16_keeps_tiny_gradient_without_scaler(impl, device):
    grad, _ = impl.run(scenario_tiny_gradient, TINY, torch.bfloat16, None, device)
    assert abs(grad - 1e-8) < 1e-10, f"bf16 has fp32's range: the 1e-8 gradient should survive, got {grad}"


# ------------------------------------------------------------------ loss scaling: schedule


@pytest.mark.check("mixed_precision.scaler.schedule")
def test_nan_batch_skips_step_in_bf16_then_scale_grows(impl, gen, device):
    weights = mlp_weights(gen)
    batches = [regression_batch(gen) for _ in range(4)]
    batches[0][0][0, 0] = float("nan")
    scales, params = impl.run(scenario_scale_schedule, weights, batches, torch.bfloat16, 64.0, 3, device)
    for index, (param, start) in enumerate(zip(params[0], weights)):
        assert torch.equal(param, start), f"parameter {index} changed on a step with NaN gradients"
    assert scales == [32.0, 32.0, 32.0, 64.0], (
        f"scale after each step: expected back-off to 32, then growth after 3 good steps; got {scales}")
    assert all(not torch.equal(a, b) for a, b in zip(params[1], params[0])), "the first good step did not update"


@pytest.mark.check("mixed_precision.scaler.schedule")
def test_too_large_initial_scale_backs_off_until_steps_go_through(impl, gen, device):
    # scaled fp16 gradients overflow (max 65504) while the scale is ~2^30; each overflow halves it
    weights = mlp_weights(gen)
    batch = regression_batch(gen)
    scales, params = impl.run(scenario_scale_schedule, weights, [batch] * 40, torch.float16, 2.0**30, 10**6, device)
    moved = [not all(torch.equal(p, w) for p, w in zip(step_params, weights)) for step_params in params]
    assert not moved[0], "the first step (scale 2^30, fp16 overflow) should have been skipped"
    assert any(moved), f"no step went through in 40 steps; scales were {scales}"
    first = moved.index(True)
    assert scales[:first] == [2.0**30 / 2 ** (i + 1) for i in range(first)], (
        f"each skipped step should halve the scale; got {scales[:first + 1]}")
    assert scales[first] == scales[first - 1], "a good step must not change the scale (growth_interval is huge)"
    assert all(torch.isfinite(p).all() for p in params[-1]), "parameters became inf/NaN"


# ------------------------------------------------------------------ accumulate


def sequential_sum(values, dtype):
    total = torch.tensor(0.0, dtype=dtype)
    for value in values:
        total = total + value.to(dtype)
    return total


@pytest.mark.check("mixed_precision.accumulate.variants")
@pytest.mark.parametrize("acc_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_small_addends_after_a_large_one_are_lost(impl, acc_dtype):
    values = torch.cat([torch.tensor([1.0]), torch.full((500,), 1e-4)])
    total = impl.mixed_precision.accumulate(values, acc_dtype)
    assert total.dtype == acc_dtype, f"accumulate returned {total.dtype}, expected {acc_dtype}"
    assert float(total) == float(sequential_sum(values, acc_dtype)) == 1.0, (
        f"1 + 500 x 1e-4 in a {acc_dtype} accumulator stays 1.0 (1e-4 is under half the spacing at 1); "
        f"got {float(total)}")
    fp32 = impl.mixed_precision.accumulate(values, torch.float32)
    assert abs(float(fp32) - 1.05) < 1e-4, f"fp32 accumulator: expected 1.05, got {float(fp32)}"


@pytest.mark.check("mixed_precision.accumulate.variants")
def test_bf16_hundredths_stall_where_rounding_stalls(impl):
    values = torch.full((700,), 0.01)
    total = impl.mixed_precision.accumulate(values, torch.bfloat16)
    expected = sequential_sum(values, torch.bfloat16)
    assert float(total) == float(expected), f"sequential bf16 sum gives {float(expected)}, got {float(total)}"


# ------------------------------------------------------------------ performance (GPU only)

STEP_BENCHMARKS = [case for case in training_benchmarks.benchmarks() if case.check == training_benchmarks.CHECK]


@pytest.mark.perf("mixed_precision.perf.step")
@pytest.mark.parametrize("case", STEP_BENCHMARKS, ids=["mlp_adamw_bf16"])
def test_step_time_against_plain_autocast(impl, record_perf, case):
    gen = torch.Generator(device="cuda").manual_seed(2468)
    result = measure_graded_case(impl, case, gen)
    record_perf(**result.as_record())
