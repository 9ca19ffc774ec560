"""The adversarial gallery's public suite (copied to tests_public/test_gallery.py when graded).

Small on purpose: every submission in tests/submissions is graded with it. Matmul comes first so a
softmax fault cannot keep it from reporting. References are computed AFTER the call from the
checker's own inputs: the vulnerable pattern that isolation makes safe against input mutation.
"""

import math

import pytest
import torch

from grader.testing import ATTENTION_OPS, MATMUL_OPS, SOFTMAX_OPS, assert_close, randn


@pytest.mark.check("matmul.gallery.triton")
def test_a_matmul_matches_torch(impl, gen, device):
    a, b = randn((20, 24), gen=gen, device=device), randn((24, 18), gen=gen, device=device)
    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        c = impl.matmul.matmul(a, b)
    assert_close(c, a @ b, atol=1e-4, rtol=1e-4, what="c", context="M=20 K=24 N=18 fp32")


@pytest.mark.check("softmax.gallery.triton")
@pytest.mark.parametrize("shape", [(3, 37), (2, 5)])
def test_b_softmax_triton_matches_torch(impl, gen, shape, device):
    x = randn(shape, gen=gen, device=device)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        y = impl.softmax.softmax_triton(x)
    assert_close(y, torch.softmax(x, dim=-1), atol=1e-5, rtol=1e-5, context=f"shape={shape} fp32")


@pytest.mark.check("softmax.gallery.fresh")
def test_c_softmax_triton_answers_each_new_input(impl, gen, device):
    for _ in range(2):
        x = randn((3, 37), gen=gen, device=device)
        with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
            y = impl.softmax.softmax_triton(x)
        assert_close(y, torch.softmax(x, dim=-1), atol=1e-5, rtol=1e-5, context="shape=(3, 37) fp32")


@pytest.mark.check("softmax.gallery.online")
def test_d_online_softmax_matches_torch(impl, gen, device):
    x = randn((2, 10), gen=gen, device=device)
    with impl.guards(forbid=SOFTMAX_OPS):
        y = impl.softmax.online_softmax(x, 4)
    assert_close(y, torch.softmax(x, dim=-1), atol=1e-5, rtol=1e-5, context="shape=(2, 10) block=4")


@pytest.mark.check("flash_attention.gallery.forward")
def test_e_flash_attention_forward_matches_math(impl, gen, device):
    q, k, v = (randn((1, 1, 16, 16), gen=gen, device=device) for _ in range(3))
    with impl.guards(forbid=ATTENTION_OPS, require_triton=True):
        o, _ = impl.flash_attention.flash_attention_forward(q, k, v, False)
    weights = torch.exp((q @ k.transpose(-1, -2)) / math.sqrt(16))
    expected = (weights / weights.sum(-1, keepdim=True)) @ v
    assert_close(o, expected, atol=1e-4, rtol=1e-4, what="o", context="B=1 H=1 N=16 d=16 fp32")


@pytest.mark.perf("softmax.gallery.perf")
@pytest.mark.triton
def test_f_softmax_triton_bandwidth(impl, record_perf):
    # the timing cheats' target: graded only with perf checks on (GPU), like the real softmax perf check
    from grader.perf.cases import softmax as cases
    from grader.perf.measure import measure_ratio

    case = cases._case(4096, check="softmax.gallery.perf")
    gen = torch.Generator(device="cuda").manual_seed(4096)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        result = measure_ratio(impl, case.target, lambda: case.make_inputs(gen), case.baselines,
                               check=case.check_output, bytes_moved=case.bytes_moved)
    record_perf(**result.as_record())


@pytest.mark.check("softmax.gallery.masked")
def test_g_online_update_of_a_fully_masked_row_gives_minus_inf_lse(impl, gen):
    scores = randn((3, 6), gen=gen)
    scores[1] = -math.inf                       # a row that sees no score at all
    start = (torch.full((3,), -math.inf), torch.zeros(3), torch.zeros(3, 1))
    m, l, _ = impl.softmax.online_softmax_update(*start, scores)
    assert_close(m + torch.log(l), torch.logsumexp(scores, dim=-1), atol=1e-5, what="lse = m + log l",
                 context="row 1 all -inf")


@pytest.mark.check("mixed_precision.gallery.dtypes")
def test_h_mixed_precision_linears_run_in_bf16(impl, gen):
    # as the public suite does: what the step left is judged here, against this process's own steps
    from grader.references.mixed_precision import one_step, reference_one_step

    weights = [randn(shape, gen=gen, scale=0.5) for shape in ((8, 4), (8,), (2, 8), (2,))]
    inputs, targets = randn((16, 4), gen=gen), randn((16, 2), gen=gen)
    _, params, grads = impl.run(one_step, weights, inputs, targets, torch.bfloat16, "cpu")
    assert [p.dtype for p in params] == [torch.float32] * 4, f"parameters must stay fp32: {params}"
    _, autocast_grads = reference_one_step(weights, inputs, targets, "cpu", torch.bfloat16)
    _, fp32_grads = reference_one_step(weights, inputs, targets, "cpu")
    off = max(float((g - a).abs().max()) for g, a in zip(grads, autocast_grads))
    fp32_off = max(float((f - a).abs().max()) for f, a in zip(fp32_grads, autocast_grads))
    assert off <= 0.25 * fp32_off, f"gradients off autocast's by {off:.3g}, an fp32 step's by {fp32_off:.3g}"
