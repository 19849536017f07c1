"""fuse_activations: activations exporters decompose -> their one op.

    x ─ div(√2) ─ erf ─ add(1) ─┐
    x ───────────────── mul ─ mul(0.5) ─ y       becomes      x ─ gelu ─ y

Rules (each in every operand order and grouping of its products and sums, ``passes.commute``):

1. GELU, erf form: ``x * 0.5 * (1 + erf(x / √2))`` (or ``erf(x * (1/√2))``) -> gelu;
2. GELU, tanh form: ``x * 0.5 * (1 + tanh(√(2/π) * (x + 0.044715 * x^3)))`` -> gelu(approximate);
3. SiLU: ``x * sigmoid(x)`` -> silu;
4. SwiGLU, LLaMA's MLP gate: ``silu(gate) * up`` -> swiglu (the silu as the importer wrote it
   or as rule 3 made it, a sweep before), one pass over memory instead of two; gate and up have
   one shape and dtype (a broadcast product declines).

Each constant must be a scalar in the scope within 1e-6 (relative) of its value; one that is
not declines naming it and the value it holds.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.operator import Operator
from .commute import commuted, products
from .pattern import Pattern, VarPattern, op, var
from .rewrite import Decline, RewriteContext, Rule, Rules, register_rules

__all__ = ["RULES", "GATED_RULES", "check_constant"]


def check_constant(ctx: RewriteContext, name: str, want: float, what: str) -> None:
    """Decline unless ``name`` is a scalar constant equal to ``want`` (relative 1e-6)."""
    value = ctx.value(name)
    if value is None or value.size != 1 or not math.isclose(float(np.asarray(value).reshape(())), want, rel_tol=1e-6):
        shown = "no scalar" if value is None or value.size != 1 else float(np.asarray(value).reshape(()))
        raise Decline(f"{what} {name} is {shown}, not {want:.6g}")


def _check_shape_kept(ctx: RewriteContext, x: str, out: Operator) -> None:
    """Decline when the constants broadcast x to another shape (a [1, 1, 1] factor on a 2-D x)."""
    x_shape, out_shape = ctx.var(x).shape or (), ctx.var(out.output("Out")[0]).shape or ()
    if len(x_shape) != len(out_shape):
        raise Decline(f"the constants broadcast x {list(x_shape)} to {list(out_shape)}")


def _const(name: str) -> list[VarPattern]:
    return [var(name, persistable=True)]


def _x() -> list[VarPattern]:
    return [var("x")]


def _erf_patterns() -> list[Pattern]:
    scaled = [op("elementwise_div", X=var("x"), Y=var("c", persistable=True))] + commuted("elementwise_mul", _x(), _const("c"))
    one_plus = commuted("elementwise_add", [op("erf", "erf", X=s) for s in scaled], _const("one"))
    return [Pattern(p) for p in products(_x(), _const("half"), one_plus, name="out")]


def _tanh_patterns() -> list[Pattern]:
    cube = commuted("elementwise_mul", [op("pow", "cube", X=var("x"))], _const("k"))
    inner = commuted("elementwise_mul", commuted("elementwise_add", _x(), cube), _const("c"))
    one_plus = commuted("elementwise_add", [op("tanh", X=w) for w in inner], _const("one"))
    return [Pattern(p) for p in products(_x(), _const("half"), one_plus, name="out")]


def _gelu_erf(ctx: RewriteContext, *, out: Operator, erf: Operator, x: str, c: str, one: str,
              half: str) -> Operator | Decline:
    _check_shape_kept(ctx, x, out)
    divides = ctx.block.producers(erf.input("X")[0])[0][0].type == "elementwise_div"
    check_constant(ctx, c, math.sqrt(2) if divides else 1 / math.sqrt(2), "the erf's scale")
    check_constant(ctx, one, 1.0, "the added")
    check_constant(ctx, half, 0.5, "the factor")
    return Operator("gelu", {"X": x}, {"Out": out.output("Out")}, {"approximate": False})


def _gelu_tanh(ctx: RewriteContext, *, out: Operator, cube: Operator, x: str, k: str, c: str, one: str,
               half: str) -> Operator | Decline:
    if cube.input("FactorTensor") or cube.attr("factor") != 3.0:
        return ctx.decline("the power is not a constant cube")
    _check_shape_kept(ctx, x, out)
    check_constant(ctx, k, 0.044715, "the cube's factor")
    check_constant(ctx, c, math.sqrt(2 / math.pi), "the tanh's scale")
    check_constant(ctx, one, 1.0, "the added")
    check_constant(ctx, half, 0.5, "the factor")
    return Operator("gelu", {"X": x}, {"Out": out.output("Out")}, {"approximate": True})


def _silu(ctx: RewriteContext, *, out: Operator, x: str) -> Operator:
    return Operator("silu", {"X": x}, {"Out": out.output("Out")})


RULES = Rules([
    # x * 0.5 * (1 + erf(x / sqrt(2))) -> gelu
    *(Rule(p, _gelu_erf, "gelu (erf form) -> gelu") for p in _erf_patterns()),
    # x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) -> gelu(approximate)
    *(Rule(p, _gelu_tanh, "gelu (tanh form) -> gelu") for p in _tanh_patterns()),
    # x * sigmoid(x) -> silu
    *(Rule(Pattern(p), _silu, "x * sigmoid(x) -> silu")
      for p in commuted("elementwise_mul", _x(), [op("sigmoid", X=var("x"))], name="out")),
])

def _swiglu(ctx: RewriteContext, *, out: Operator, gate: str, up: str) -> Operator:
    shapes = [tuple(ctx.var(n).shape or ()) for n in (gate, up)]
    if shapes[0] != shapes[1] or ctx.var(gate).dtype is not ctx.var(up).dtype:
        raise Decline(f"the gate {gate} {list(shapes[0])} and {up} {list(shapes[1])} differ in shape or dtype")
    return Operator("swiglu", {"X": gate, "Y": up}, {"Out": out.output("Out")})


GATED_RULES = Rules([
    # silu(gate) * up -> swiglu
    Rule(Pattern(op("elementwise_mul", "out", commutes=True, X=op("silu", X=var("gate")), Y=var("up"))), _swiglu,
         "silu(gate) * up -> swiglu"),
])

register_rules("fuse_activations", RULES + GATED_RULES,
               "Fuse GELU (erf and tanh forms) and x * sigmoid(x) into gelu and silu, and silu(gate) * up into swiglu.",
               needs_scope=True)
