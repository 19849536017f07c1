"""fuse_norm: RMSNorm as exporters decompose it -> one rms_norm.

    x ─ pow(2) ─ reduce_mean ─ add(eps) ─ sqrt ─ reciprocal ─┐
    x ─────────────────────────────────────────────────────── mul ─ mul(w) ─ y
                                                 becomes      x ─ rms_norm(w, eps) ─ y

The square is ``pow(x, 2)`` or ``x * x``; the mean is over the last dim, kept; the inverse root is
``reciprocal(sqrt(.))`` or ``1 / sqrt(.)`` times x, or x divided by the root; the weight is a
parameter of the last dim's size. Every product and sum in any operand order (``passes.commute``).

A decomposed layer_norm (mean, centring, variance) reads its centred value twice, which these
patterns cannot take as one match; today's exporters write ONNX's LayerNormalization, which the
importer maps to layer_norm. A residual add before a layer_norm or rms_norm stays an add: halfway
has no fused add + norm op, and the norm reads the sum once either way.
"""

from __future__ import annotations

from halfway.ir.operator import Operator
from halfway.passes.commute import commuted
from halfway.passes.fuse_activations import check_constant
from halfway.passes.pattern import Pattern, op, var
from halfway.passes.rewrite import Decline, RewriteContext, Rule, Rules, register_rules

__all__ = ["RULES"]


def _patterns() -> list[Pattern]:
    x, eps = [var("x")], [var("eps", persistable=True)]
    squares = [op("pow", "square", X=var("x")), op("elementwise_mul", "square", X=var("x"), Y=var("x"))]
    roots = [op("sqrt", X=a) for a in commuted("elementwise_add", [op("reduce_mean", "mean", X=s) for s in squares], eps)]
    inverses = [op("reciprocal", X=r) for r in roots] + [op("elementwise_div", X=var("one", persistable=True), Y=r)
                                                          for r in roots]
    normed = commuted("elementwise_mul", x, inverses) + [op("elementwise_div", X=var("x"), Y=r) for r in roots]
    return [Pattern(p) for p in commuted("elementwise_mul", normed, [var("w", persistable=True)], name="out")]


def _rms_norm(ctx: RewriteContext, *, out: Operator, square: Operator, mean: Operator, x: str, eps: str, w: str,
              one: str | None = None) -> Operator | Decline:
    shape = ctx.var(x).shape or ()
    if square.type == "pow" and (square.input("FactorTensor") or square.attr("factor") != 2.0):
        return ctx.decline("the power is not a constant square")
    if tuple(mean.attr("dim")) not in ((-1,), (len(shape) - 1,)) or not mean.attr("keep_dim") or mean.attr("reduce_all"):
        return ctx.decline(f"the mean is over dims {list(mean.attr('dim'))}, not the last one kept")
    if not shape or shape[-1] < 0 or tuple(ctx.var(w).shape or ()) != (shape[-1],):
        return ctx.decline(f"the weight {w} {list(ctx.var(w).shape or ())} is not one value per feature of {list(shape)}")
    if one is not None:
        check_constant(ctx, one, 1.0, "the numerator")
    value = ctx.value(eps)
    if value is None or value.size != 1:
        return ctx.decline(f"epsilon {eps} is not a scalar constant")
    return Operator("rms_norm", {"X": x, "Scale": w}, {"Y": out.output("Out")},
                    {"begin_norm_axis": len(shape) - 1, "epsilon": float(value.reshape(()))})


RULES = Rules([
    # w * (x / sqrt(mean(x^2) + eps)) -> rms_norm
    Rule(p, _rms_norm, "rms norm -> rms_norm") for p in _patterns()
])

register_rules("fuse_norm", RULES, "Fuse RMSNorm's decomposition into rms_norm.", needs_scope=True)
