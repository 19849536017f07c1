"""Schemas of the matrix products: matmul_v2, mul, and fc (the product with its bias and activation
that passes make) — Paddle's op types, slots, attrs and defaults."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..attrs import AttrType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op
from .families import UNARY, absorbable, fc_absorbable
from .window import ranked, same_dim

__all__ = ["GATED"]


_PLAIN_ACTIVATIONS = ("", *(name for name in absorbable() if fc_absorbable(UNARY[name])))
"""Activations ``fc`` may apply: those its epilogue computes without parameters."""
GATED = "swiglu"
"""``fc``'s gated activation: the two halves of the product's columns, silu(gate) * up."""


def _prod(dims: Sequence[int]) -> int:
    """Product of ``dims``, -1 if any is unknown."""
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _broadcast(ctx: InferContext, a: Sequence[int], b: Sequence[int]) -> list[int]:
    """numpy broadcasting of two dim lists, carrying -1 (unknown)."""
    a, b = [1] * (len(b) - len(a)) + list(a), [1] * (len(a) - len(b)) + list(b)
    out = []
    for da, db in zip(a, b):
        if da == 1 or da == db:
            out.append(db)
        elif db == 1:
            out.append(da)
        elif da < 0 or db < 0:
            out.append(max(da, db))
        else:
            ctx.fail(f"batch dims {a} and {b} do not broadcast ({da} vs {db})")
    return out


def _infer_matmul_v2(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(len(x.shape) >= 1 and len(y.shape) >= 1,
              f"X and Y must have rank >= 1, got {list(x.shape)} and {list(y.shape)}")
    xs = [1, *x.shape] if len(x.shape) == 1 else list(x.shape)
    ys = [*y.shape, 1] if len(y.shape) == 1 else list(y.shape)
    if ctx.attr("trans_x") and len(x.shape) > 1:
        xs[-1], xs[-2] = xs[-2], xs[-1]
    if ctx.attr("trans_y") and len(y.shape) > 1:
        ys[-1], ys[-2] = ys[-2], ys[-1]
    ctx.check(same_dim(xs[-1], ys[-2]),
              f"X's contracted dim {xs[-1]} != Y's {ys[-2]} (X {list(x.shape)}, Y {list(y.shape)}, "
              f"trans_x={ctx.attr('trans_x')}, trans_y={ctx.attr('trans_y')})")
    out = _broadcast(ctx, xs[:-2], ys[:-2])
    out += [xs[-2]] if len(x.shape) > 1 else []
    out += [ys[-1]] if len(y.shape) > 1 else []
    ctx.set_output("Out", out, x.dtype)


register_op(OpSchema(
    "matmul_v2", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")],
    attrs=[AttrSpec("trans_x", AttrType.BOOLEAN, False), AttrSpec("trans_y", AttrType.BOOLEAN, False)],
    infer=_infer_matmul_v2,
    doc="numpy.matmul (batch broadcasting, 1-D operands as vectors) after transposing the last two dims of "
        "X/Y when trans_x/trans_y (ignored for 1-D).",
))


def _flattened(ctx: InferContext, slot: str, attr: str) -> tuple[tuple[int, ...], int, int]:
    """(shape, col dims, flattened row length) of a mul/fc operand flattened at attr's dim."""
    shape = ctx.input(slot).shape
    cols = ctx.attr(attr)
    ctx.check(0 < cols < len(shape), f"attr {attr} must be in [1, {len(shape) - 1}] for {slot} "
                                     f"{list(shape)}, got {cols}")
    return shape, cols, _prod(shape[cols:])


def _infer_mul(ctx: InferContext) -> None:
    x, xc, k = _flattened(ctx, "X", "x_num_col_dims")
    y, yc, _ = _flattened(ctx, "Y", "y_num_col_dims")
    k_y = _prod(y[:yc])
    ctx.check(same_dim(k, k_y), f"X {list(x)} flattened at {xc} has {k} columns but Y {list(y)} flattened "
                                 f"at {yc} has {k_y} rows")
    ctx.set_output("Out", (*x[:xc], *y[yc:]), ctx.input("X").dtype)


