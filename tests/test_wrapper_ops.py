"""The run-time side of the wrapper allow-list (grader.guards.wrapper_ops_only): where a Triton kernel is
required, an op outside grader.wrapper_ops that the student's code calls fails the call, whoever's
function it goes through; the harness's own ops, Triton's handling of a launch and a module's import
are not the student's calls."""

from __future__ import annotations

import textwrap

import pytest
import torch

from grader.guards import MATMUL_OPS, SOFTMAX_OPS
from grader.worker.guarded_call import execute
from grader.worker.modules import Modules, resolve

STUDENT = textwrap.dedent('''
    import einops
    import torch

    from grader.references.attention import naive_attention

    AT_IMPORT = torch.arange(4.0).cummax(0).values   # import-time code cannot see any input


    def addbmm(a, b):
        return torch.addbmm(torch.empty(a.shape[0], b.shape[1]), a[None], b[None], beta=0)


    def in_place_addmm(a, b):
        out = torch.zeros(a.shape[0], b.shape[1])
        out.addmm_(a, b)
        return out


    def multi_dot(a, b):
        return torch.linalg.multi_dot([a, b])


    def aten_addbmm(a, b):
        return torch.ops.aten.addbmm.default(torch.zeros(a.shape[0], b.shape[1]), a[None], b[None])


    def running_max(a, b):
        return a.cummax(-1).values


    def matmul_operator(a, b):
        return a @ b


    def products_by_operators(a, b):
        return (a[:, :, None] * b[None]).nansum(1)


    def difference_by_an_operator(a, b):
        return a[:2, :2] - b[:2, :2]


    def python_arithmetic(a, b):
        return torch.tensor([[sum(float(a[i, k]) * float(b[k, j]) for k in range(a.shape[1]))
                              for j in range(b.shape[1])] for i in range(a.shape[0])])


    def through_numpy(a, b):
        return torch.from_numpy(a.numpy() @ b.numpy())


    def through_einops(a, b):
        return einops.einsum(a, b, "i k, k j -> i j")


    def through_a_harness_function(q, k):
        return naive_attention(q, k, k, False)[0]


    def layout_only(a, b):
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        if a.dim() != 2 or torch.isnan(a).any() or a.stride(1) != 1:
            raise ValueError("bad input")
        return c.zero_().T.contiguous().view(-1)[: a.shape[0]].clone().to(torch.float32)
''')


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wrapper_ops")
    (folder / "accounting.py").write_text(STUDENT)   # a module name the harness imports; any would do
    return Modules(resolve(str(folder)))


def call(modules, function, *args, ops=MATMUL_OPS, require_triton=True):
    _, claims = execute(modules, "call", ("accounting", function), args, {}, (ops, require_triton))
    return claims["forbidden"]


PAIR = (torch.randn(3, 4), torch.randn(4, 2))


@pytest.mark.parametrize("function, op", [
    ("addbmm", "addbmm"), ("in_place_addmm", "Tensor.addmm_"), ("multi_dot", "linalg.multi_dot"),
    ("aten_addbmm", "aten.addbmm.default"), ("running_max", "Tensor.cummax"),
    ("difference_by_an_operator", "Tensor.sub"), ("python_arithmetic", "Tensor.__float__"),
    ("through_numpy", "Tensor.numpy"),
    # named ops are refused by name first, as without the allow-list
    ("matmul_operator", "matmul"), ("products_by_operators", "mul"), ("through_einops", "einsum"),
])
def test_an_op_outside_the_allow_list_fails_the_call(student, function, op):
    assert op in call(student, function, *PAIR)


def test_a_harness_function_the_student_calls_is_refused_as_an_import_outside_the_allowed_list(student):
    from grader.worker.allowed_imports import ImportNotAllowed

    q = torch.randn(1, 4, 8)
    with pytest.raises(ImportNotAllowed, match="grader cannot be imported here"):
        call(student, "through_a_harness_function", q, q)


def test_allocation_layout_and_queries_pass(student):
    assert call(student, "layout_only", *PAIR) == []


def test_without_a_required_kernel_only_the_named_ops_are_refused(student):
    assert call(student, "addbmm", *PAIR, require_triton=False) == []
    assert call(student, "matmul_operator", *PAIR, require_triton=False) == ["matmul"]


def test_the_reference_kernels_launch_under_the_allow_list():
    pytest.importorskip("triton")
    from grader.references.attention import attention_forward_backward
    from grader.testing import ATTENTION_OPS

    reference = Modules(resolve("solutions"))
    a, b = torch.randn(33, 40), torch.randn(40, 17)
    assert execute(reference, "call", ("matmul", "matmul"), (a, b), {}, (MATMUL_OPS, True))[1] == \
        {"launches": 1, "forbidden": []}
    x = torch.randn(2, 20000)
    assert execute(reference, "call", ("softmax", "softmax_triton"), (x,), {}, (SOFTMAX_OPS, True))[1] == \
        {"launches": 1, "forbidden": []}
    # the harness's own ops around the student's forward and backward (clone, requires_grad_, backward)
    q, k, v = (torch.randn(1, 2, 64, 32) for _ in range(3))
    args = ("FlashAttentionTriton", q, k, v, torch.randn_like(q), True)
    claims = execute(reference, "run", attention_forward_backward, args, {}, (ATTENTION_OPS, True))[1]
    assert claims["forbidden"] == [] and claims["launches"] == 4
