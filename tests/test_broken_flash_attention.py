"""The hidden flash_attention suite must catch realistic bugs: each variant in tests/broken_variants.py
is the reference solution with one bug, and the hidden tests that target that bug must fail on it (and
pass on the reference, so the failure is the bug's).
"""

import subprocess
import sys
from pathlib import Path

import pytest
from broken_variants import build_variant

REPO = Path(__file__).resolve().parent.parent
HIDDEN_SUITE = "tests_hidden/test_flash_attention_hidden.py"

# variant -> (the -k selection that targets its bug, a test name that must be reported FAILED)
VARIANTS = {
    "fa_no_causal_mask": ("triton_forward_handles and fp32", "test_triton_forward_handles_ragged_and_rectangular_shapes"),
    "fa_no_rescale": ("triton_forward_handles and fp32", "test_triton_forward_handles_ragged_and_rectangular_shapes"),
    "fa_saves_p": ("saves_nothing_quadratic", "test_backward_saves_nothing_quadratic"),
    "fa_calls_sdpa": ("uses_no_torch_attention_ops", "test_triton_forward_uses_no_torch_attention_ops"),
}


def run_hidden_suite(impl_path, selection):
    command = [sys.executable, "-m", "pytest", HIDDEN_SUITE, "--impl", str(impl_path), "-q", "-k", selection,
               "-p", "no:warnings"]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_hidden_suite_fails_broken_flash_attention(variant, tmp_path):
    selection, must_fail = VARIANTS[variant]
    result = run_hidden_suite(build_variant(variant, tmp_path), selection)
    output = result.stdout + result.stderr
    assert result.returncode == 1, f"{variant}: expected test failures (exit 1), got exit {result.returncode}\n{output[-3000:]}"
    assert f"FAILED {HIDDEN_SUITE}::{must_fail}" in output, f"{variant}: {must_fail} did not fail\n{output[-3000:]}"


def test_hidden_suite_selections_pass_on_reference():
    selection = " or ".join(f"({selection})" for selection, _ in VARIANTS.values())
    result = run_hidden_suite("solutions", selection)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"the reference fails the selections used above\n{output[-3000:]}"
    assert " passed" in output and " failed" not in output, output[-3000:]
