"""The static scan (grader.scan): what it follows from an entry point, and what it refuses outright."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

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


# --- around a required Triton kernel: an allow-list, not a list of forbidden ops ----------------------


def wrapper_scan(body: str, ops=MATMUL_OPS, entry: str = "matmul") -> list[str]:
    """The scan a check that requires a Triton kernel runs: the named ops, tensor math, the allow-list."""
    source = "import torch\nimport triton\nimport triton.language as tl\n" + textwrap.dedent(body)
    return [str(f) for f in forbidden_calls(source, [entry], ops, TENSOR_MATH_OPS, wrapper_only=True)]


@pytest.mark.parametrize("use", [
    "torch.addbmm(torch.empty(1), a[None], b[None])",          # a function on no forbidden list
    "torch.zeros(2, 2).addmm_(a, b)",                           # an in-place form
    "torch.linalg.multi_dot([a, b])",                           # a submodule
    "torch.ops.aten.mm.default(a, b)",                          # an aten overload
    "torch._C._nn.linear(a, b.t())",                            # a private binding
    "torch.nn.functional.bilinear(a, b, b)",
    "torch.Tensor.__matmul__(a, b)",
    "a.__rmatmul__(b)",
    "a @ b",
    "a.cummax(-1)",
    "a.numpy()",                                                # math outside PyTorch
    "torch.compile(lambda x, y: x * y)(a, b)",                  # kernels that are not the student's
])
def test_ops_outside_the_wrapper_allow_list_are_findings(use):
    assert wrapper_scan(f"def matmul(a, b):\n    return {use}\n"), use


def test_the_allow_list_keeps_allocation_layout_queries_and_launches():
    body = """
        import torch.nn.functional as F

        @triton.jit
        def _kernel(a_ptr, c_ptr, n, BLOCK: tl.constexpr):
            x = tl.load(a_ptr + tl.arange(0, BLOCK))
            tl.store(c_ptr + tl.arange(0, BLOCK), tl.sum(x.exp(), 0) + x.max(0))

        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            if a.dim() != 2 or a.dtype not in (torch.float32, torch.bfloat16) or torch.isnan(a).any():
                raise ValueError(f"bad input {tuple(a.shape)}")
            sms = torch.cuda.get_device_properties(a.device).multi_processor_count
            fill = torch.finfo(a.dtype).min
            seen = set()
            seen.add(sms)
            a = F.pad(a.contiguous(), (0, 1)).T.reshape(-1, a.shape[0]).to(torch.float32)
            c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype).fill_(fill)
            _kernel[(triton.cdiv(a.numel(), 16),)](a, c, a.stride(0), BLOCK=16)
            return c.view(-1).unsqueeze(0).squeeze(0)
    """
    assert wrapper_scan(body) == []


@pytest.mark.parametrize("module", ["softmax", "matmul", "flash_attention"])
def test_the_reference_wrappers_pass_the_allow_list(module):
    from grader.worker.modules import REPO_ROOT

    entries = {"softmax": ["softmax_triton"], "matmul": ["matmul"],
               "flash_attention": ["flash_attention_forward", "FlashAttentionTriton", "flash_attention"]}
    ops = {"softmax": SOFTMAX_OPS, "matmul": MATMUL_OPS, "flash_attention": ATTENTION_OPS}
    for folder in ("solutions", "assignment"):
        source = (REPO_ROOT / folder / f"{module}.py").read_text()
        assert forbidden_calls(source, entries[module], ops[module], TENSOR_MATH_OPS, module=module,
                               wrapper_only=True) == [], folder


def test_pytorch_only_code_is_not_held_to_the_allow_list():
    source = "import torch\n\ndef online_softmax(x):\n    m = x.cummax(-1).values\n    return torch.addbmm(m, m, m)\n"
    assert scan(source, ["online_softmax"]) == []


def test_a_decorator_that_only_pretends_to_be_triton_does_not_make_a_kernel():
    body = """
        def _jit(fn):
            return fn

        @_jit
        def _kernel(a, b):
            return a.addbmm(a, b, b)

        def matmul(a, b):
            return _kernel(a, b)
    """
    assert any("_kernel: uses .addbmm" in f for f in wrapper_scan(body))


def test_a_helper_that_returns_triton_jit_makes_a_kernel():
    body = """
        def _jit(fn):
            return fn if triton is None else triton.jit(fn)

        @_jit
        def _kernel(x_ptr):
            tl.store(x_ptr, tl.load(x_ptr).exp().sum(0))

        def matmul(a, b):
            _kernel[(1,)](a)
            return a
    """
    assert wrapper_scan(body) == []


# --- what import-time code stores is followed ----------------------------------------------------------


HIDDEN_HELPER = """
    def _rows(x):
        return torch.softmax(x, -1)
