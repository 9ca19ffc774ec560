"""The pytest plugin end to end: a tiny fake suite and points table run in a subprocess, in both
modes, and the outcomes, the results stream and the points summary are what the grader relies on."""

from __future__ import annotations

import textwrap

import pytest

from grader import results

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

    def needs_cuda(x):
        assert x.is_cuda, "expected a CUDA tensor"
        return x

    def wrapped_stub(x):
        # what Triton's interpreter does with a stub kernel: its own error, the stub's as the cause
        try:
            raise NotImplementedError("kernel: not implemented yet")
        except NotImplementedError as stub:
            raise RuntimeError("InterpreterError") from stub
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

    @pytest.mark.check("softmax.fake.stub")
    def test_stub_kernel_is_not_implemented(impl):
        impl.softmax.wrapped_stub(torch.ones(2))

    @pytest.mark.check("softmax.fake.wrong")
    def test_assertion_names_the_function(impl):
        assert impl.softmax.wrong(torch.ones(1)).item() == 2.0

    @pytest.mark.check("softmax.fake.raises")
    def test_student_exception_fails(impl):
        impl.softmax.raises(torch.ones(2))

    @pytest.mark.check("softmax.fake.raises")
    def test_code_refusing_cpu_tensors_fails(impl):
        impl.softmax.needs_cuda(torch.ones(2))

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
    "test_stub_kernel_is_not_implemented": results.NOT_IMPLEMENTED,
    "test_assertion_names_the_function": results.FAILED,
    "test_student_exception_fails": results.FAILED,
    "test_code_refusing_cpu_tensors_fails": results.FAILED,
    "test_bug_in_the_test_itself": results.HARNESS_ERROR,
    "test_gpu_only": results.NOT_RUN_HERE,
    "test_perf": results.NOT_RUN_HERE,
}


def _write_fake_project(project) -> None:
    """The fake points table, submission and public suite in pytester's folder."""
    (project.path / "points").mkdir()
    (project.path / "points" / "softmax.toml").write_text(POINTS)
    (project.path / "submission").mkdir()
    (project.path / "submission" / "softmax.py").write_text(SUBMISSION)
    (project.path / "tests_public").mkdir()
    (project.path / "tests_public" / "test_fake.py").write_text(SUITE)


@pytest.fixture(params=["in_process", "isolated"])
def fake_run(request, grader_pytester, run_suites):
    """The fake suite against the fake submission, in-process and isolated: (result, results stream)."""
    project = grader_pytester
    _write_fake_project(project)
    stream = project.path / "results.jsonl"
    extra = ["--isolate"] if request.param == "isolated" else []
    done = run_suites("tests_public", "--impl", str(project.path / "submission"), *extra,
                      f"--results-json={stream}")
    return done, stream


def test_stream_classifies_every_outcome_and_says_what_went_wrong(fake_run):
    done, stream = fake_run
    assert done.ret == 1, done.stdout.str()[-3000:] + done.stderr.str()[-3000:]  # tests failed, no crash
    read = results.read_stream(stream.read_text())
    assert read.finished and read.results.device == "cpu"
    assert read.results.impl == str(stream.parent / "submission")
    assert set(read.results.collected_checks) == {
        "softmax.fake.passes", "softmax.fake.half", "softmax.fake.wrong", "softmax.fake.stub",
        "softmax.fake.raises", "softmax.fake.test_bug", "softmax.fake.gpu", "softmax.perf.fake"}
    by_name = {record.nodeid.split("::")[-1]: record for record in read.results.tests}
    assert {name: record.outcome for name, record in by_name.items()} == EXPECTED_OUTCOMES
    assert "wrong values" in by_name["test_wrong_answer_fails"].message
    assert "stub: not implemented yet" in by_name["test_stub_is_not_implemented"].message
    assert "student bug" in by_name["test_student_exception_fails"].message
    assert "Triton's interpreter (TRITON_INTERPRET=1" in by_name["test_code_refusing_cpu_tensors_fails"].message
    assert "TRITON_INTERPRET" not in by_name["test_student_exception_fails"].message
    assert "undefined_helper" in by_name["test_bug_in_the_test_itself"].message
    assert "not run here" in by_name["test_gpu_only"].message


def test_student_sees_their_frames_not_the_harness(fake_run, request):
    done, stream = fake_run
    read = results.read_stream(stream.read_text())
    raised = next(r.message for r in read.results.tests if r.nodeid.endswith("test_student_exception_fails"))
    if request.node.callspec.params["fake_run"] == "isolated":
        assert "Traceback (your code only)" in raised and "softmax.py" in raised, raised
        assert "test_fake.py:" in raised, raised   # the test's line that made the call
    output = done.stdout.str()
    for noise in ("grader/impl.py", "grader/worker/process.py", "_ModuleProxy", "<lambda>"):
        assert noise not in output, f"{noise!r} in the student's output:\n{output[-4000:]}"
    assert "softmax.wrong(" in output   # the assertion names the student's function


