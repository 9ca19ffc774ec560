"""The perf cases: what the hidden perf tests, `grader bench` and `grader calibrate` time, one module per kernel.

Each module's `benchmarks()` lists `Benchmark`s: the shapes, the target timed next to the student's
code (see `grader.perf.in_worker.resolve_target`), the baselines (the first is the one a ratio is graded
against), the FLOPs and compulsory HBM bytes of one call, and a loose output check so that a fast but
wrong kernel never shows up as fast. A benchmark names the perf check id whose ladder it calibrates
(`check`), or None when it is shown for information only. Each module also has tiny variants of its
cases (`benchmarks(tiny=True)`), for Triton's CPU interpreter: the same kernel paths at sizes the
interpreter runs in seconds, so that a CPU run checks that bench and calibrate work; their times mean
nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable

KERNELS = ("matmul", "softmax", "flash_attention", "training")


@dataclass(frozen=True)
class Benchmark:
    kernel: str                          # one of KERNELS
    case: str                            # shape and dtype in words, e.g. "bf16 4096x4096x4096"
    target: str                          # "module.function" or "grader.perf.cases.x:factory"
    make_inputs: Callable                # (torch.Generator) -> tuple of fresh inputs on its device
    baselines: dict                      # {name: factory(*inputs) -> zero-argument callable}
    flops: float                         # per call
    bytes_moved: float                   # compulsory HBM traffic per call
    check_output: Callable | None = None  # (output, inputs) -> None, AssertionError when wrong
    check: str | None = None             # perf check id this case calibrates
    unit: str = "TFLOP/s"                # how the table states throughput: "TFLOP/s" or "GB/s"

    @property
    def intensity(self) -> float:
        """FLOP per byte of compulsory traffic: where the case sits on the roofline's x axis."""
        return self.flops / self.bytes_moved


def benchmarks(kernels=(), tiny: bool = False) -> list[Benchmark]:
    """Every benchmark of `kernels` (all when empty), in KERNELS order; `tiny`: their CPU variants."""
    unknown = sorted(set(kernels) - set(KERNELS))
    if unknown:
        from grader.errors import GraderError

        raise GraderError(f"unknown kernel(s) {', '.join(unknown)}; choose from {', '.join(KERNELS)}")
    # The handout leaves out a kernel whose baseline is an answer (training): bench shows the others.
    chosen = [kernel for kernel in KERNELS if (not kernels or kernel in kernels)
              and importlib.util.find_spec(f"grader.perf.cases.{kernel}") is not None]
    return [case for kernel in chosen
            for case in importlib.import_module(f"grader.perf.cases.{kernel}").benchmarks(tiny)]


def relative_error(actual, expected) -> float:
    """||actual - expected|| / ||expected|| in float32 (Frobenius norms)."""
    actual, expected = actual.float(), expected.float()
    return float((actual - expected).norm() / expected.norm().clamp_min(1e-30))


def assert_relative_error(actual, expected, tolerance: float, what: str) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    error = relative_error(actual, expected)
    if not error <= tolerance:
        raise AssertionError(f"{what}: relative error {error:.2e} against the baseline exceeds {tolerance:.0e}")


def randn(shape, dtype, gen):
    """Standard normal values on the generator's device (never zeros: they run faster, perf-anchors 5.3)."""
    import torch

    return torch.randn(shape, dtype=dtype, device=gen.device, generator=gen)
