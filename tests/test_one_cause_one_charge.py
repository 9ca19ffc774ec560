"""One root cause, one charge: a variant of the reference with exactly one diagnosed cause loses that
cause's own check and nothing else, graded on the CPU by both suites of its problem.

The variants (tests/broken_variants.py):
- fa_tf32_sized, matmul_tf32_sized: fp32 results cut to 10 mantissa bits, the error TF32 products make
  (the interpreter multiplies exactly, so TF32 itself cannot happen on a CPU);
- fa_float32_output: o returned in float32 for bf16 and fp16 inputs;
- fa_pytorch_default_device: the PyTorch version allocates on the default device; its one check needs
  CUDA inputs, so on a CPU it is not run here and the variant loses nothing;
- matmul_autotune_three: three autotuning configs, which the interpreter cannot time: no loss at all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from broken_variants import build_variant

from grader import results
from grader.points import load_points
from grader.scoring import score_checks

REPO = Path(__file__).resolve().parents[1]
# Five suites of the interpreter on a shared 2-core box: far past pytest-timeout's default per test.
pytestmark = pytest.mark.timeout(3600)

# variant -> (problem, the checks it may lose: its cause's own)
VARIANTS = {
    "fa_tf32_sized": ("flash_attention", {"flash_attention.triton.fp32_ieee"}),
    "fa_float32_output": ("flash_attention", {"flash_attention.triton.output_dtype"}),
    "fa_pytorch_default_device": ("flash_attention", set()),
    "matmul_tf32_sized": ("matmul", {"matmul.fp32.ieee"}),
    "matmul_autotune_three": ("matmul", set()),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{variant: {check id: (earned, points, not run here)}}: both suites of its problem, on the CPU."""
    home = tmp_path_factory.mktemp("home")
    runs = {}
    for name, (problem, _) in VARIANTS.items():
        stream = tmp_path_factory.mktemp(name) / "results.jsonl"
        command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", f"tests_public/test_{problem}.py",
                   f"tests_hidden/test_{problem}_hidden.py", "--impl",
                   str(build_variant(name, tmp_path_factory.mktemp("variants"))), "-q", "-p", "no:cacheprovider",
                   f"--results-json={stream}"]
        env = {**_environment(), "HOME": str(home), "GRADER_FORCE_CPU": "1"}
        runs[name] = (subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True), stream)
    table = load_points()
    scores = {}
    for name, (process, stream) in runs.items():
        output, _ = process.communicate(timeout=3000)
        read = results.read_stream(stream.read_text() if stream.exists() else "")
        assert read.results is not None and read.finished, f"{name} did not run to the end:\n{output[-4000:]}"
        problem = next(p for p in score_checks(table, read.results.tests) if p.problem_id == VARIANTS[name][0])
        scores[name] = {c.check.id: (c.earned, c.check.points, c.not_run_here) for c in problem.checks}
    return scores


def _environment():
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith(("GRADER_", "PYTEST_"))}


def lost_checks(checks):
    return {check for check, (earned, points, not_here) in checks.items() if not not_here and earned < points}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_variant_with_one_cause_loses_only_that_causes_check(graded, variant):
    _, own = VARIANTS[variant]
    lost = lost_checks(graded[variant])
    assert lost == own, f"{variant}: lost {sorted(lost)}, expected only {sorted(own)}: {graded[variant]}"


def test_the_pytorch_versions_device_check_needs_cuda_inputs(graded):
    assert graded["fa_pytorch_default_device"]["flash_attention.pytorch.device"][2], "expected 'not run here'"


def test_the_checks_of_the_causes_are_in_the_rubric():
    table = load_points().checks
    for check in ("flash_attention.triton.fp32_ieee", "flash_attention.triton.output_dtype",
                  "flash_attention.pytorch.output_dtype", "flash_attention.pytorch.device", "matmul.fp32.ieee"):
        assert check in table and table[check].suite == "public" and table[check].points > 0, check