"""


@pytest.mark.parametrize("store, call", [
    ("class _H:\n    pass\nhelpers = _H()\nhelpers.rows = _rows", "helpers.rows(x)"),
    ("torch.Tensor.gallery_rows = _rows", "x.gallery_rows()"),
    ("class Rows:\n    run = _rows", "Rows.run(x)"),
    ("TABLE = {}\nTABLE['rows'] = _rows", "TABLE['rows'](x)"),
    ("import types\nhelpers = types.SimpleNamespace()\nsetattr(helpers, 'rows', _rows)", "helpers.rows(x)"),
    ("REGISTRY = []\nREGISTRY.append(_rows)", "REGISTRY[0](x)"),
    ("def _setup():\n    torch.Tensor.gallery_rows = _rows\n_setup()", "x.gallery_rows()"),
])
def test_a_helper_reached_only_through_an_import_time_store_is_followed(store, call):
    entry = f"\n\ndef softmax_triton(x):\n    return {call}\n"
    source = "import torch\n" + textwrap.dedent(HIDDEN_HELPER) + store + entry
    assert any("_rows: uses .softmax" in f for f in scan(source, ["softmax_triton"])), store


def test_a_helper_registered_by_a_decorator_is_followed():
    source = """
        import torch
        REGISTRY = {}

        def register(fn):
            REGISTRY[fn.__name__] = fn
            return fn

        @register
        def _rows(x):
            return torch.softmax(x, -1)

        def softmax_triton(x):
            return REGISTRY["_rows"](x)
    """
    assert any("_rows: uses .softmax" in f for f in scan(source, ["softmax_triton"]))


def test_a_container_built_for_a_plain_name_is_followed_through_that_name_only():
    source = """
        import torch

        def _reference(x):
            return torch.softmax(x, -1)

        CHOICES = dict(reference=_reference)

        def softmax_triton(x):
            return x
    """
    assert scan(source, ["softmax_triton"]) == []


@pytest.mark.parametrize("switch", ["with torch._C.DisableTorchFunction():\n    pass",
                                    "from torch._C import DisableTorchFunctionSubclass",
                                    "from torch.overrides import TorchFunctionMode",
                                    "import torch.overrides",
                                    "torch._C._pop_torch_function_stack()"])
def test_switching_off_the_run_time_guard_is_a_finding_anywhere(switch):
    source = "import torch\n\ndef never_called():\n" + textwrap.indent(switch, "    ") + \
             "\n\ndef softmax_triton(x):\n    return x\n"
    findings = scan(source, ["softmax_triton"])
    assert any("function overrides" in f for f in findings), (switch, findings)


# --- a safe root is one bound by the real import ---------------------------------------------------------


@pytest.mark.parametrize("binding", ["import torch as math", "import torch as tl",
                                     "import triton.language as tl\ntl = torch", "from torch import nn as triton"])
def test_a_root_named_like_a_safe_module_but_bound_to_torch_is_judged(binding):
    root = binding.split()[-1] if "as" in binding.splitlines()[-1] else "tl"
    source = f"import torch\n{binding}\n\ndef softmax_triton(x):\n    return {root}.softmax(x, -1)\n"
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"])), binding


def test_a_parameter_named_tl_is_not_triton():
    source = ("import torch\nimport triton.language as tl\n\n"
              "def softmax_triton(x, tl=torch):\n    return tl.softmax(x, -1)\n")
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"]))


@pytest.mark.parametrize("binding", ["import triton.language as tl", "from triton import language as tl",
                                     "try:\n    import triton.language as tl\nexcept ImportError:\n    tl = None"])
def test_triton_bound_by_its_import_is_a_safe_root(binding):
    source = f"{binding}\n\ndef softmax_triton(x):\n    return tl.softmax\n"
    assert scan(source, ["softmax_triton"]) == []


def test_the_fallback_of_an_import_that_can_fail_is_read():
    source = """
        import torch
        try:
            import triton.language as tl
            import gallery_package_that_does_not_exist
        except ImportError:
            tl = torch

        def softmax_triton(x):
            return tl.softmax(x, -1)
    """
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"]))


# --- names are resolved before they are judged -----------------------------------------------------------


def test_a_submissions_own_function_named_like_an_op_is_not_that_op():
    source = """
        import torch
        from .matmul import softmax as imported_softmax

        def softmax(x):
            return torch.empty_like(x)

        def softmax_triton(x):
            return softmax(x), imported_softmax(x)
    """
    assert scan(source, ["softmax_triton"]) == []


def test_a_name_imported_from_torch_is_torch_whatever_it_is_called():
    source = ("from torch import softmax as rows\nfrom torch import *\n\n"
              "def softmax_triton(x):\n    return rows(x) + log_softmax(x)\n")
    findings = scan(source, ["softmax_triton"])
    assert any("a call to rows() (torch.softmax)" in f for f in findings), findings
    assert any("a call to log_softmax() (torch.log_softmax)" in f for f in findings), findings


def test_a_main_block_is_not_import_time_code():
    source = """
        import torch

        def softmax_triton(x):
            return x

        if __name__ == "__main__":
            def softmax_triton(x):
                return torch.softmax(x, -1)
            print(torch.einsum("ij,jk->ik", torch.ones(2, 2), torch.ones(2, 2)), getattr(torch, "soft" + "max"))
    """
    assert scan(source, ["softmax_triton"], ATTENTION_OPS) == []


def test_a_main_block_counts_when_the_module_rebinds_its_name():
    source = """
        import torch
        __name__ = "__main__"

        if __name__ == "__main__":
            def softmax_triton(x):
                return torch.softmax(x, -1)
    """
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"]))


@pytest.mark.parametrize("runner", ["import runpy", "from runpy import run_path", "import pdb", "import doctest"])
def test_a_main_block_counts_when_the_module_can_run_its_source_as_main(runner):
    source = f"""
        import torch
        {runner}

        if __name__ == "__main__":
            def softmax_triton(x):
                return torch.softmax(x, -1)
    """
    assert any("uses .softmax" in f for f in scan(source, ["softmax_triton"]))


@pytest.mark.parametrize("variant, entry_sets, ops", [
    ("self_named_softmax", [["softmax_triton"]], SOFTMAX_OPS),
    ("main_block_demo", [["flash_attention_forward"], ["FlashAttentionTriton", "flash_attention"]], ATTENTION_OPS),
])
def test_reference_variants_with_an_own_softmax_or_a_main_demo_pass_like_the_reference(variant, entry_sets, ops):
    from grader.worker.modules import REPO_ROOT

    text = (Path(__file__).parent / "scan_variants" / f"{variant}.py").read_text()
    module = re.search(r"^# target: (\w+)$", text, re.MULTILINE).group(1)
    source = (REPO_ROOT / "solutions" / f"{module}.py").read_text() + "\n\n" + text
    for entries in entry_sets:
        for wrapper_only in (False, True):
            assert forbidden_calls(source, entries, ops, TENSOR_MATH_OPS, module=module,
                                   wrapper_only=wrapper_only) == [], (entries, wrapper_only)


def test_a_star_import_from_torch_binds_only_what_torch_exports():
    source = "from torch import *\n\ndef softmax_triton(x):\n    return len(x), isinstance(x, tuple), softmax(x, -1)\n"
    findings = [str(f) for f in forbidden_calls(source, ["softmax_triton"], SOFTMAX_OPS, wrapper_only=True)]
    assert [f for f in findings if "softmax()" in f] and not [f for f in findings if "len" in f or "isinstance" in f]


def test_a_literal_getattr_is_judged_like_the_attribute():
    assert wrapper_scan('def matmul(a, b):\n    return getattr(torch.zeros(2, 2), "addmm_")(a, b)\n')
    assert wrapper_scan('def matmul(a, b):\n    return getattr(a, "shape")\n') == []


def test_functions_wrapped_by_pytorch_or_functools_decorators_are_not_followed_from_every_entry():
    body = """
        import functools

        @torch.compile
        def _pytorch_backward(a, b):
            return a.cummax(-1)

        @functools.lru_cache
        def _config(n):
            return torch.arange(n).cummax(0)

        def matmul(a, b):
            return torch.empty_like(a)
    """
    assert wrapper_scan(body) == []


def test_classes_a_base_sees_being_defined_are_followed():
    source = """
        import torch

        class Registered:
            kinds = []

            def __init_subclass__(cls):
                Registered.kinds.append(cls)

        class Rows(Registered):
            @staticmethod
            def run(x):
                return torch.softmax(x, -1)

        def softmax_triton(x):
            return Registered.kinds[0].run(x)
    """
    assert any("Rows.run: uses .softmax" in f for f in scan(source, ["softmax_triton"]))


def test_a_kernel_defined_inside_a_function_is_a_kernel():
    body = """
        def make_matmul():
            @triton.jit
            def _kernel(x_ptr):
                x = tl.load(x_ptr)
                tl.store(x_ptr, x.abs().argmax(0))

            def matmul(a, b):
                _kernel[(1,)](a)
                return a.cummax(0)
            return matmul

        matmul = make_matmul()
    """
    assert [f for f in wrapper_scan(body) if "abs" in f or "argmax" in f] == []
    assert [f for f in wrapper_scan(body) if "cummax" in f]


def test_a_default_argument_is_followed_with_its_function_only():
    source = """
        import torch

        def softmax_triton(x):
            return x

        def softmax_triton(x, _kernel=softmax_triton):
            return torch.softmax(x, -1)

        def online_softmax(x):
            return x
    """
    assert scan(source, ["online_softmax"]) == []
    assert scan(source, ["softmax_triton"]) != []
