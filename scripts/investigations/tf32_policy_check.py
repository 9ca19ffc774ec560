"""TF32 policy check, for a GPU: the fp32 attention and matmul checks against the reference
and against the same code with `tl.dot(..., input_precision="tf32")`, printing each error against its
bound. The policy under test: fp32 checks require IEEE fp32 products, so the reference passes with
room to spare and the TF32 variant fails every case with a message that names TF32.

    python scripts/investigations/tf32_policy_check.py            # on the GPU machine, from the repo root
    python scripts/investigations/tf32_policy_check.py --cpu      # smoke test of the script itself, small shapes

Triton's CPU interpreter ignores input_precision, which is why the real check needs a GPU (on --cpu
both variants pass: that proves only that the script runs).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from grader.numerics import OUTPUT_FACTOR, error_signature, lowp_allowed, max_abs_error  # noqa: E402
from grader.references import attention as ref  # noqa: E402
from grader.references.matmul import reference_and_naive  # noqa: E402

# (module, exact text in the solution, its TF32 replacement)
TF32_EDITS = {
    "flash_attention": ('    return "ieee" if dtype == torch.float32 else "tf32"', '    return "tf32"'),
    "matmul": ('INPUT_PRECISION="ieee" if a.dtype == torch.float32 else "tf32"', 'INPUT_PRECISION="tf32"'),
}
ATTENTION_SHAPES = [((2, 4, 256, 64), False), ((2, 4, 256, 64), True), ((1, 2, 300, 128), False)]
MATMUL_SHAPES = [(256, 256, 256), (512, 1024, 384), (1000, 777, 333)]


def load(module: str, tf32: bool, folder: Path):
    """solutions/<module>.py as it is, or with its fp32 tl.dot calls switched to TF32."""
    source = (REPO / "solutions" / f"{module}.py").read_text()
    if tf32:
        old, new = TF32_EDITS[module]
        assert source.count(old) == 1, f"solutions/{module}.py changed: update TF32_EDITS ({old!r})"
        source = source.replace(old, new)
    path = folder / f"{module}_{'tf32' if tf32 else 'ieee'}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def line(case: str, what: str, comparisons: dict) -> str:
    cells = []
    for variant, (error, allowed, scale) in comparisons.items():
        verdict = "pass" if error <= allowed else "FAIL"
        cells.append(f"{variant} {error:9.3g} / {allowed:9.3g} = {error / allowed:7.3f} {verdict}")
    hint = error_signature(comparisons["tf32"][0], comparisons["tf32"][2], torch.float32, torch.float32)
    return f"{case:34} {what:4} " + " | ".join(cells) + (" | names TF32" if hint else " | NO TF32 HINT")


def attention_rows(modules, gen, device, small):
    for shape, is_causal in ATTENTION_SHAPES[:1] if small else ATTENTION_SHAPES:
        shape = (1, 1, 64, 32) if small else shape
        q, k, v = ref.random_qkv(shape, shape[-2], torch.float32, device, gen)
        grad_o = torch.randn(shape, generator=gen).to(device)
        measured = {}
        for name, module in modules.items():
            o, lse = module.flash_attention_forward(q, k, v, is_causal)
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            module.flash_attention(*leaves, is_causal).backward(grad_o)
            comparisons = ref.forward_comparisons(o, lse, q, k, v, is_causal)
            comparisons += ref.backward_comparisons([t.grad for t in leaves], q, k, v, grad_o, is_causal)
            for what, actual, reference, naive, factor in comparisons:
                allowed, scale = lowp_allowed(actual.dtype, reference, naive, factor=factor,
                                              ulps=ref._ulps(factor))
                measured.setdefault(what, {})[name] = (max_abs_error(actual, reference), allowed, scale)
        for what, by_variant in measured.items():
            yield line(f"attention {shape} causal={is_causal}", what, by_variant)


def matmul_rows(modules, gen, device, small):
    for M, K, N in [(64, 64, 32)] if small else MATMUL_SHAPES:
        a = torch.randn(M, K, generator=gen).to(device)
        b = torch.randn(K, N, generator=gen).to(device)
        reference, naive = reference_and_naive(a, b)
        measured = {}
        for name, module in modules.items():
            allowed, scale = lowp_allowed(torch.float32, reference, naive, factor=OUTPUT_FACTOR, floor=1e-5)
            measured[name] = (max_abs_error(module.matmul(a, b), reference), allowed, scale)
        yield line(f"matmul M={M} K={K} N={N}", "c", measured)


def main(argv) -> int:
    small = "--cpu" in argv
    if small:
        os.environ["TRITON_INTERPRET"] = "1"   # before the solutions import Triton
    elif not torch.cuda.is_available():
        print("needs a GPU: Triton's CPU interpreter ignores input_precision (--cpu smoke-tests the script)")
        return 2
    device = "cpu" if small else "cuda"
    name = "CPU interpreter (smoke test)" if small else torch.cuda.get_device_name(0)
    print(f"{name}; each cell: max error / bound = ratio (policy: ieee <= 0.5, tf32 > 1)")
    gen = torch.Generator().manual_seed(15)
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for module, rows in (("flash_attention", attention_rows), ("matmul", matmul_rows)):
            variants = {name: load(module, name == "tf32", Path(folder)) for name in ("ieee", "tf32")}
            for row in rows(variants, gen, device, small):
                print(row)
                failures += "ieee" in row and row.split("ieee")[1].split("|")[0].split()[-1] == "FAIL"
    print("reference failures:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
