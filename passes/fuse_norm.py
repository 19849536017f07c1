"""fuse_norm: RMSNorm and LayerNorm as exporters decompose them -> one rms_norm / layer_norm, and
the residual add before either into it.

    x ─ pow(2) ─ reduce_mean ─ add(eps) ─ sqrt ─ reciprocal ─┐
    x ─────────────────────────────────────────────────────── mul ─ mul(w) ─ y
                                                 becomes      x ─ rms_norm(w, eps) ─ y

    x ─ reduce_mean ─ sub ─ d ─ pow(2) ─ reduce_mean ─ add(eps) ─ sqrt ─┐
                           d ──────────────────────────────────────── div ─ mul(w) ─ add(b) ─ y
                                                 becomes      x ─ layer_norm(w, b, eps) ─ y

Rules:

1. RMSNorm: the square is ``pow(x, 2)`` or ``x * x``; the mean is over the last dim, kept; the
   inverse root is ``reciprocal(sqrt(.))`` or ``1 / sqrt(.)`` times x, or x divided by the root;
   the weight is a parameter of the last dim's size.
2. LayerNorm (what exporters write below opset 17, where ONNX has no LayerNormalization): the
   centred ``d = x - mean(x)`` is squared (``pow(d, 2)`` or ``d * d``) and normalised as RMSNorm's
   x is, then scaled by a weight and shifted by a bias (or only scaled), both parameters of the
   last dim's size. The pattern reads ``d`` twice (``passes.pattern``'s references).
3. Then (a second phase, over the norms the first made too): a residual add and the layer_norm
   or rms_norm reading it, ``layer_norm(x + y)`` -> skip_layer_norm and ``rms_norm(x + y)`` ->
   skip_rms_norm, one pass over memory instead of two. x and y have one shape. Where other ops
   read the sum (a pre-norm transformer's residual stream), the skip norm writes it as its Sum
   output; a reader of the sum before the norm, or of the layer_norm's Mean or Variance, declines,
   and so does an rms_norm's Scale that broadcasts over normalised dims.

Every product and sum in either operand order (``passes.commute``).
"""

from __future__ import annotations

from ..ir.operator import Operator
from .commute import Operand, commuted
from .fuse_activations import check_constant
from .pattern import OpPattern, Pattern, op, var
from .rewrite import Decline, RewriteContext, Rule, Rules, register_rules

__all__ = ["RULES", "SKIP_RULES"]


def _normalised(x: Operand, d: str, mean: str) -> list[OpPattern]:
    """``x / sqrt(mean(x^2) + eps)`` in its forms, the square reading var ``d`` (x's name, or that
    of the op computing x)."""
    squares = [op("pow", "square", X=var(d)), op("elementwise_mul", "square", X=var(d), Y=var(d))]
    sums = commuted("elementwise_add", [op("reduce_mean", mean, X=s) for s in squares], [var("eps", persistable=True)])
    roots = [op("sqrt", X=a) for a in sums]
    inverses = [op("reciprocal", X=r) for r in roots] + [op("elementwise_div", X=var("one", persistable=True), Y=r)
                                                          for r in roots]
    return commuted("elementwise_mul", [x], inverses) + [op("elementwise_div", X=x, Y=r) for r in roots]


def _weighted(normed: list[OpPattern], name: str | None = None) -> list[OpPattern]:
    return commuted("elementwise_mul", normed, [var("w", persistable=True)], name=name)


def _rms_patterns() -> list[Pattern]:
    return [Pattern(p) for p in _weighted(_normalised(var("x"), "x", "mean"), name="out")]


def _layer_norm_patterns() -> tuple[list[Pattern], list[Pattern]]:
    """(with a bias, without one)."""
    centred = op("elementwise_sub", "centred", X=var("x"), Y=op("reduce_mean", "mean", X=var("x")))
    normed = _normalised(centred, "centred", "variance")
    biased = commuted("elementwise_add", _weighted(normed), [var("b", persistable=True)], name="out")
    return [Pattern(p) for p in biased], [Pattern(p) for p in _weighted(normed, name="out")]


def _check_square(square: Operator) -> None:
    if square.type == "pow" and (square.input("FactorTensor") or square.attr("factor") != 2.0):
        raise Decline("the power is not a constant square")


def _check_last_dim(mean: Operator, rank: int, what: str) -> None:
    if tuple(mean.attr("dim")) not in ((-1,), (rank - 1,)) or not mean.attr("keep_dim") or mean.attr("reduce_all"):
        raise Decline(f"the {what} is over dims {list(mean.attr('dim'))}, not the last one kept")


def _check_vector(ctx: RewriteContext, name: str, shape: tuple[int, ...], what: str) -> None:
    if not shape or shape[-1] < 0 or tuple(ctx.var(name).shape or ()) != (shape[-1],):
        raise Decline(f"the {what} {name} {list(ctx.var(name).shape or ())} is not one value per feature of "
                      f"{list(shape)}")


def _epsilon(ctx: RewriteContext, eps: str, one: str | None) -> float:
    if one is not None:
        check_constant(ctx, one, 1.0, "the numerator")
    value = ctx.value(eps)
    if value is None or value.size != 1:
        raise Decline(f"epsilon {eps} is not a scalar constant")
    return float(value.reshape(()))


def _rms_norm(ctx: RewriteContext, *, out: Operator, square: Operator, mean: Operator, x: str, eps: str, w: str,
              one: str | None = None) -> Operator:
    shape = tuple(ctx.var(x).shape or ())
    _check_square(square)
    _check_last_dim(mean, len(shape), "mean")
    _check_vector(ctx, w, shape, "weight")
    if _centred(ctx, x):
        raise Decline(f"{x} is centred (x - mean(x)): the layer norm rules take it")
    return Operator("rms_norm", {"X": x, "Scale": w}, {"Y": out.output("Out")},
                    {"begin_norm_axis": len(shape) - 1, "epsilon": _epsilon(ctx, eps, one)})


