"""Narrow workarounds for upstream defects, each with its issue and a test that shows it is needed.

Triton's interpreter stores bfloat16 tensors as raw uint16 bit patterns, and `tl.dot` hands those
integers straight to numpy's matmul, so a bf16 dot returns sums of products of bit patterns (values
around 1e10). Upstream: triton-lang/triton#11584 (unfixed in 3.6). We widen bf16 operands to fp32
first, which is what the hardware's bf16 tensor-core dot computes (exact products, fp32 accumulation).

numpy 2.4 made `int()` of a one-element array with ndim > 0 an error (deprecated since 1.25). The
interpreter's `tensor.__index__` does exactly that, so `for k in range(tl.cdiv(K, BLOCK_K))` fails with
"only 0-dimensional arrays can be converted". We take the single element explicitly. pyproject also pins
numpy<2.4, so either fix alone suffices.

The interpreter also narrows fp32 to bfloat16 by dropping the low 16 bits (truncation), where the GPU
rounds to nearest even; a correct bf16 kernel then looks up to ~4x less accurate on CPU than on GPU.
We round to nearest even, as the hardware does.

`@triton.autotune` with several configs times each one with the active driver's benchmarker, and the
interpreter has no driver ("0 active drivers"): the first call crashes before the kernel runs. Timing
means nothing there anyway, so under the interpreter the autotuner runs one config: the first that the
kernel's own `early_config_prune` keeps (all of them when that prune needs a GPU), as a GPU run might.
"""

from __future__ import annotations

import numpy as np

_PATCHED = False


def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of an fp32: shift the 16 stored bits up and reinterpret."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def patch_interpreter() -> None:
    """Fix `tl.dot` on bfloat16 and `range(tl.cdiv(...))` under numpy 2.4 in the interpreter; idempotent."""
    global _PATCHED
    if _PATCHED:
        return
    from triton.runtime import interpreter

    _patch_bf16_dot(interpreter)
    _patch_scalar_index(interpreter)
    _patch_bf16_rounding(interpreter)
    _patch_autotune_one_config()
    _PATCHED = True


def _patch_bf16_dot(interpreter) -> None:
    import triton.language as tl

    original_dot = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            a = interpreter.TensorHandle(_as_fp32(a, tl), tl.float32)
            b = interpreter.TensorHandle(_as_fp32(b, tl), tl.float32)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    interpreter.InterpreterBuilder.create_dot = create_dot
    interpreter.InterpreterBuilder._grader_unpatched_dot = original_dot


def fp32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round fp32 to the nearest bfloat16 (ties to even) and return its 16 bits; NaN stays NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(values)
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def _patch_bf16_rounding(interpreter) -> None:
    import triton.language as tl

    original_cast = interpreter.InterpreterBuilder.cast_impl
    original_fp_to_fp = interpreter.InterpreterBuilder.create_fp_to_fp

    def narrows_to_bf16(src, dst_type):
        return src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16

    def cast_impl(self, src, dst_type):
        if narrows_to_bf16(src, dst_type):
            return interpreter.TensorHandle(fp32_to_bf16_bits(src.data), tl.bfloat16)
        return original_cast(self, src, dst_type)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        if narrows_to_bf16(src, dst_type):
            return interpreter.TensorHandle(fp32_to_bf16_bits(src.data), tl.bfloat16)
        return original_fp_to_fp(self, src, dst_type, rounding_mode)

    interpreter.InterpreterBuilder.cast_impl = cast_impl
    interpreter.InterpreterBuilder.create_fp_to_fp = create_fp_to_fp  # fp_trunc & co. call cast_impl


def _patch_autotune_one_config() -> None:
    from triton.runtime import autotuner

    original_run = autotuner.Autotuner.run

    def run(self, *args, **kwargs):
        if len(self.configs) <= 1:
            return original_run(self, *args, **kwargs)
        every = self.configs
        self.configs = [interpreter_config(self, args, kwargs)]
        try:
            return original_run(self, *args, **kwargs)
        finally:
            self.configs = every

    autotuner.Autotuner.run = run
    autotuner.Autotuner._grader_unpatched_run = original_run


def interpreter_config(tuner, args, kwargs):
    """The one config an autotuned kernel runs in the interpreter: the first its prune keeps."""
    if tuner.early_config_prune is None:
        return tuner.configs[0]
    named = dict(zip(tuner.arg_names, args))
    try:
        kept = tuner.early_config_prune(tuner.configs, named, **kwargs)
    except Exception:  # noqa: BLE001 - a prune that asks the GPU (SM count, shared memory) cannot run here
        kept = None
    return kept[0] if kept else tuner.configs[0]


def _patch_scalar_index(interpreter) -> None:
    original_patch = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor


def _as_fp32(handle, tl) -> np.ndarray:
    if handle.dtype.scalar == tl.bfloat16:
        return bf16_bits_to_fp32(handle.data)
    return handle.data.astype(np.float32)
