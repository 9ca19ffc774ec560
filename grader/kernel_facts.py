"""What a submitted module's Triton kernels do, read from its source text (never imported).

Hints use these facts to say only what can apply to this code: TF32 only where a kernel calls `tl.dot`
without asking for IEEE products, "accumulate in float32" only where no kernel mentions float32, the
softmax padding-lane cause only where a masked `tl.load` fills its padding with something else than -inf.
A kernel is a function whose decorators mention `jit` (`@triton.jit`, `@triton.autotune(...)` above it
counts with it, as do helpers decorated with `@triton.jit` that the kernels call).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

# keyword values of tl.dot that rule TF32 out
_IEEE_KEYWORDS = {("input_precision", "ieee"), ("allow_tf32", False)}
_MINUS_INF = re.compile(r"^-\s*(float\(\s*['\"]inf['\"]\s*\)|(math|np|numpy|torch)\.inf)$"
                        r"|^float\(\s*['\"]-inf['\"]\s*\)$")


@dataclass(frozen=True)
class KernelFacts:
    dots: int = 0                       # tl.dot calls in kernels
    dots_not_ieee: int = 0              # of them, those not asking for IEEE products by a constant keyword
    mentions_float32: bool = False      # some kernel names float32 (an accumulator, a cast)
    loads_padded_not_neg_inf: int = 0   # masked tl.load whose `other` is absent or a constant other than -inf

    @property
    def may_multiply_in_tf32(self) -> bool:
        return self.dots_not_ieee > 0


@functools.lru_cache(maxsize=16)
def kernel_facts(source: str | None) -> KernelFacts | None:
    """The facts of `source`'s kernels; None when there is no source or it does not parse."""
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    kernels = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               and any("jit" in ast.unparse(decorator) for decorator in node.decorator_list)]
    dots = not_ieee = padded = 0
    float32 = False
    for kernel in kernels:
        for node in ast.walk(kernel):
            if isinstance(node, ast.Attribute) and node.attr == "float32":
                float32 = True
            elif isinstance(node, ast.Constant) and node.value in ("float32", "fp32"):
                float32 = True
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr == "dot":
                dots += 1
                not_ieee += not _asks_for_ieee(node)
            elif node.func.attr == "load" and _masked(node) and not _pads_with_minus_inf(node):
                padded += 1
    return KernelFacts(dots, not_ieee, float32, padded)


def _keyword(call: ast.Call, name: str):
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def _masked(call: ast.Call) -> bool:
    return _keyword(call, "mask") is not None or len(call.args) > 1


def _asks_for_ieee(call: ast.Call) -> bool:
    return any(isinstance(k.value, ast.Constant) and (k.arg, k.value.value) in _IEEE_KEYWORDS for k in call.keywords)


def _pads_with_minus_inf(call: ast.Call) -> bool:
    """True unless `other` is missing (padding reads 0) or a constant that is not -inf; a variable is
    given the benefit of the doubt."""
    other = _keyword(call, "other")
    if other is None:
        other = call.args[2] if len(call.args) > 2 else None
    if other is None:
        return False
    text = ast.unparse(other).replace(" ", "")
    if _MINUS_INF.match(text):
        return True
    return not isinstance(other, (ast.Constant, ast.UnaryOp))