def _layer_norm(ctx: RewriteContext, *, out: Operator, centred: Operator, mean: Operator, square: Operator,
                variance: Operator, x: str, eps: str, w: str, b: str | None = None,
                one: str | None = None) -> Operator:
    shape = tuple(ctx.var(x).shape or ())
    _check_square(square)
    _check_last_dim(mean, len(shape), "mean")
    _check_last_dim(variance, len(shape), "variance")
    _check_vector(ctx, w, shape, "weight")
    inputs = {"X": x, "Scale": w}
    if b is None:
        _check_no_bias_follows(ctx, out.output("Out")[0], shape)
    else:
        _check_vector(ctx, b, shape, "bias")
        inputs["Bias"] = b
    return Operator("layer_norm", inputs, {"Y": out.output("Out")},
                    {"begin_norm_axis": len(shape) - 1, "epsilon": _epsilon(ctx, eps, one)})


def _centred(ctx: RewriteContext, name: str) -> bool:
    """Whether ``name`` is ``a - reduce_mean(a)``."""
    writers = ctx.block.producers(name)
    if len(writers) != 1 or writers[0][0].type != "elementwise_sub":
        return False
    sub = writers[0][0]
    means = ctx.block.producers(sub.input("Y")[0])
    return len(means) == 1 and means[0][0].type == "reduce_mean" and means[0][0].input("X") == sub.input("X")


def _check_no_bias_follows(ctx: RewriteContext, y: str, shape: tuple[int, ...]) -> None:
    """Leave a layer_norm without bias to the rule with one where a bias add reads it."""
    uses = ctx.block.uses(y)
    if len(uses) != 1 or uses[0][0].type != "elementwise_add":
        return
    other = [n for n in uses[0][0].input_names() if n != y]
    if len(other) == 1 and ctx.var(other[0]).persistable and tuple(ctx.var(other[0]).shape or ()) == shape[-1:]:
        raise Decline(f"a bias add reads it ({uses[0][0].describe()}): the layer norm with a bias takes both")


def _skip_norm(ctx: RewriteContext, *, norm: Operator, total: Operator, x: str, y: str) -> Operator:
    stats = [n for slot in ("Mean", "Variance") for n in norm.output(slot) if ctx.block.uses(n)]
    if stats:
        raise Decline(f"the layer norm's statistics {stats} are read")
    if norm.type == "rms_norm" and norm.input("Scale"):
        _check_per_entry(ctx, norm.input("Scale")[0], tuple(ctx.var(x).shape or ())[norm.attr("begin_norm_axis"):])
    shapes = [tuple(ctx.var(n).shape or ()) for n in (x, y)]
    if shapes[0] != shapes[1] or ctx.var(x).dtype is not ctx.var(y).dtype:
        raise Decline(f"the residual add's operands differ: {x} {list(shapes[0])}, {y} {list(shapes[1])}")
    sum_name = total.output("Out")[0]
    block, at = ctx.block, ctx.block.op_index(norm)
    early = [use[0] for use in block.uses(sum_name) if use[0] is not norm and block.op_index(use[0]) < at]
    if early:
        raise Decline(f"{early[0].describe()} reads the sum before the norm")
    params = {slot: norm.input(slot) for slot in ("Scale", "Bias") if norm.input(slot)}
    outputs = {"Out": norm.output("Y")}
    if len(block.uses(sum_name)) > 1:
        outputs["Sum"] = (sum_name,)
    return Operator(f"skip_{norm.type}", {"X": x, "Y": y, **params}, outputs,
                    {"begin_norm_axis": norm.attr("begin_norm_axis"), "epsilon": norm.attr("epsilon")})


def _check_per_entry(ctx: RewriteContext, scale: str, normalised: tuple[int, ...]) -> None:
    """Decline unless an rms_norm's Scale holds one value per normalised entry (it may broadcast)."""
    shape = tuple(ctx.var(scale).shape or ())
    if -1 in normalised or _unpadded(shape) != _unpadded(normalised):
        raise Decline(f"the scale {scale} {list(shape)} is not one value per normalised entry {list(normalised)}")


def _unpadded(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading 1s."""
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


_SKIP = Pattern(op("layer_norm|rms_norm", "norm", open=True,
                   X=op("elementwise_add", "total", shared=True, X=var("x"), Y=var("y"))))

_BIASED, _UNBIASED = _layer_norm_patterns()

RULES = Rules([
    # w * (x / sqrt(mean(x^2) + eps)) -> rms_norm
    *(Rule(p, _rms_norm, "rms norm -> rms_norm") for p in _rms_patterns()),
    # w * ((x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)) + b -> layer_norm
    *(Rule(p, _layer_norm, "layer norm -> layer_norm") for p in _BIASED),
    # w * ((x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)) -> layer_norm without a bias
    *(Rule(p, _layer_norm, "layer norm (no bias) -> layer_norm") for p in _UNBIASED),
])

SKIP_RULES = Rules([
    # layer_norm(x + y) -> skip_layer_norm, rms_norm(x + y) -> skip_rms_norm (and the sum, where others read it)
    Rule(_SKIP, _skip_norm, "add + norm -> skip norm"),
])

register_rules("fuse_norm", [RULES, SKIP_RULES],
               "Fuse RMSNorm's and LayerNorm's decompositions into rms_norm and layer_norm, and a residual add "
               "with the norm after it into skip_layer_norm or skip_rms_norm.", needs_scope=True)
