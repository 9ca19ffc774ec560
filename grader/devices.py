"""Where kernels run: CUDA when present, else Triton's interpreter, else PyTorch-only problems.

`configure()` must run before anything imports Triton: the interpreter is chosen by the environment
variable TRITON_INTERPRET, which Triton reads when it is imported. The plugin calls it first thing, and
the worker process calls it again before importing any student module.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

# numpy 2.4 turned a 0-d array -> int conversion into an error that Triton 3.6's interpreter hits in
# `for k in range(tl.cdiv(K, BLOCK_K))` loops ("only 0-dimensional arrays can be converted").
NUMPY_BREAKS_INTERPRETER = (2, 4)


@dataclass(frozen=True)
class DevicePolicy:
    device: str                # "cuda" or "cpu"
    triton: bool               # Triton importable
    interpreter: bool          # kernels run in Triton's interpreter (CPU)
    reason: str                # one line for the report header

    @property
    def on_gpu(self) -> bool:
        return self.device == "cuda"


_policy: DevicePolicy | None = None


def configure() -> DevicePolicy:
    """Decide the device once per process and set TRITON_INTERPRET before Triton is imported."""
    global _policy
    if _policy is not None:
        return _policy
    has_triton = importlib.util.find_spec("triton") is not None
    cuda = _cuda_available()
    if cuda:
        os.environ.pop("TRITON_INTERPRET", None)
        _policy = DevicePolicy("cuda", has_triton, False, f"CUDA: {_gpu_name()}")
    elif has_triton:
        os.environ["TRITON_INTERPRET"] = "1"
        _policy = DevicePolicy("cpu", True, True, "no CUDA: Triton kernels run in Triton's interpreter")
    else:
        _policy = DevicePolicy("cpu", False, False, "no CUDA and Triton not installed: Triton problems not run")
    if _policy.interpreter:
        _fix_interpreter()
    return _policy


def _fix_interpreter() -> None:
    from grader import compat

    try:
        compat.patch_interpreter()
    except (AttributeError, ImportError):  # Triton's internals moved: fall back to the numpy pin
        check_numpy_for_interpreter()


def check_numpy_for_interpreter(version: str | None = None) -> None:
    """Refuse, with the fix in the message, a numpy that breaks the interpreter's loops."""
    import numpy

    version = version or numpy.__version__
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) >= NUMPY_BREAKS_INTERPRETER:
        raise RuntimeError(
            f"numpy {version} breaks Triton's interpreter (loops over range(tl.cdiv(...)) fail with "
            "'only 0-dimensional arrays can be converted'). Install numpy<2.4: pip install 'numpy<2.4'")


def _cuda_available() -> bool:
    if os.environ.get("GRADER_FORCE_CPU") == "1":
        return False
    import torch

    return torch.cuda.is_available()


def _gpu_name() -> str:
    import torch

    return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
