"""fuse_gelu: GELU written out in elementwise ops (as PyTorch's exporters write it) -> one gelu op.

    x -> div(sqrt 2) -> erf -> add(1) -> mul(x) -> mul(0.5) -> y          becomes   x -> gelu -> y
    x -> pow(3) -> mul(0.044715) -> add(x) -> mul(sqrt(2 / pi)) -> tanh
      -> add(1) -> mul(mul(x, 0.5)) -> y                                  becomes   x -> gelu(approximate) -> y

Rules:

1. BERT's, ViT's and ConvNeXt's exact GELU, ``x * (erf(x / sqrt 2) + 1) * 0.5``;
2. GPT-2's and T5's tanh approximation (``gelu_new``), ``(x * 0.5) * (tanh(sqrt(2 / pi) *
   (x + 0.044715 * x ** 3)) + 1)``.

The constants must be one-element parameters holding those values (to float32's precision) that
leave x's shape as it is; a rule declines, naming the constant, where one differs.
"""

from __future__ import annotations

import math

import numpy as np

from halfway.ir.operator import Operator
from halfway.passes.pattern import pattern
from halfway.passes.rewrite import Decline, RewriteContext, Rule, Rules, register_rules

__all__ = ["RULES"]


def _constants_are(ctx: RewriteContext, out: Operator, x: str, wanted: dict[str, float]) -> Decline | None:
    """A decline naming the first parameter that is not one value equal to its wanted one, or
    saying that the constants broadcast x to another shape."""
    if tuple(ctx.var(out.output("Out")[0]).shape or ()) != tuple(ctx.var(x).shape or ()):
        return ctx.decline(f"the constants broadcast {x} to another shape")
    for name, value in wanted.items():
        held = ctx.value(name)
        if held is None or held.size != 1 or not np.isclose(float(held.reshape(-1)[0]), value, rtol=1e-6, atol=0):
            return ctx.decline(f"the constant {name} is not {value!r}")
    return None


def _gelu(ctx: RewriteContext, *, out: Operator, x: str, root2: str, one: str, half: str) -> Operator | Decline:
    declined = _constants_are(ctx, out, x, {root2: math.sqrt(2), one: 1.0, half: 0.5})
    if declined is not None:
        return declined
    return Operator("gelu", {"X": x}, {"Out": out.output("Out")}, {"approximate": False})


def _gelu_tanh(ctx: RewriteContext, *, out: Operator, x: str, cube: Operator, k: str, s: str, one: str, half: str
               ) -> Operator | Decline:
    if cube.attr("factor") != 3.0:
        return ctx.decline(f"the pow's factor is {cube.attr('factor')}, not 3")
    declined = _constants_are(ctx, out, x, {k: 0.044715, s: math.sqrt(2 / math.pi), one: 1.0, half: 0.5})
    if declined is not None:
        return declined
    return Operator("gelu", {"X": x}, {"Out": out.output("Out")}, {"approximate": True})


RULES = Rules([
    # x * (erf(x / sqrt 2) + 1) * 0.5 -> gelu
    Rule(pattern("out:elementwise_mul(X=elementwise_mul(X=x, Y=elementwise_add(X=erf(X=elementwise_div("
                 "X=x, Y=root2:param)), Y=one:param)), Y=half:param)"), _gelu, "erf GELU -> gelu"),
    # (x * 0.5) * (tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)) + 1) -> gelu(approximate)
    Rule(pattern("out:elementwise_mul(X=elementwise_mul(X=x, Y=half:param), Y=elementwise_add(X=tanh("
                 "X=elementwise_mul(X=elementwise_add(X=x, Y=elementwise_mul(X=cube:pow(X=x), Y=k:param)), "
                 "Y=s:param)), Y=one:param))"), _gelu_tanh, "tanh GELU -> gelu(approximate)"),
])

register_rules("fuse_gelu", RULES, "Fuse GELU written out in elementwise ops (erf or tanh form) into one gelu op.",
               needs_scope=True)