register_op(OpSchema(
    "mul", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")],
    attrs=[AttrSpec("x_num_col_dims", AttrType.INT, 1), AttrSpec("y_num_col_dims", AttrType.INT, 1)],
    infer=_infer_mul,
    doc="X flattened to 2-D at x_num_col_dims times Y flattened at y_num_col_dims; "
        "Out = X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:].",
))


def _infer_fc(ctx: InferContext) -> None:
    x, cols, k = _flattened(ctx, "Input", "in_num_col_dims")
    w = ranked(ctx, "W", 2).shape
    pad = 4 if ctx.attr("padding_weights") else 0
    k_w, n = (w[0] - pad if w[0] >= 0 else -1), (w[1] - pad if w[1] >= 0 else -1)
    ctx.check(same_dim(k, k_w), f"Input {list(x)} flattened at {cols} has {k} columns but W {list(w)} "
                                 f"has {k_w} rows" + (" (padding_weights)" if pad else ""))
    gated = ctx.attr("activation_type") == GATED
    ctx.check(not gated or (n % 2 == 0 and not pad), f"a {GATED} fc needs W of an even number of columns (the gate's "
                                                     f"and the up projection's), has {list(w)}")
    if ctx.has_input("Bias"):
        bias = ctx.input("Bias").shape
        ok = len(bias) in (1, 2) and same_dim(bias[-1], n) and (len(bias) == 1 or same_dim(bias[0], 1))
        ctx.check(ok, f"Bias must have shape [{n}] or [1, {n}], got {list(bias)}")
    out = (*x[:cols], n // 2 if gated and n >= 0 else n)
    if ctx.has_input("ResidualData"):
        res = ctx.input("ResidualData").shape
        ctx.check(not gated and len(res) == len(out) and all(map(same_dim, res, out)),
                  f"ResidualData must have the output's shape {list(out)} (and the fc no gate), got {list(res)}")
    ctx.set_output("Out", out, ctx.input("Input").dtype)


register_op(OpSchema(
    "fc", inputs=[Slot("Input"), Slot("W"), Slot("Bias", dispensable=True), Slot("ResidualData", dispensable=True)],
    outputs=[Slot("Out")],
    attrs=[AttrSpec("in_num_col_dims", AttrType.INT, 1),
           AttrSpec("activation_type", AttrType.STRING, "", choices=(*_PLAIN_ACTIVATIONS, GATED)),
           AttrSpec("padding_weights", AttrType.BOOLEAN, False)],
    infer=_infer_fc,
    doc="Out = activation_type(Input flattened at in_num_col_dims @ W[in, out] + Bias + ResidualData), "
        "ResidualData (dispensable) of Out's shape (a residual add in the epilogue); padding_weights: W "
        "is stored [in + 4, out + 4] and only its top-left [in, out] is used. activation_type swiglu gates: of "
        "a = Input @ W + Bias with W [in, 2 N] (a SwiGLU MLP's gate and up projections side by side), Out [.., N] "
        "= silu(a[..., :N]) * a[..., N:].",
))


def _infer_determinant(ctx: InferContext) -> None:
    x = ctx.input("Input")
    ctx.check(len(x.shape) >= 2 and same_dim(x.shape[-1], x.shape[-2]),
              f"Input must be [..., M, M] (square matrices), has shape {list(x.shape)}")
    ctx.set_output("Out", x.shape[:-2], x.dtype)


register_op(OpSchema(
    "determinant", inputs=[Slot("Input")], outputs=[Slot("Out")], infer=_infer_determinant,
    doc="Out = the determinant of each [M, M] matrix of Input [..., M, M] (Paddle's op).",
))
