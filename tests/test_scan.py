"""The static scan (grader.scan): what it follows from an entry point, and what it refuses outright."""

from __future__ import annotations

import textwrap

import pytest

from grader.guards import ATTENTION_OPS, MATMUL_OPS, SOFTMAX_OPS, TENSOR_MATH_OPS
from grader.scan import forbidden_calls


def scan(source: str, entries, ops=SOFTMAX_OPS, method_ops=()) -> list[str]:
    return [str(finding) for finding in forbidden_calls(textwrap.dedent(source), list(entries), ops, method_ops)]


AUTOGRAD_LAYOUT = """
    import torch
    import triton


    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return _launch(q, k, v)

        @staticmethod
        def backward(ctx, grad_o):
            q, k, v = ctx.saved_tensors
            p = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
            return p, p, p


    def _launch(q, k, v):
        return torch.empty_like(q)


    def flash_attention_forward(q, k, v):
        return FlashAttention.apply(q, k, v)
"""


# --- per function -------------------------------------------------------------------------------------


def test_forward_entry_through_apply_ignores_the_backward_method():
    assert scan(AUTOGRAD_LAYOUT, ["flash_attention_forward"], ATTENTION_OPS) == []


def test_naming_the_class_scans_its_backward_too():
    findings = scan(AUTOGRAD_LAYOUT, ["FlashAttention"], ATTENTION_OPS)
    assert any("in FlashAttention.backward: uses .softmax" in f for f in findings), findings
    assert any("FlashAttention.backward: the @ operator" in f for f in findings), findings


def test_naming_one_method_scans_only_that_method():
    assert scan(AUTOGRAD_LAYOUT, ["FlashAttention.forward"], ATTENTION_OPS) == []
    assert scan(AUTOGRAD_LAYOUT, ["FlashAttention.backward"], ATTENTION_OPS) != []


def test_a_forward_that_calls_the_backward_method_is_followed():
    source = AUTOGRAD_LAYOUT.replace("return _launch(q, k, v)", "return FlashAttention.backward(ctx, q)")
    assert any("FlashAttention.backward" in f for f in scan(source, ["flash_attention_forward"], ATTENTION_OPS))


def test_self_method_calls_are_followed_within_the_class():
    source = """
        import torch

        class Softmax:
            def __call__(self, x):
                return self._rows(x)

            def _rows(self, x):
                return torch.softmax(x, -1)

            def unrelated(self, x):
                return torch.log_softmax(x, -1)

        def softmax_triton(x):
            return Softmax.__call__(None, x)
    """
    findings = scan(source, ["softmax_triton"])
    assert [f for f in findings if "Softmax._rows: uses .softmax" in f]
    assert not [f for f in findings if "unrelated" in f]


def test_a_class_used_bare_counts_whole():
    source = """
        import torch

        class Helper:
            def run(self, x):
                return torch.softmax(x, -1)

        def softmax_triton(x):
            return Helper().run(x)
    """
    assert any("Helper.run: uses .softmax" in f for f in scan(source, ["softmax_triton"]))


# --- every nested statement ---------------------------------------------------------------------------


@pytest.mark.parametrize("wrapper", ["if True:", "try:", "with contextlib.nullcontext():", "for _ in [0]:",
                                     "while True:"])
def test_definitions_nested_in_compound_statements_are_read(wrapper):
    tail = {"try:": "\nexcept ImportError:\n    pass", "while True:": "\n    break"}.get(wrapper, "")
    source = ("import contextlib\nimport torch\n" + wrapper + "\n    def softmax_triton(x):\n"
              "        return torch.softmax(x, -1)" + tail + "\n")
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"])), source


def test_an_alias_imported_in_a_try_block_is_followed():
    source = """
        try:
            from torch import softmax as _rows
        except ImportError:
            _rows = None

        def softmax_triton(x):
            return _rows(x, -1)
    """
    assert any("imports softmax from torch" in f for f in scan(source, ["softmax_triton"]))


def test_every_conditional_definition_of_the_entry_is_read():
    source = """
        import os, torch
        if os.environ.get("GRADING"):
            def softmax_triton(x):
                return torch.softmax(x, -1)
        else:
            def softmax_triton(x):
                return x
    """
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"]))


@pytest.mark.parametrize("where", ["def softmax_triton(x, _f=torch.softmax):\n    return _f(x, -1)",
                                   "@functools.partial(lambda f, g: g, torch.softmax)\n"
                                   "def softmax_triton(x):\n    return x",
                                   "def softmax_triton(x):\n    rows = lambda y: torch.softmax(y, -1)\n"
                                   "    return rows(x)"])
def test_default_arguments_decorators_and_lambdas_are_read(where):
    source = "import functools\nimport torch\n" + where + "\n"
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"])), where