def test_summary_prints_problem_points_and_total(fake_run):
    done, _ = fake_run
    lines, stdout = done.outlines, done.stdout.str()
    # earned: passes 2 + half 1 = 3; possible excludes the GPU-only check (3) and the perf check (4).
    problem = next(line for line in lines if line.startswith("Fake softmax"))
    assert problem.split()[2:5] == ["3.00", "/", "8"], problem
    assert "2 tests not implemented" in problem  # in both modes: a wrapped stub counts too
    assert "7 pts of GPU-only checks not run here" in problem
    total = next(line for line in lines if line.startswith("TOTAL"))
    assert total.split()[1:4] == ["3.00", "/", "8"], total
    assert "GPU-only checks not run here: softmax.fake.gpu, softmax.perf.fake" in stdout
    assert "HARNESS ERRORS in 1 tests" in stdout


def test_a_selection_is_totalled_over_the_checks_it_ran(grader_pytester, run_suites):
    _write_fake_project(grader_pytester)
    done = run_suites("tests_public", "--impl", str(grader_pytester.path / "submission"), "-k", "double_passes")
    problem = next(line for line in done.outlines if line.startswith("Fake softmax"))
    assert problem.split()[2:5] == ["2.00", "/", "2"] and "1 of its 8 checks selected" in problem, problem
    total = next(line for line in done.outlines if line.startswith("TOTAL"))
    assert total.split()[1:4] == ["2.00", "/", "2"] and "over the checks this run selected" in total, total


@pytest.mark.parametrize("option", ["--checks", "-v"])
def test_each_checks_points_print_with_checks_or_verbose(grader_pytester, run_suites, option):
    _write_fake_project(grader_pytester)
    done = run_suites("tests_public", "--impl", str(grader_pytester.path / "submission"), option)
    half = next(line for line in done.outlines if line.strip().startswith("softmax.fake.half"))
    assert half.split()[1:] == ["1", "/", "2", "1", "of", "2", "tests", "not", "passed"], half
    passes = next(line for line in done.outlines if line.strip().startswith("softmax.fake.passes"))
    assert passes.split()[-1] == "passed", passes


def test_python_files_of_the_code_folder_that_are_not_graded_are_listed(grader_pytester, run_suites):
    _write_fake_project(grader_pytester)
    (grader_pytester.path / "submission" / "utils.py").write_text("X = 1\n")
    (grader_pytester.path / "submission" / "old").mkdir()
    (grader_pytester.path / "submission" / "old" / "softmax_v1.py").write_text("X = 1\n")
    done = run_suites("tests_public", "--impl", str(grader_pytester.path / "submission"), "-k", "double_passes")
    output = done.stdout.str()
    assert "Helper modules graded with your code: utils.py" in output
    assert "submission/old/softmax_v1.py: not graded: in a subfolder" in output


SHARED_GPU_CONFTEST = textwrap.dedent('''
    # what the runner does for a checking run on a shared GPU: its own descriptions of the lock files
    import os
    from pathlib import Path

    from grader.perf import gpu_lock

    fds = gpu_lock.open_for_child(Path(__file__).parent / "locks", "0")
    os.environ[gpu_lock.FDS_ENV] = gpu_lock.env_value(fds)
''')


def test_on_a_shared_gpu_the_stream_ends_with_what_the_lock_cost_and_its_timeline(grader_pytester, run_suites):
    project = grader_pytester
    _write_fake_project(project)
    (project.path / "tests_public" / "conftest.py").write_text(SHARED_GPU_CONFTEST)
    stream = project.path / "results.jsonl"
    run_suites("tests_public", "--impl", str(project.path / "submission"), f"--results-json={stream}")
    read = results.read_stream(stream.read_text())
    assert read.finished and read.notes == []
    lock = read.results.gpu_lock
    assert lock is not None and lock["totals"]["takes_alone"] == 0
    held = [(start, end) for kind, start, end in map(results.parse_interval, lock["intervals"]) if kind == "shared"]
    assert held and all(start <= end for start, end in held)      # every ordinary test held it shared


def test_without_a_shared_gpu_the_stream_has_no_lock_line(fake_run):
    _, stream = fake_run
    assert results.read_stream(stream.read_text()).results.gpu_lock is None


def test_unknown_check_id_is_a_usage_error_naming_it(grader_pytester, run_suites):
    (grader_pytester.path / "points").mkdir()
    (grader_pytester.path / "points" / "softmax.toml").write_text(POINTS)
    suite = grader_pytester.path / "tests_public"
    suite.mkdir()
    (suite / "test_unknown.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.mark.check("softmax.fake.no_such_check")
        def test_unknown(impl):
            pass
    '''))
    done = run_suites(str(suite))
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "softmax.fake.no_such_check" in done.stderr.str()
    assert "is not in grader/points" in done.stderr.str()
