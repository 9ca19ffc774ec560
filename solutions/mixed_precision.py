"""Mixed-precision training: fp32 master weights, low-precision compute, loss scaling (see the lecture).

* The parameters (the "master weights") stay float32. An update lr * g is often far smaller than the
  spacing of bf16 numbers near w, so w + lr * g == w in bf16; in fp32 the tiny updates add up.
* Forward and backward run under ``torch.autocast``: matmuls take bf16/fp16 copies of their inputs,
  and precision-sensitive ops (softmax, losses, reductions) stay fp32. Gradients land on the fp32
  parameters, and the optimizer update is fp32.
* fp16 has only 5 exponent bits: gradients below ~6e-8 flush to zero. Loss scaling multiplies the loss
  by s before backward (every gradient is then s times larger, above the underflow), and divides the
  gradients by s before the update. A dynamic scaler starts large, halves s and skips the step when a
  gradient overflows to inf/NaN, and doubles s after a run of good steps. bf16 has fp32's exponent
  range, so it needs no scaling.
* ``accumulate`` shows the same effect for sums: many small numbers added to a low-precision
  accumulator are lost once the running sum's spacing exceeds them.

Imports: only torch, triton, numpy, einops and Python's standard library (and the other assignment
modules); anything else is refused, as when graded (the write-up, "Handing in", says how).
"""

import math

import torch

LOW_PRECISION_DTYPES = (torch.bfloat16, torch.float16)


class DynamicLossScaler:
    """Dynamic loss scaling for fp16 training.

    Use per step: ``scaler.scale(loss).backward()`` then ``scaler.step(optimizer)``, which
    unscales the gradients in place, skips the optimizer step if any gradient is inf/NaN, and
    updates the scale. The pieces are also callable one by one:
    ``found_inf = scaler.unscale_(optimizer)``; ``optimizer.step()`` if not found_inf;
    ``scaler.update(found_inf)``.

    Scale schedule: on a step with inf/NaN gradients the scale is multiplied by ``backoff_factor``
    and the run of good steps restarts; after ``growth_interval`` consecutive good steps it is
    multiplied by ``growth_factor``.
    """

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not init_scale > 0 or not math.isfinite(init_scale):
            raise ValueError(f"init_scale must be a positive finite number; got {init_scale}")
        if not growth_factor > 1.0:
            raise ValueError(f"growth_factor must be > 1; got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1); got {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive int; got {growth_interval!r}")
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = growth_interval
        # BEGIN SOLUTION
        self._scale = float(init_scale)
        self._good_steps = 0
        # END SOLUTION

    def get_scale(self):
        """The current loss scale (a Python float)."""
        # BEGIN SOLUTION
        return self._scale
        # END SOLUTION

    def scale(self, loss):
        """The loss multiplied by the current scale (call ``.backward()`` on the result)."""
        # BEGIN SOLUTION
        return loss * self._scale
        # END SOLUTION

    def unscale_(self, optimizer):
        """Divide every gradient of the optimizer's parameters by the scale, in place (in fp32).

        Returns True when any gradient is inf or NaN (the step must then be skipped).
        """
        # BEGIN SOLUTION
        inv_scale = 1.0 / self._scale
        found_inf = False
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                param.grad.mul_(inv_scale)
                if not torch.isfinite(param.grad).all():
                    found_inf = True
        return found_inf
        # END SOLUTION

    def update(self, found_inf):
        """Back off after an overflow; grow after ``growth_interval`` good steps in a row."""
        # BEGIN SOLUTION
        if found_inf:
            self._scale *= self.backoff_factor
            self._good_steps = 0
            return
        self._good_steps += 1
        if self._good_steps == self.growth_interval:
            self._scale *= self.growth_factor
            self._good_steps = 0
        # END SOLUTION

    def step(self, optimizer):
        """Unscale, step the optimizer unless a gradient overflowed, update the scale.

        Returns True when the optimizer stepped, False when the step was skipped.
        """
        # BEGIN SOLUTION
        found_inf = self.unscale_(optimizer)
        if not found_inf:
            optimizer.step()
        self.update(found_inf)
        return not found_inf
        # END SOLUTION


