"""The pytest plugin end to end: a tiny fake suite and points table run in a subprocess, in both
modes, and the outcomes, the results stream and the points summary are what the grader relies on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import results

REPO_ROOT = Path(__file__).resolve().parent.parent

POINTS = textwrap.dedent('''
    [problem]
    id = "softmax"
    title = "Fake softmax"
    order = 1

    [checks."softmax.fake.passes"]
    points = 2
    [checks."softmax.fake.half"]
    points = 2
    [checks."softmax.fake.wrong"]
    points = 1
    [checks."softmax.fake.stub"]
    points = 1
    [checks."softmax.fake.raises"]
    points = 1
    [checks."softmax.fake.test_bug"]
    points = 1
    [checks."softmax.fake.gpu"]
    points = 3

    [perf."softmax.perf.fake"]
    points = 4
    suite = "public"
    ladder = { pass = 0.5, good = 0.7, excellent = 0.9 }
''')

SUBMISSION = textwrap.dedent('''
    import torch

    def double(x):
        return x * 2

    def wrong(x):
        return x * 3

    def stub(x):
        raise NotImplementedError("stub: not implemented yet")

    def raises(x):
        raise ValueError("student bug")
''')

SUITE = textwrap.dedent('''
    import pytest
    import torch

    @pytest.mark.check("softmax.fake.passes")
    @pytest.mark.parametrize("n", [1, 4])
    def test_double_passes(impl, n):
        assert torch.equal(impl.softmax.double(torch.ones(n)), torch.full((n,), 2.0))

    @pytest.mark.check("softmax.fake.half")
    @pytest.mark.parametrize("fn", ["double", "wrong"])
    def test_half_of_the_cases_pass(impl, fn):
        assert torch.equal(getattr(impl.softmax, fn)(torch.ones(2)), torch.full((2,), 2.0))

    @pytest.mark.check("softmax.fake.wrong")
    def test_wrong_answer_fails(impl):
        assert torch.equal(impl.softmax.wrong(torch.ones(2)), torch.full((2,), 2.0)), "wrong values"

    @pytest.mark.check("softmax.fake.stub")
    def test_stub_is_not_implemented(impl):
        impl.softmax.stub(torch.ones(2))

    @pytest.mark.check("softmax.fake.raises")
    def test_student_exception_fails(impl):
        impl.softmax.raises(torch.ones(2))

    @pytest.mark.check("softmax.fake.test_bug")
    def test_bug_in_the_test_itself(impl):
        impl.softmax.double(torch.ones(2))
        undefined_helper()  # noqa: F821 - the harness bug under test

    @pytest.mark.check("softmax.fake.gpu")
    @pytest.mark.gpu_only
    def test_gpu_only(impl):
        assert False, "must not run without CUDA"

    @pytest.mark.perf("softmax.perf.fake")
    def test_perf(impl, record_perf):
        record_perf(ratio=1.0)
''')

EXPECTED_OUTCOMES = {
    "test_double_passes[1]": results.PASSED,
    "test_double_passes[4]": results.PASSED,
    "test_half_of_the_cases_pass[double]": results.PASSED,
    "test_half_of_the_cases_pass[wrong]": results.FAILED,
    "test_wrong_answer_fails": results.FAILED,
    "test_stub_is_not_implemented": results.NOT_IMPLEMENTED,
    "test_student_exception_fails": results.FAILED,
    "test_bug_in_the_test_itself": results.HARNESS_ERROR,
    "test_gpu_only": results.NOT_RUN_HERE,
    "test_perf": results.NOT_RUN_HERE,
}


@pytest.fixture(scope="module")
def fake_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("fake_project")
    (root / "points").mkdir()
    (root / "points" / "softmax.toml").write_text(POINTS)
    (root / "submission").mkdir()
    (root / "submission" / "softmax.py").write_text(SUBMISSION)
    (root / "tests_public").mkdir()
    (root / "tests_public" / "test_fake.py").write_text(SUITE)
    return root


def run_pytest(root: Path, *args: str, results_json: Path | None = None):
    """pytest with the grader plugin on the fake project, as a student or the grader would run it."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "GRADER_POINTS_DIR": str(root / "points"),
           "GRADER_FORCE_CPU": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    for key in ("GRADER_IMPL", "GRADER_ISOLATE"):
        env.pop(key, None)
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", "-p", "no:cacheprovider",
               "--rootdir", str(root), "--impl", str(root / "submission"), *args]
    if results_json is not None:
        command += ["--results-json", str(results_json)]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module", params=["in_process", "isolated"])
def fake_run(request, fake_project):
    stream = fake_project / f"results-{request.param}.jsonl"
    extra = ["--isolate"] if request.param == "isolated" else []
    done = run_pytest(fake_project, "tests_public", *extra, results_json=stream)
    return done, stream


def outcomes_of(stream: Path) -> dict[str, str]:
    read = results.read_stream(stream.read_text())
    run, finished = read.results, read.finished
    assert run is not None and finished
    return {record.nodeid.split("::")[-1]: record.outcome for record in run.tests}


def test_every_outcome_is_classified(fake_run):
    done, stream = fake_run
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # tests failed, no crash
    assert outcomes_of(stream) == EXPECTED_OUTCOMES


def test_stream_header_names_impl_device_and_collected_checks(fake_run, fake_project):
    _, stream = fake_run
    run = results.read_stream(stream.read_text()).results
    assert run.impl == str(fake_project / "submission")
    assert run.device == "cpu"
    assert set(run.collected_checks) == {"softmax.fake.passes", "softmax.fake.half", "softmax.fake.wrong",
                                         "softmax.fake.stub", "softmax.fake.raises", "softmax.fake.test_bug",
                                         "softmax.fake.gpu", "softmax.perf.fake"}


def test_failure_messages_say_what_went_wrong(fake_run):
    _, stream = fake_run
    run = results.read_stream(stream.read_text()).results
    messages = {record.nodeid.split("::")[-1]: record.message for record in run.tests}
    assert "wrong values" in messages["test_wrong_answer_fails"]
    assert "stub: not implemented yet" in messages["test_stub_is_not_implemented"]
    assert "student bug" in messages["test_student_exception_fails"]
    assert "undefined_helper" in messages["test_bug_in_the_test_itself"]
    assert "not run here" in messages["test_gpu_only"]


def test_summary_prints_problem_points_and_total(fake_run):
    done, _ = fake_run
    lines = done.stdout.splitlines()
    # earned: passes 2 + half 1 = 3; possible excludes the GPU-only check (3) and the perf check (4).
    problem = next(line for line in lines if line.startswith("Fake softmax"))
    assert problem.split()[2:5] == ["3.00", "/", "8"], problem
    assert "1 tests not implemented" in problem
    assert "7 pts of GPU-only checks not run here" in problem
    total = next(line for line in lines if line.startswith("TOTAL"))
    assert total.split()[1:4] == ["3.00", "/", "8"], total
    assert "GPU-only checks not run here: softmax.fake.gpu, softmax.perf.fake" in done.stdout
    assert "HARNESS ERRORS in 1 tests" in done.stdout


def test_unknown_check_id_is_a_usage_error_naming_it(fake_project, tmp_path):
    suite = fake_project / "tests_public_unknown" / "tests_public"
    suite.mkdir(parents=True)
    (suite / "test_unknown.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.mark.check("softmax.fake.no_such_check")
        def test_unknown(impl):
            pass
    '''))
    done = run_pytest(fake_project, str(suite))
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "softmax.fake.no_such_check" in done.stderr
    assert "is not in grader/points" in done.stderr
