"""The interpreter workarounds in grader/compat.py and grader/devices.py are needed, and they work.

Each kernel runs in a fresh subprocess with TRITON_INTERPRET=1 set before Triton is imported, so the
result does not depend on whether this test process has a GPU or has already patched the interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import devices

REPO_ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("triton")

KERNELS = textwrap.dedent("""
    import json, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl

    @triton.jit
    def square_dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        tile = offs[:, None] * N + offs[None, :]
        tl.store(c_ptr + tile, tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile)))

    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, K, BK: tl.constexpr):
        acc = tl.zeros((BK,), dtype=tl.float32)
        for k in range(tl.cdiv(K, BK)):          # the loop numpy 2.4 breaks
            offs = k * BK + tl.arange(0, BK)
            acc += tl.load(x_ptr + offs, mask=offs < K, other=0.0)
        tl.store(out_ptr, tl.sum(acc, axis=0))

    def bf16_dot_error():
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(16, 16, generator=gen).bfloat16()
        b = torch.randn(16, 16, generator=gen).bfloat16()
        c = torch.empty(16, 16)
        square_dot_kernel[(1,)](a, b, c, N=16)
        return float((c - a.float() @ b.float()).abs().max())

    def cdiv_loop_error():
        x = torch.arange(37, dtype=torch.float32)
        out = torch.empty(1)
        row_sum_kernel[(1,)](x, out, 37, BK=16)
        return abs(float(out) - float(x.sum()))
""")


def run_in_interpreter(body: str) -> dict:
    """Run KERNELS + body in a fresh interpreter process; body prints one JSON line."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", KERNELS + textwrap.dedent(body)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_bf16_dot_is_garbage_unpatched_and_right_after_patch():
    measured = run_in_interpreter("""
        before = bf16_dot_error()
        from grader import compat
        compat.patch_interpreter()
        compat.patch_interpreter()  # idempotent: a second call must not wrap the fix twice
        from triton.runtime import interpreter
        saved = interpreter.InterpreterBuilder._grader_unpatched_dot
        after = bf16_dot_error()
        interpreter.InterpreterBuilder.create_dot = saved
        restored = bf16_dot_error()
        print(json.dumps({"before": before, "after": after, "restored": restored}))
    """)
    # Unpatched, the interpreter multiplies raw bf16 bit patterns: errors around 1e10.
    assert measured["before"] > 1e3, measured
    assert measured["after"] < 1e-2, measured
    # _grader_unpatched_dot really is the original (restoring it brings the bug back).
    assert measured["restored"] > 1e3, measured


def test_cdiv_loop_runs_in_interpreter():
    measured = run_in_interpreter("""
        print(json.dumps({"error": cdiv_loop_error()}))
    """)
    assert measured["error"] < 1e-3, measured


def test_numpy_2_4_is_refused_with_the_fix_in_the_message():
    with pytest.raises(RuntimeError, match=r"numpy<2\.4"):
        devices.check_numpy_for_interpreter("2.4.0")
    with pytest.raises(RuntimeError, match=r"numpy<2\.4"):
        devices.check_numpy_for_interpreter("3.0.1")


def test_numpy_2_3_passes():
    devices.check_numpy_for_interpreter("2.3.5")
    devices.check_numpy_for_interpreter("1.26.4")