def _check_step_arguments(model, compute_dtype, scaler):
    """Raise ValueError for an unsupported compute dtype, fp16 without a scaler, or non-fp32 parameters;
    return the device type ("cuda", "cpu") autocast should use."""
    # BEGIN SOLUTION
    if compute_dtype not in LOW_PRECISION_DTYPES:
        raise ValueError(f"compute_dtype must be torch.bfloat16 or torch.float16; got {compute_dtype}")
    if compute_dtype == torch.float16 and scaler is None:
        raise ValueError("compute_dtype=torch.float16 needs a loss scaler (e.g. DynamicLossScaler()): "
                         "small fp16 gradients underflow to zero without one")
    params = list(model.parameters())
    if not params:
        raise ValueError("the model has no parameters to train")
    not_fp32 = [(name, p.dtype) for name, p in model.named_parameters() if p.dtype != torch.float32]
    if not_fp32:
        raise ValueError(f"master parameters must be torch.float32; got {not_fp32[:3]}")
    return params[0].device.type
    # END SOLUTION


def mixed_precision_step(model, optimizer, batch, loss_fn, *, compute_dtype=torch.bfloat16, scaler=None):
    """One training step with fp32 master weights and autocast compute; returns the loss as a float.

    Args:
        model: an nn.Module whose parameters are float32 (they are the master weights).
        optimizer: an optimizer over those parameters (its update runs in fp32).
        batch: (inputs, targets); ``loss_fn(model(inputs), targets)`` is the loss.
        compute_dtype: torch.bfloat16 (default) or torch.float16, the dtype of matmuls in autocast.
        scaler: a DynamicLossScaler; required for float16, optional for bfloat16.

    The gradients are zeroed (set to None) before the forward, so after the call each ``p.grad`` is
    this step's fp32 gradient (unscaled when a scaler is used). With a scaler, a step whose
    gradients overflow is skipped (the parameters are unchanged) and the scale backs off.
    Raises ValueError for fp16 without a scaler, another compute dtype, or non-fp32 parameters.
    """
    device_type = _check_step_arguments(model, compute_dtype, scaler)
    # BEGIN SOLUTION
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device_type, dtype=compute_dtype):
        loss = loss_fn(model(inputs), targets)
    loss = loss.float()
    # backward outside autocast: each op's backward runs in the dtype its forward used
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    return loss.item()
    # END SOLUTION


def accumulate(values, acc_dtype):
    """Sum ``values`` one at a time into an accumulator of ``acc_dtype``; returns a 0-d tensor of acc_dtype.

    Every partial sum is rounded to acc_dtype, as a running sum in a low-precision register would be.
    The lecture's rule is to accumulate in fp32 (gradient accumulation and optimizer updates run in
    fp32 "to avoid the rounding error that builds up when many small numbers are added"; tensor cores
    add their partial sums in full precision). An example of ours, not a number from the notes: 1000 x
    0.01 gives 10.0 in an fp32 accumulator but stalls well short of 10 in fp16 once the spacing of fp16
    numbers near the sum exceeds 2 x 0.01.
    """
    if not isinstance(values, torch.Tensor) or not values.is_floating_point():
        raise ValueError(f"values must be a floating tensor; got {type(values).__name__}")
    if not (isinstance(acc_dtype, torch.dtype) and acc_dtype.is_floating_point):
        raise ValueError(f"acc_dtype must be a floating torch.dtype; got {acc_dtype}")
    # BEGIN SOLUTION
    total = torch.zeros((), dtype=acc_dtype, device=values.device)
    for value in values.reshape(-1):
        total = total + value.to(acc_dtype)  # rounded to acc_dtype after every add
    return total
    # END SOLUTION
