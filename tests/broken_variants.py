"""Deliberately broken variants of the reference solutions, built on demand from solutions/.

Each variant is the current solution with one realistic bug, written as exact text edits, so it stays
in step with solutions/: an edit whose text is gone fails loudly instead of testing a stale copy.
The test_broken_<module>.py files run the hidden suite against each and assert it catches the bug.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Variant:
    module: str
    bug: str
    edits: tuple[tuple[str, str], ...]    # (exact text in the solution, what replaces it)


VARIANTS = {
    "softmax_no_rescale": Variant("softmax", "l and acc are never rescaled when the running max grows", (
        ("    new_l = l * rescale + weights.sum(dim=-1)",
         "    new_l = l + weights.sum(dim=-1)  # BUG: the old terms keep their old base"),
        ("    new_acc = acc * rescale.unsqueeze(-1) + (weights.unsqueeze(-1) * values).sum(dim=-2)",
         "    new_acc = acc + (weights.unsqueeze(-1) * values).sum(dim=-2)  # BUG: no * rescale"),
        ("running_sum = running_sum * tl.exp(running_max - base) + tl.sum(tl.exp(x - base), axis=0)",
         "running_sum = running_sum + tl.sum(tl.exp(x - base), axis=0)  # BUG: old sum not rescaled"),
    )),
    "softmax_no_max": Variant("softmax", "the Triton kernels take exp(x) without subtracting the row max", (
        ("    weights = tl.exp(x - base[:, None])",
         "    weights = tl.exp(x)  # BUG: exp(1000) is inf"),
        ("running_sum = running_sum * tl.exp(running_max - base) + tl.sum(tl.exp(x - base), axis=0)",
         "running_sum = running_sum + tl.sum(tl.exp(x), axis=0)  # BUG: no max subtracted"),
        ("        y = tl.exp(x.to(tl.float32) - base) * inv_sum",
         "        y = tl.exp(x.to(tl.float32)) * inv_sum  # BUG: no max subtracted"),
    )),
    "mp_never_unscaled": Variant("mixed_precision", "step() checks the scaled gradients for inf but never divides "
                                 "them by the scale, so SGD moves S times too far", (
        ("        found_inf = self.unscale_(optimizer)\n        if not found_inf:",
         "        found_inf = not all(torch.isfinite(p.grad).all() for group in optimizer.param_groups\n"
         "                            for p in group[\"params\"] if p.grad is not None)  # BUG: never unscaled\n"
         "        if not found_inf:"),
    )),
    "mp_bf16_master_weights": Variant("mixed_precision", "the model is cast to the compute dtype, so the "
                                      "optimizer updates bf16 weights and tiny steps round away", (
        ("    not_fp32 = [(name, p.dtype) for name, p in model.named_parameters() if p.dtype != torch.float32]\n"
         "    if not_fp32:\n"
         "        raise ValueError(f\"master parameters must be torch.float32; got {not_fp32[:3]}\")\n", ""),
        ("    with torch.autocast(device_type=device_type, dtype=compute_dtype):\n"
         "        loss = loss_fn(model(inputs), targets)",
         "    model.to(compute_dtype)  # BUG: \"just train in bf16\"\n"
         "    loss = loss_fn(model(inputs.to(compute_dtype)), targets)"),
    )),
    "mp_no_inf_check": Variant("mixed_precision", "unscale_ never looks for inf/NaN, so an overflowing step "
                               "is taken and the scale never backs off", (
        ("                param.grad.mul_(inv_scale)\n"
         "                if not torch.isfinite(param.grad).all():\n"
         "                    found_inf = True",
         "                param.grad.mul_(inv_scale)  # BUG: no check for inf/NaN gradients"),
    )),
    "matmul_block16": Variant("matmul", "correct but slow: 16 x 16 x 16 tiles, no autotuning (caught only by "
                              "timing on a GPU: make bench, the perf check)", (
        ("    configs=INTERPRETER_CONFIGS if INTERPRETING else HOPPER_CONFIGS,",
         "    configs=[_config(16, 16, 16, num_stages=1, num_warps=1, group_m=1)],  # BUG: tiny tiles"),
    )),
    "matmul_no_mask": Variant("matmul", "loads are unmasked: edge tiles read past the matrix", (
        ("        k_in_bounds = offs_k < K - k_start  # false only in the last, partial K-slice\n"
         "        a_tile = tl.load(a_ptrs, mask=rows_in_bounds[:, None] & k_in_bounds[None, :], other=0.0)\n"
         "        b_tile = tl.load(b_ptrs, mask=k_in_bounds[:, None] & cols_in_bounds[None, :], other=0.0)",
         "        a_tile = tl.load(a_ptrs)  # BUG: only the store is masked\n"
         "        b_tile = tl.load(b_ptrs)"),
    )),
    "matmul_calls_torch": Variant("matmul", "fp32 inputs are handed to torch.matmul", (
        ("    check_matmul_inputs(a, b)\n    M, K = a.shape\n",
         "    check_matmul_inputs(a, b)\n    M, K = a.shape\n"
         "    if a.dtype == torch.float32:\n"
         "        return torch.matmul(a, b)  # BUG: cuBLAS instead of the kernel\n"),
    )),
    "matmul_fp16_accumulate": Variant("matmul", "the running sum is kept in the output dtype", (
        ("    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
         "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)  # BUG: low-precision sum"),
        ("        acc = tl.dot(a_tile, b_tile, acc, input_precision=INPUT_PRECISION)",
         "        acc += tl.dot(a_tile, b_tile, input_precision=INPUT_PRECISION).to(c_ptr.dtype.element_ty)"),
    )),
    "fa_no_causal_mask": Variant("flash_attention", "the forward's diagonal tiles skip the causal mask", (
        ("            visible = mask_n[None, :]\n"
         "            if IS_CAUSAL:\n"
         "                visible = visible & (offs_m[:, None] >= offs_n[None, :])\n"
         "            qk = tl.where(visible, qk, float(\"-inf\"))",
         "            visible = mask_n[None, :]  # BUG: the causal mask is missing\n"
         "            qk = tl.where(visible, qk, float(\"-inf\"))"),
    )),
    "fa_no_rescale": Variant("flash_attention", "the forward never rescales acc when the running max grows", (
        ("        acc = acc * alpha[:, None]\n", "        # BUG: acc is not rescaled by alpha\n"),
    )),
    "fa_pytorch_no_rescale": Variant("flash_attention", "the PyTorch forward never rescales l and acc", (
        ("            l_i = l_i * alpha + p.sum(dim=-1)\n            acc = acc * alpha[..., None] + p @ v_j",
         "            l_i = l_i + p.sum(dim=-1)  # BUG: old terms keep their old max\n            acc = acc + p @ v_j"),
    )),
    "fa_lse_without_max": Variant("flash_attention", "the PyTorch forward's lse is ln l, the max never added back", (
        ("        lse[:, :, q0:q0 + q_i.shape[-2]] = m_i + torch.log(l_i)",
         "        lse[:, :, q0:q0 + q_i.shape[-2]] = torch.log(l_i)  # BUG: l is relative to m_i"),
    )),
    "fa_saves_p": Variant("flash_attention", "the Triton autograd Function saves the full P for backward", (
        ("        o, lse = (o4.squeeze(1), lse.squeeze(1)) if ctx.squeeze else (o4, lse)\n"
         "        ctx.save_for_backward(q, k, v, o, lse)",
         "        o, lse = (o4.squeeze(1), lse.squeeze(1)) if ctx.squeeze else (o4, lse)\n"
         "        scores = q4.float() @ k4.float().transpose(-1, -2) / math.sqrt(q4.shape[-1])  # BUG: n x n\n"
         "        if is_causal:\n"
         "            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float(\"-inf\"))\n"
         "        p = torch.softmax(scores, dim=-1)\n"
         "        ctx.save_for_backward(q, k, v, o, lse, p)"),
        ("        q, k, v, o, lse, grad_o = _saved_as_4d(ctx, grad_o)\n"
         "        dq, dk, dv = _launch_bwd(q, k, v, o, lse, grad_o, ctx.is_causal)",
         "        q, k, v, o, lse, p = ctx.saved_tensors\n"
         "        if ctx.squeeze:\n"
         "            q, k, v, o, grad_o = (t.unsqueeze(1) for t in (q, k, v, o, grad_o))\n"
         "        scale = 1.0 / math.sqrt(q.shape[-1])\n"
         "        do = grad_o.float()\n"
         "        dv = (p.transpose(-1, -2) @ do).to(v.dtype)\n"
         "        dp = do @ v.float().transpose(-1, -2)\n"
         "        ds = p * (dp - (do * o.float()).sum(-1, keepdim=True))\n"
         "        dq = (ds @ k.float() * scale).to(q.dtype)\n"
         "        dk = (ds.transpose(-1, -2) @ q.float() * scale).to(k.dtype)"),
    )),
    "fa_no_boundary_mask": Variant("flash_attention", "the kernels have no boundary masks: a length that is "
                                   "not a multiple of the tile reads out of bounds and kills the process", (
        ("    grid = (triton.cdiv(n_q, cfg[\"BLOCK_M\"]), batch * heads)\n",
         "    if n_q % cfg[\"BLOCK_M\"] or n_k % cfg[\"BLOCK_N\"]:\n"
         "        os._exit(139)  # BUG: stands for the unmasked loads' out-of-bounds access (a segfault)\n"
         "    grid = (triton.cdiv(n_q, cfg[\"BLOCK_M\"]), batch * heads)\n"),
    )),
    "fa_calls_sdpa": Variant("flash_attention", "the 'Triton' forward calls scaled_dot_product_attention", (
        ('    """Run `_attn_fwd` on 4-D tensors; returns (o, lse) with lse fp32 [batch, heads, n_q]."""\n',
         '    """Run `_attn_fwd` on 4-D tensors; returns (o, lse) with lse fp32 [batch, heads, n_q]."""\n'
         "    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])  # BUG: PyTorch\n"
         "    if is_causal:\n"
         "        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float(\"-inf\"))\n"
         "    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(is_causal))\n"
         "    return o, torch.logsumexp(scores, dim=-1)\n"),
    )),
    # One root cause each, with a check of its own (tests/test_one_cause_one_charge.py): every other check
    # sets the cause aside, so each of these loses that check's points and nothing else.
    "fa_tf32_sized": Variant("flash_attention", "fp32 o, lse and gradients carry TF32-sized error (cut to 10 "
                             "mantissa bits: what tl.dot without input_precision=\"ieee\" does on a GPU)", (
        ("def _dot_precision(dtype):",
         "@_jit\n"
         "def _tf32_sized(x):  # BUG stand-in: the error TF32 products make, on any machine\n"
         "    return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n\n\n"
         "def _dot_precision(dtype):"),
        ("    tl.store(o_ptrs, o.to(o_ptr.dtype.element_ty), mask=mask_m[:, None])",
         "    if DOT_PRECISION == \"ieee\":\n"
         "        o, lse = _tf32_sized(o), _tf32_sized(lse)\n"
         "    tl.store(o_ptrs, o.to(o_ptr.dtype.element_ty), mask=mask_m[:, None])"),
        ("    dk = dk * sm_scale\n",
         "    dk = dk * sm_scale\n"
         "    if DOT_PRECISION == \"ieee\":\n"
         "        dk, dv = _tf32_sized(dk), _tf32_sized(dv)\n"),
        ("    dq = dq * sm_scale\n",
         "    dq = dq * sm_scale\n"
         "    if DOT_PRECISION == \"ieee\":\n"
         "        dq = _tf32_sized(dq)\n"),
    )),
    # The real TF32 mistake, for a GPU run (the interpreter multiplies exactly, so on a CPU these score
    # like the reference): the stand-ins above emulate its error where it cannot happen.
    "fa_tf32_products": Variant("flash_attention", "float32 tiles multiplied in TF32 (tl.dot's GPU default): "
                                "input_precision=\"ieee\" is never passed", (
        ('    return "ieee" if dtype == torch.float32 else "tf32"',
         '    return "tf32"  # BUG: float32 inputs multiplied in TF32 on a GPU'),
    )),
    "matmul_tf32_products": Variant("matmul", "float32 tiles multiplied in TF32 (tl.dot's GPU default)", (
        ('        INPUT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32",',
         '        INPUT_PRECISION="tf32",  # BUG: float32 inputs multiplied in TF32 on a GPU'),
    )),
    "fa_float32_output": Variant("flash_attention", "the Triton forward returns o in float32 for bf16 and fp16 "
                                 "inputs (the accumulator's dtype, never rounded to the inputs')", (
        ("    o = torch.empty_like(q)\n    lse = torch.empty((batch, heads, n_q)",
         "    o = torch.empty_like(q, dtype=torch.float32)  # BUG: o should have q's dtype\n"
         "    lse = torch.empty((batch, heads, n_q)"),
        ("    delta = torch.empty_like(lse)\n",
         "    delta = torch.empty_like(lse)\n    o, grad_o = o.to(q.dtype), grad_o.to(q.dtype)\n"),
    )),
    "fa_pytorch_default_device": Variant("flash_attention", "the PyTorch version allocates on the default device "
                                         "(no device=q.device), so CUDA inputs meet CPU tensors", (
        ("    o = torch.empty(q4.shape, dtype=torch.float32, device=q.device)\n"
         "    lse = torch.empty(q4.shape[:-1], dtype=torch.float32, device=q.device)",
         "    o = torch.empty(q4.shape, dtype=torch.float32)  # BUG: on the default device\n"
         "    lse = torch.empty(q4.shape[:-1], dtype=torch.float32)"),
        ("    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)\n"
         "    dk = torch.zeros(k.shape, dtype=torch.float32, device=q.device)\n"
         "    dv = torch.zeros(v.shape, dtype=torch.float32, device=q.device)",
         "    dq = torch.zeros(q.shape, dtype=torch.float32)  # BUG: on the default device\n"
         "    dk = torch.zeros(k.shape, dtype=torch.float32)\n"
         "    dv = torch.zeros(v.shape, dtype=torch.float32)"),
    )),
    "matmul_tf32_sized": Variant("matmul", "fp32 products carry TF32-sized error (the result cut to 10 mantissa "
                                 "bits: what tl.dot without input_precision=\"ieee\" does on a GPU)", (
        ("    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn\n",
         "    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn\n"
         "    if INPUT_PRECISION == \"ieee\":  # BUG stand-in: the error TF32 products make, on any machine\n"
         "        acc = (acc.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n"),
    )),
    "matmul_autotune_three": Variant("matmul", "not a bug: three autotuning configs on every machine, the "
                                     "interpreter included (it has no benchmarker)", (
        ("    configs=INTERPRETER_CONFIGS if INTERPRETING else HOPPER_CONFIGS,",
         "    configs=[_config(32, 32, 32, num_stages=1, num_warps=4, group_m=4),\n"
         "             _config(64, 32, 64, num_stages=2, num_warps=4),\n"
         "             _config(32, 64, 32, num_stages=3, num_warps=4)],"),
    )),
    "softmax_no_boundary_mask": Variant("softmax", "the one-pass kernel loads and stores without a mask: rows "
                                        "shorter than the block read and write past the tensor, which corrupts "
                                        "the process's memory (under the CPU interpreter it aborts, now or later)", (
        ("    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=in_bounds, other=float(\"-inf\"))",
         "    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :])  # BUG: no mask"),
        ("    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), "
         "mask=in_bounds)",
         "    tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty))  # BUG"),
    )),
    "softmax_padding_zero": Variant("softmax", "the one-pass kernel's masked load pads with 0, so the padding "
                                    "lanes add exp(0 - max) to every short row's sum", (
        ("    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=in_bounds, other=float(\"-inf\"))",
         "    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=in_bounds)  # BUG: pads with 0"),
    )),
    "acc_forward_only_6nd": Variant("accounting", "training FLOPs count the forward pass only (2ND)", (
        ("    return _exact(6 * n_params * n_tokens)",
         "    return _exact(2 * n_params * n_tokens)  # BUG: 2 FLOPs per parameter per token"),
    )),
    "acc_waves_floor": Variant("accounting", "waves are rounded down, dropping the partial last wave", (
        ("    return -(-n_tiles // slots)\n", "    return n_tiles // slots  # BUG: floor\n"),
    )),
}


def build_variant(name: str, root: Path) -> Path:
    """Write root/<name>/<module>.py (the solution with the bug) and return the folder."""
    variant = VARIANTS[name]
    source = (REPO / "solutions" / f"{variant.module}.py").read_text()
    for old, new in variant.edits:
        count = source.count(old)
        if count != 1:
            raise AssertionError(f"broken variant {name}: the text to break occurs {count} times in "
                                 f"solutions/{variant.module}.py (update tests/broken_variants.py): {old[:80]!r}")
        source = source.replace(old, new)
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{variant.module}.py").write_text(f"# BROKEN ON PURPOSE ({name}): {variant.bug}\n{source}")
    return folder


def suite_failures(suite: str, impl: Path | str, report: Path, keyword: str = "",
                   timeout: float = 600) -> dict[str, tuple[str, str]]:
    """{test name: (outcome, failure message)} from running `suite` (optionally `-k keyword`) against `impl`
    as a student would (in-process): the message is what the student reads."""
    command = [sys.executable, "-m", "pytest", suite, "--impl", str(impl), "-q", "-p", "no:cacheprovider",
               f"--junitxml={report}"] + (["-k", keyword] if keyword else [])
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert Path(report).exists(), f"the suite did not run:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        outcome = "failed" if failure is not None else "skipped" if case.find("skipped") is not None else "passed"
        found[case.get("name")] = (outcome, "" if failure is None else (failure.text or failure.get("message", "")))
    return found


def hidden_suite_outcomes(suite: str, impl: Path | str, report: Path, timeout: float = 600) -> dict[str, str]:
    """{test name: "passed" | "failed" | "skipped"} from running `suite` against `impl` in a subprocess.

    The run must end with some tests failed (exit 1): a broken module that passes everything, or a
    suite that could not start, fails the caller's fixture here.
    """
    command = [sys.executable, "-m", "pytest", suite, "--impl", str(impl), "-q", "-p", "no:cacheprovider",
               f"--junitxml={report}"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert Path(report).exists(), f"the hidden suite did not run:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        outcomes[case.get("name")] = "failed" if failed else "skipped" if skipped else "passed"
    assert run.returncode == 1, f"expected some hidden tests to fail (exit 1), got {run.returncode}"
    return outcomes


def junit_failures(report: Path) -> dict[str, str]:
    """{test name: the failure's message and text} for each failed test of a junit report."""
    failures = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            failures[case.get("name")] = f"{failure.get('message', '')}\n{failure.text or ''}"
    return failures
