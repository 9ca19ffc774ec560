"""The hidden flash_attention suite must catch realistic bugs: each variant in tests/broken_variants.py
is the reference solution with one bug, and the hidden tests that target that bug must fail on it (and
pass on the reference, so the failure is the bug's).
"""

import subprocess
import sys
from pathlib import Path

import pytest
from broken_variants import build_variant

from grader.points import load_points
from grader.results import read_stream
from grader.scoring import score_checks

REPO = Path(__file__).resolve().parent.parent
HIDDEN_SUITE = "tests_hidden/test_flash_attention_hidden.py"

# variant -> (the -k selection that targets its bug, a test name that must be reported FAILED)
VARIANTS = {
    "fa_no_causal_mask": ("triton_forward_handles and fp32",
                          "test_triton_forward_handles_ragged_and_rectangular_shapes"),
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
    assert result.returncode == 1, (
        f"{variant}: expected test failures (exit 1), got exit {result.returncode}\n{output[-3000:]}")
    assert f"FAILED {HIDDEN_SUITE}::{must_fail}" in output, f"{variant}: {must_fail} did not fail\n{output[-3000:]}"


def test_hidden_suite_selections_pass_on_reference():
    selection = " or ".join(f"({selection})" for selection, _ in VARIANTS.values())
    result = run_hidden_suite("solutions", selection)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"the reference fails the selections used above\n{output[-3000:]}"
    assert " passed" in output and " failed" not in output, output[-3000:]


def test_wrong_but_honest_kernel_keeps_the_rule_points(tmp_path):
    # the rules run at core shapes and never assert the values, so a wrong kernel does not also lose them
    result = run_hidden_suite(build_variant("fa_no_rescale", tmp_path), "uses_no_torch_attention_ops")
    output = result.stdout + result.stderr
    assert result.returncode == 0 and " passed" in output, output[-3000:]


def test_kernel_exact_on_core_shapes_earns_half_its_points_when_ragged_lengths_crash(tmp_path):
    # a kernel without boundary masks crashes every ragged case, yet keeps the core points it earns
    results = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "pytest", "tests_public/test_flash_attention.py", "--isolate", "-q",
               "--impl", str(build_variant("fa_no_boundary_mask", tmp_path)), "-k", "triton and forward",
               "-p", "no:cacheprovider", "--results-json", str(results)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    records = read_stream(results.read_text()).results.tests
    outcomes = {record.nodeid.split("::")[1]: record.outcome for record in records}
    core = {name: outcome for name, outcome in outcomes.items() if "matches_fp64" in name}
    robust = {name: outcome for name, outcome in outcomes.items() if "handles_ragged" in name}
    assert core and set(core.values()) == {"passed"}, run.stdout[-3000:]
    # every ragged case died alone: the aligned fp16 case after it still passed in a fresh worker
    assert robust["test_triton_forward_handles_ragged_rectangular_and_fp16[aligned_fp16]"] == "passed"
    assert list(robust.values()).count("failed") == len(robust) - 1, robust
    assert "died" in " ".join(record.message for record in records if record.outcome == "failed")
    scores = score_checks(load_points(), records, ("public",))
    triton_forward = [c for p in scores for c in p.checks if c.check.kernel == "triton_forward" and c.tests]
    earned, possible = sum(c.earned for c in triton_forward), sum(c.possible for c in triton_forward)
    assert earned >= possible / 2 > 0, [(c.check.id, c.earned) for c in triton_forward]
