"""The CPU path never charges the harness's limits: what Triton's interpreter cannot run is "not run
here" with the reason, and an autotuned kernel with several configs runs one of them there (the
interpreter has no benchmarker), so the kernel is still checked. A rule Triton enforces on a GPU too
(atomic_max on fp16) stays the student's failure. Both modes: a student's `make test` and grading."""

from __future__ import annotations

import textwrap

import pytest

from grader import results
from grader.interpreter_limits import LIMITS, interpreter_limit

pytestmark = pytest.mark.timeout(900)   # a fresh interpreter run of the suite per mode, on a shared box

POINTS = textwrap.dedent('''
    [problem]
    id = "softmax"
    title = "Fake softmax"
    order = 1

    [checks."softmax.fake.atomics"]
    points = 1
    [checks."softmax.fake.rule"]
    points = 1
    [checks."softmax.fake.autotuned"]
    points = 2
''')

SUBMISSION = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


    @triton.jit
    def _max_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.atomic_max(out_ptr + offs, tl.load(x_ptr + offs))


    @triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32}),
                              triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def total(x):
        out = torch.zeros(1, dtype=x.dtype, device=x.device)
        _sum_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
        return out


    def elementwise_max(x):
        out = torch.zeros_like(x)
        _max_kernel[(1,)](x, out, BLOCK=x.numel())
        return out


    def double(x):
        y = torch.empty_like(x)
        _double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
        return y
''')

SUITE = textwrap.dedent('''
    import pytest
    import torch

    @pytest.mark.check("softmax.fake.atomics")
    def test_bf16_atomic_add_is_not_run_by_the_interpreter(impl):
        assert impl.softmax.total(torch.ones(40, dtype=torch.bfloat16)).item() == 40

    @pytest.mark.check("softmax.fake.atomics")
    def test_fp32_atomic_add_runs(impl):
        assert impl.softmax.total(torch.ones(40)).item() == 40

    @pytest.mark.check("softmax.fake.rule")
    def test_fp16_atomic_max_breaks_a_rule_of_triton(impl):
        impl.softmax.elementwise_max(torch.ones(16, dtype=torch.float16))

    @pytest.mark.check("softmax.fake.autotuned")
    @pytest.mark.parametrize("n", [7, 100])
    def test_autotuned_kernel_runs_one_config(impl, n):
        x = torch.arange(n, dtype=torch.float32)
        assert torch.equal(impl.softmax.double(x), 2 * x)
''')


@pytest.fixture(params=["in_process", "isolated"])
def interpreter_run(request, grader_pytester, run_suites, monkeypatch, tmp_path):
    """The suite above against the submission above, on the CPU: {test name: record}, and the output."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))   # Triton's cache; not the interpreter's site-packages
    project = grader_pytester
    (project.path / "points").mkdir()
    (project.path / "points" / "softmax.toml").write_text(POINTS)
    (project.path / "submission").mkdir()
    (project.path / "submission" / "softmax.py").write_text(SUBMISSION)
    (project.path / "tests_public").mkdir()
    (project.path / "tests_public" / "test_limits.py").write_text(SUITE)
    stream = project.path / "results.jsonl"
    extra = ["--isolate"] if request.param == "isolated" else []
    done = run_suites("tests_public", "--impl", str(project.path / "submission"), *extra,
                      f"--results-json={stream}", timeout=600)
    records = results.read_stream(stream.read_text()).results.tests
    return {record.nodeid.split("::")[-1]: record for record in records}, done.stdout.str()


def test_an_operation_the_interpreter_lacks_is_not_run_here_with_the_reason(interpreter_run):
    records, output = interpreter_run
    record = records["test_bf16_atomic_add_is_not_run_by_the_interpreter"]
    assert record.outcome == results.NOT_RUN_HERE, (record.outcome, record.message, output[-3000:])
    assert "interpreter cannot run atomic operations" in record.message and "bfloat16" in record.message
    assert records["test_fp32_atomic_add_runs"].outcome == results.PASSED


def test_a_rule_triton_enforces_on_a_gpu_too_stays_a_failure(interpreter_run):
    records, _ = interpreter_run
    record = records["test_fp16_atomic_max_breaks_a_rule_of_triton"]
    assert record.outcome == results.FAILED and "does not support fp16" in record.message, record.message


def test_an_autotuned_kernel_with_three_configs_is_checked_in_the_interpreter(interpreter_run):
    records, output = interpreter_run
    outcomes = {name: record.outcome for name, record in records.items() if "autotuned" in name}
    assert outcomes == {"test_autotuned_kernel_runs_one_config[7]": results.PASSED,
                        "test_autotuned_kernel_runs_one_config[100]": results.PASSED}, output[-3000:]


@pytest.mark.parametrize("type_name, message, limited", [
    ("InterpreterError", "ValueError('Unsupported data type')", True),
    ("InterpreterError", "NotImplementedError('extern_elementwise not supported in interpreter mode')", True),
    ("InterpreterError", "ValueError('atomic_max does not support fp16')", False),
    ("InterpreterError", "IndexError('index 3 is out of bounds')", False),
    ("RuntimeError", "Unsupported data type", False),
])
def test_only_the_interpreters_own_refusals_are_limits(type_name, message, limited):
    assert (interpreter_limit(type_name, message) is not None) == limited


def test_the_write_up_says_what_the_interpreter_cannot_do():
    from pathlib import Path

    from grader.handout.writeup import collect_problems, render_markdown

    root = Path(__file__).resolve().parents[1]
    text = " ".join(render_markdown(root, collect_problems(root)).split())
    assert "What the interpreter cannot do" in text
    for _, what in LIMITS:
        assert what in text, what
    assert "@triton.autotune" in text and "input_precision" in text
