"""Hints only where their cause can apply to this device, dtype and code (grader.hints): TF32 only on a
GPU for a kernel with a tl.dot that does not ask for IEEE products, "accumulate in float32" only for
kernels that never name float32, and the softmax padding-lane cause where a masked load pads with 0."""

from __future__ import annotations

import pytest
import torch
from _pytest.outcomes import Failed
from broken_variants import build_variant, suite_failures

from grader import hints
from grader.kernel_facts import kernel_facts
from grader.numerics import assert_close_lowp

DOT_KERNEL = '''
import triton
import triton.language as tl

@triton.jit
def kernel(a_ptr, c_ptr, PRECISION: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
    tl.store(c_ptr, tl.dot(a, a, input_precision=PRECISION))
'''
IEEE_KERNEL = DOT_KERNEL.replace("input_precision=PRECISION", 'input_precision="ieee"')
NO_DOT_KERNEL = '''
import triton
import triton.language as tl

@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.exp(x - tl.max(x, 0)), mask=offs < n)
'''
FLOAT32_KERNEL = NO_DOT_KERNEL.replace("tl.exp(x - tl.max(x, 0))", "tl.exp(x.to(tl.float32) - tl.max(x, 0))")


def tf32_sized_failure() -> str:
    reference = torch.linspace(-4, 4, 64, dtype=torch.float64)
    with pytest.raises(Failed) as failure:
        assert_close_lowp((reference * (1 + 2.0 ** -11)).float(), reference, reference.float(), ulps=2)
    return str(failure.value)


def fp16_ulps_failure() -> str:
    reference = torch.linspace(1, 5, 64, dtype=torch.float64)
    with pytest.raises(Failed) as failure:
        assert_close_lowp((reference * (1 + 2.0 ** -8)).half(), reference, reference.half(), ulps=2,
                          input_dtype=torch.float16)
    return str(failure.value)


@pytest.mark.parametrize("on_gpu, source, named", [
    (True, DOT_KERNEL, True),
    (False, DOT_KERNEL, False),        # the interpreter multiplies exactly: never TF32 on a CPU
    (True, IEEE_KERNEL, False),        # every tl.dot asks for IEEE products
    (True, NO_DOT_KERNEL, False),      # no tl.dot at all
], ids=["gpu-dot", "cpu-dot", "gpu-ieee", "gpu-no-dot"])
def test_tf32_is_named_only_on_a_gpu_for_a_kernel_with_a_tl_dot(on_gpu, source, named):
    with hints.circumstances(on_gpu, source):
        assert ("TF32" in tf32_sized_failure()) == named


@pytest.mark.parametrize("source, named", [(NO_DOT_KERNEL, True), (FLOAT32_KERNEL, False)])
def test_accumulate_in_float32_is_said_only_to_a_kernel_that_never_names_float32(source, named):
    with hints.circumstances(True, source):
        assert ("accumulate in float32" in fp16_ulps_failure()) == named


def test_without_circumstances_every_hint_the_numbers_support_is_given():
    assert "TF32" in tf32_sized_failure() and "accumulate in float32" in fp16_ulps_failure()


def test_kernel_facts_read_the_kernels_only():
    facts = kernel_facts(DOT_KERNEL + "\nx = tl.float32  # outside a kernel\n")
    assert (facts.dots, facts.dots_not_ieee, facts.mentions_float32) == (1, 1, False)
    assert kernel_facts(IEEE_KERNEL).dots_not_ieee == 0
    assert kernel_facts(NO_DOT_KERNEL).loads_padded_not_neg_inf == 1
    assert kernel_facts(NO_DOT_KERNEL.replace("mask=offs < n)", "mask=offs < n, other=float('-inf'))")) \
        .loads_padded_not_neg_inf == 0
    assert kernel_facts("def broken(:") is None


@pytest.fixture(scope="module")
def padding_failures(tmp_path_factory):
    """The public softmax suite against a Triton softmax whose masked load pads with 0 (on the CPU)."""
    folder = build_variant("softmax_padding_zero", tmp_path_factory.mktemp("variants"))
    outcomes = suite_failures("tests_public/test_softmax.py", folder, tmp_path_factory.mktemp("run") / "junit.xml",
                              keyword="triton")
    return {name: message for name, (outcome, message) in outcomes.items() if outcome == "failed"}


def test_padding_lanes_are_named_and_hints_that_cannot_apply_are_not(padding_failures):
    assert padding_failures, "the padded-with-0 kernel should fail the short rows"
    for name, message in padding_failures.items():
        assert "padding lanes" in message and 'other=float("-inf")' in message, (name, message)
        assert "TF32" not in message, (name, message)                        # no tl.dot, and no GPU here
        assert "accumulate in float32" not in message, (name, message)      # the kernel already does
