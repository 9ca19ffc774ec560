"""What comes back from the worker is a claim: the harness runs only its own scenario functions there,
as they were before student code ran, and the checks judge values they can verify themselves."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

from grader.impl import InProcessImpl, IsolatedImpl, StudentCodeError
from grader.references import mixed_precision as scenarios
from grader.worker.entry_points import EntryPoints, NotAnEntryPoint, is_entry_point
from grader.worker.modules import resolve

REPO = Path(__file__).resolve().parent.parent


def test_impl_run_refuses_a_function_of_a_test_module_and_runs_the_graders_own():
    test_module = types.ModuleType("test_scenarios_for_refusal")
    exec("def scenario(modules):\n    return 7\n", test_module.__dict__)
    sys.modules[test_module.__name__] = test_module
    impl = InProcessImpl(resolve("solutions"))
    try:
        with pytest.raises(TypeError, match="cannot run in the worker"):
            impl.run(test_module.scenario)
        assert not is_entry_point(test_module.scenario)
        assert is_entry_point(scenarios.one_step) and not is_entry_point(scenarios.STEP_LR)
    finally:
        sys.modules.pop(test_module.__name__, None)


def test_the_worker_resolves_a_request_to_the_function_recorded_before_student_code_ran(monkeypatch):
    recorded = EntryPoints(("grader.references.mixed_precision",))
    original = scenarios.one_step
    monkeypatch.setattr(scenarios, "one_step", lambda modules, *args: "forged")
    forged = scenarios.one_step
    forged.__module__, forged.__qualname__ = original.__module__, original.__qualname__
    assert recorded.resolve(forged) is original       # a rebound attribute: the recorded function runs
    with pytest.raises(NotAnEntryPoint, match="not a harness function"):
        recorded.resolve(print)


def test_the_worker_refuses_a_recorded_function_whose_code_was_swapped():
    recorded = EntryPoints(("grader.references.mixed_precision",))
    code = scenarios.mean_output_loss.__code__
    scenarios.mean_output_loss.__code__ = (lambda output, target: 0.0).__code__
    try:
        with pytest.raises(NotAnEntryPoint, match="changed after the worker started"):
            recorded.resolve(scenarios.mean_output_loss)
    finally:
        scenarios.mean_output_loss.__code__ = code


SWAPS_THE_SCENARIO = textwrap.dedent('''
    import sys

    import torch


    def _forged(modules, weights, inputs, targets, compute_dtype, device):
        return 1.0, [w.clone() for w in weights], [torch.zeros_like(w) for w in weights]


    sys.modules["grader.references.mixed_precision"].one_step.__code__ = _forged.__code__


    def mixed_precision_step(model, optimizer, batch, loss_fn, *, compute_dtype=torch.bfloat16, scaler=None):
        optimizer.zero_grad()
        loss = loss_fn(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return float(loss)
''')


def test_a_scenario_student_code_swapped_in_the_worker_is_refused_not_run(tmp_path):
    (tmp_path / "mixed_precision.py").write_text(SWAPS_THE_SCENARIO)
    impl = IsolatedImpl(resolve(str(tmp_path)), call_timeout=120)
    weights = [torch.randn(8, 4), torch.randn(8), torch.randn(2, 8), torch.randn(2)]
    args = (weights, torch.randn(16, 4), torch.randn(16, 2), torch.bfloat16, "cpu")
    try:
        impl.run(scenarios.one_step, *args)              # imports the module, which swaps the code
        with pytest.raises(StudentCodeError, match="changed after the worker started"):
            impl.run(scenarios.one_step, *args)
    finally:
        impl.close()


FP32_STEP = textwrap.dedent('''
    import torch


    def mixed_precision_step(model, optimizer, batch, loss_fn, *, compute_dtype=torch.bfloat16, scaler=None):
        optimizer.zero_grad()
        loss = loss_fn(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return float(loss.detach())
''')


def test_the_dtypes_check_judges_the_steps_values_so_an_fp32_step_fails_whatever_it_reports(tmp_path, suite_test):
    check = suite_test("tests_public/test_mixed_precision.py",
                        "test_master_params_and_grads_stay_fp32_while_linears_run_in_bf16")
    check(InProcessImpl(resolve("solutions")), torch.Generator().manual_seed(1), "cpu")
    (tmp_path / "mixed_precision.py").write_text(FP32_STEP)
    before = {name: sys.modules[name] for name in sys.modules if name.partition(".")[0] == "assignment"}
    try:
        with pytest.raises(AssertionError, match="differ from those of torch.autocast"):
            check(InProcessImpl(resolve(str(tmp_path))), torch.Generator().manual_seed(1), "cpu")
    finally:   # the in-process import registered the submission under the students' package name
        for name in [name for name in sys.modules if name.partition(".")[0] == "assignment"]:
            sys.modules.pop(name, None)
        sys.modules.update(before)


FINDS_MODULES = textwrap.dedent('''
    import importlib.util


    def importable(name):
        return importlib.util.find_spec(name) is not None
''')


def test_the_worker_cannot_import_the_test_suites_only_the_grader(tmp_path):
    from grader.plugin import _worker_sys_path

    assert _worker_sys_path([str(REPO / "tests_public"), str(REPO / "tests_hidden")], REPO) == []
    assert importlib.util.find_spec("tests_public") is not None     # here, from this checkout's root
    (tmp_path / "accounting.py").write_text(FINDS_MODULES)
    impl = IsolatedImpl(resolve(str(tmp_path)), call_timeout=120)
    try:
        assert impl.accounting.importable("tests_public") is False
        assert impl.accounting.importable("tests_hidden") is False
        assert impl.accounting.importable("grader.references.attention") is True
    finally:
        impl.close()


KEEPS_SCORES = textwrap.dedent('''
    import math

    import torch

    _KEPT = {}


    def _scores(q, k):
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)


    class FlashAttentionPyTorch(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, is_causal=False):
            p = _scores(q, k)
            o = p @ v
            ctx.save_for_backward(q, k, v, o)
            WHERE
            return o

        @staticmethod
        def backward(ctx, grad_o):
            q, k, v, o = ctx.saved_tensors
            p = FETCH
            dv = p.transpose(-1, -2) @ grad_o
            dp = grad_o @ v.transpose(-1, -2)
            ds = p * (dp - (dp * p).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
            return ds @ k, ds.transpose(-1, -2) @ q, dv, None
''')

WAYS_TO_KEEP_SCORES = {
    "recomputed": ("pass", "_scores(q, k)"),                                   # honest: O(n) saved
    "on_ctx": ("ctx.p = p", "ctx.p"),                                          # a tensor attribute of ctx
    "in_a_global": ("_KEPT[q.data_ptr()] = p", "_KEPT[q.data_ptr()]"),         # outside autograd's sight
}


@pytest.mark.parametrize("way", WAYS_TO_KEEP_SCORES)
def test_what_a_backward_keeps_is_measured_from_the_graph_and_replayed_in_a_fresh_worker(tmp_path, way, suite_test):
    where, fetch = WAYS_TO_KEEP_SCORES[way]
    (tmp_path / "flash_attention.py").write_text(KEEPS_SCORES.replace("WHERE", where).replace("FETCH", fetch))
    check = suite_test("tests_hidden/test_flash_attention_hidden.py", "test_backward_saves_nothing_quadratic")
    impl = IsolatedImpl(resolve(str(tmp_path)), call_timeout=120)
    try:
        run = lambda: check(impl, "cpu", torch.Generator().manual_seed(3), "FlashAttentionPyTorch", False)  # noqa: E731
        if way == "recomputed":
            run()
        else:
            with pytest.raises((AssertionError, StudentCodeError), match="saves a tensor of 8192|KeyError"):
                run()
    finally:
        impl.close()
