"""The hidden matmul suite catches each realistic bug of the matmul_* variants (tests/broken_variants.py).

Each fixture is the reference module with one bug:
- matmul_no_mask: the loads are unmasked (only the store is), so edge tiles read past the matrix;
- matmul_calls_torch: fp32 inputs go to torch.matmul instead of the Triton kernel (caught at run time
  for fp32, and statically for every dtype);
- matmul_fp16_accumulate: the running sum is kept in the output dtype and rounded every K-slice.
Running the hidden suite against a fixture must fail the tests that guard its bug (recorded by the
grader as "failed", the student's fault, not a harness error) and must still pass tests the bug cannot
touch, so the failures are about the bug and not a suite that fails everything.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from broken_variants import build_variant

from grader import results

REPO_ROOT = Path(__file__).resolve().parents[1]
HIDDEN_SUITE = "tests_hidden/test_matmul_hidden.py"
EDGE = "test_edge_tiles_read_nothing_past_the_matrix"
LONG_K = "test_long_k_sums_are_kept_in_fp32"
TRITON_ONLY = "test_every_dtype_and_shape_is_computed_by_triton"
EXACT_TILES = "test_more_shapes_match_fp64_reference[exact_tiles-{dtype}-0]"

VARIANTS = {
    "matmul_no_mask": {
        "must_fail": [f"{EDGE}[{case}-{dtype}]" for case in ("big_odd", "mid_odd", "tiny_mn_long_k")
                      for dtype in ("fp32", "fp16", "bf16")],
        # Shapes that are whole tiles never overhang, and long K is a multiple of any BLOCK_K.
        "must_pass": [EXACT_TILES.format(dtype=dtype) for dtype in ("fp32", "fp16", "bf16")]
                     + [f"{LONG_K}[fp16]"]
                     # the rule is judged apart from the values, at aligned sizes
                     + [f"{TRITON_ONLY}[{shape}-{dtype}]" for shape in ("square", "wide", "transposed")
                        for dtype in ("fp32", "fp16", "bf16")],
    },
    "matmul_calls_torch": {
        # The run-time guard catches the fp32 calls; the static scan sees the torch.matmul line in
        # matmul() whatever the dtype, so every guarded case fails.
        "must_fail": [f"{TRITON_ONLY}[{shape}-{dtype}]" for shape in ("square", "wide", "transposed")
                      for dtype in ("fp32", "fp16", "bf16")],
        "must_pass": ["test_analytic_functions_reject_non_positive_sizes[tiled_matmul_ai(0, 2)]"],
    },
    "matmul_fp16_accumulate": {
        "must_fail": [f"{LONG_K}[fp16]", f"{LONG_K}[bf16]"],
        # fp32 inputs accumulate in fp32 either way.
        "must_pass": [f"{TRITON_ONLY}[{shape}-fp32]" for shape in ("square", "wide", "transposed")]
                     + [EXACT_TILES.format(dtype="fp32")],
    },
}


@pytest.fixture(scope="module")
def all_outcomes(tmp_path_factory):
    """{variant: {test name: outcome}}: the hidden suite run against every fixture, all at once."""
    runs = {}
    for name in VARIANTS:
        stream = tmp_path_factory.mktemp(name) / "results.jsonl"
        broken = build_variant(name, tmp_path_factory.mktemp("variants"))
        command = [sys.executable, "-m", "pytest", HIDDEN_SUITE, "--impl", str(broken),
                   "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
                   f"--results-json={stream}"]
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        runs[name] = (process, stream)
    outcomes = {}
    for name, (process, stream) in runs.items():
        output, _ = process.communicate(timeout=600)
        read = results.read_stream(stream.read_text() if stream.exists() else "")
        parsed, finished = read.results, read.finished
        assert parsed is not None and finished, (
            f"the hidden suite did not run to the end against {name}:\n{output[-4000:]}")
        assert process.returncode == 1, f"{name}: expected some hidden tests to fail (exit 1), got {process.returncode}"
        outcomes[name] = {record.nodeid.split("::", 1)[1]: record.outcome for record in parsed.tests}
    return outcomes


@pytest.fixture(params=list(VARIANTS))
def variant(request, all_outcomes):
    """(name, {test name: outcome}) for one broken fixture."""
    return request.param, all_outcomes[request.param]


def test_hidden_suite_fails_the_tests_guarding_the_bug(variant):
    name, outcomes = variant
    wrong = {test: outcomes.get(test, "not collected") for test in VARIANTS[name]["must_fail"]
             if outcomes.get(test) != results.FAILED}
    assert not wrong, f"{name}: these tests should fail (as the student's fault) but were: {wrong}"


def test_hidden_suite_passes_what_the_bug_cannot_touch(variant):
    name, outcomes = variant
    wrong = {test: outcomes.get(test, "not collected") for test in VARIANTS[name]["must_pass"]
             if outcomes.get(test) != results.PASSED}
    assert not wrong, f"{name}: these tests should pass against the broken module but were: {wrong}"


def test_no_hidden_test_reports_a_harness_error(variant):
    name, outcomes = variant
    errors = sorted(test for test, outcome in outcomes.items() if outcome == results.HARNESS_ERROR)
    assert not errors, f"{name}: harness errors (a bug in the tests, not the submission): {errors}"