def test_module_code_run_at_import_is_read_even_if_no_entry_names_it():
    source = """
        import torch
        torch.Tensor.rows = torch.softmax
        _ = print(torch.log_softmax)

        def softmax_triton(x):
            return x.rows(-1)
    """
    findings = scan(source, ["softmax_triton"])
    assert any("module level: uses .softmax" in f for f in findings), findings
    assert any("module level: uses .log_softmax" in f for f in findings), findings


def test_unused_imports_of_allowed_code_do_not_count():
    source = """
        import math
        import torch
        from torch import matmul

        def reference(a, b):
            return matmul(a, b)

        def matmul_triton(a, b):
            torch.backends.cuda.matmul.allow_tf32 = False
            return torch.empty(a.shape[0], b.shape[1]) * math.log(2.0)
    """
    assert scan(source, ["matmul_triton"], MATMUL_OPS, TENSOR_MATH_OPS) == []


# --- dynamic lookups --------------------------------------------------------------------------------


@pytest.mark.parametrize("lookup", [
    'operator.attrgetter("soft" + "max")(torch)(x, -1)',
    'getattr(torch, "soft" + "max")(x, -1)',
    'getattr(x, "".join(["soft", "max"]))(-1)',
    'eval("torch.soft" + "max")(x, -1)',
    'exec("y = 1")',
    'importlib.import_module("tor" + "ch").softmax(x, -1)',
    '__import__("torch").nn.functional.softmax(x, -1)',
    'globals()["tor" + "ch"].softmax(x, -1)',
    'vars(torch)["soft" + "max"](x, -1)',
    'torch.__dict__["soft" + "max"](x, -1)',
    'sys.modules["torch"].softmax(x, -1)',
    'compile("1", "f", "eval")',
    'getattr(torch, "softmax")(x, -1)',
])
def test_dynamic_lookups_are_violations_with_a_message_that_says_so(lookup):
    source = f"import importlib, operator, sys\nimport torch\n\ndef softmax_triton(x):\n    return {lookup}\n"
    findings = scan(source, ["softmax_triton"])
    assert any("dynamic lookup" in f for f in findings), (lookup, findings)


def test_a_dynamic_lookup_counts_anywhere_in_the_module():
    source = """
        import torch

        def never_called():
            return getattr(torch, NAME)

        def softmax_triton(x):
            return x
    """
    assert any("line 5" in f and "dynamic lookup" in f for f in scan(source, ["softmax_triton"]))


def test_literal_getattr_of_plain_attributes_and_triton_lookups_are_fine():
    source = """
        import triton.language as tl

        def softmax_triton(x, dtype_name="float16"):
            shape = tuple(getattr(x, "shape", ()))
            return getattr(tl, dtype_name), shape
    """
    assert scan(source, ["softmax_triton"]) == []


# --- the scanned copy ----------------------------------------------------------------------------------


def test_the_scan_reads_the_source_as_it_was_before_student_code_ran(tmp_path):
    from grader.impl import RuleViolation, make_impl

    module = tmp_path / "softmax.py"
    module.write_text("import torch\n\ndef softmax_triton(x):\n    return torch.softmax(x, -1)\n")
    impl = make_impl(str(tmp_path), isolated=True)
    module.write_text("def softmax_triton(x):\n    return x\n")   # what a module rewriting itself leaves
    with impl.guards(forbid=SOFTMAX_OPS), pytest.raises(RuleViolation, match=r"uses \.softmax"):
        impl.softmax.softmax_triton(None)
    impl.close()


# --- other modules of the submission -----------------------------------------------------------------


@pytest.mark.parametrize("importing", ["from .matmul import _rows", "from assignment.matmul import _rows",
                                       "from . import matmul as _m\n_rows = _m._rows",
                                       "import assignment.matmul\n_rows = assignment.matmul._rows"])
def test_what_an_entry_imports_from_another_module_is_followed_there(importing):
    helper = "import torch\n\n_rows = torch.softmax\n\ndef unrelated(a):\n    return torch.log_softmax(a, -1)\n"
    source = importing + "\n\ndef softmax_triton(x):\n    return _rows(x, -1)\n"
    findings = [str(f) for f in forbidden_calls(source, ["softmax_triton"], SOFTMAX_OPS, siblings={"matmul": helper},
                                                module="softmax")]
    assert any("in matmul.py _rows: uses .softmax" in f for f in findings), findings


def test_a_sibling_name_the_entry_does_not_reach_is_not_read():
    helper = "import torch\n\ndef unrelated(a):\n    return torch.log_softmax(a, -1)\n\ndef scale(a):\n    return a\n"
    source = "from .matmul import scale\n\ndef softmax_triton(x):\n    return scale(x)\n"
    assert forbidden_calls(source, ["softmax_triton"], SOFTMAX_OPS, siblings={"matmul": helper}, module="softmax") == []
