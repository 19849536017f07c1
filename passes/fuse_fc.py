"""fuse_fc: matmul_v2 / mul + bias elementwise_add (+ activation) -> one fc op.

    x -> matmul_v2(W) -> elementwise_add(b) -> relu -> y      becomes      x -> fc(W, b, relu) -> y

Rules (applied until nothing matches, so they chain):

1. matmul_v2 (2-D parameter W, X not transposed and of rank >= 2) + elementwise_add of a [N]
   parameter on the last dim (either operand of the add: TorchScript writes ``Add(bias, MatMul)``)
   -> fc with in_num_col_dims = rank(X) - 1; a transposed W (ONNX Gemm's transB) becomes a new
   parameter holding W.T, when the scope holds W;
2. mul (2-D parameter W, y_num_col_dims 1) + the same bias add -> fc with in_num_col_dims =
   x_num_col_dims;
3. fc without activation + an absorbable activation (``halfway.ir.ops.families``) its epilogue
   computes without parameters (``fc_absorbable``: relu, sigmoid, relu6 at 6, ...) -> fc with
   activation_type;
4. fc without activation + elementwise_mul by a parameter of one value per output column
   (either operand: ConvNeXt's and CaiT's layer scale, ``gamma * fc(x)``) -> fc with ``W * c``
   and ``Bias * c`` (computed in float64, stored as new parameters): one pass over the output
   fewer.

A pass of its own, ``fuse_residual``, runs after ``fuse_norm`` (whose skip norms take the residual
adds a norm reads):

5. fc without activation, gate or residual + elementwise_add of a value of the fc's output dims
   (either operand; ``probe_dims`` proves them equal, symbolic ones included) -> fc with that value
   as its ResidualData: the residual add in the GEMM's epilogue.
"""

from __future__ import annotations

import numpy as np

from ..ir.operator import Operator
from ..ir.ops.families import UNARY, fc_absorbable
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import probe_dims
from .fuse_channels import is_channel_bias
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op, register_rules

__all__ = ["RULES", "RESIDUAL_RULES", "fuse_residual"]

_ACTS = [name for name, row in UNARY.items() if fc_absorbable(row)]


def _fc(ctx: RewriteContext, *, add: Operator, mm: Operator, x: str, w: str, b: str) -> Operator | Decline:
    x_shape, w_shape, b_shape = (ctx.var(n).shape or () for n in (x, w, b))
    out_rank = len(ctx.var(add.output("Out")[0]).shape or ())
    transposed = mm.type == "matmul_v2" and mm.attr("trans_y")
    if len(w_shape) != 2:
        return ctx.decline(f"the weight {w} is not 2-D (shape {list(w_shape)})")
    if b_shape != (w_shape[0 if transposed else 1],) or add.attr("axis") not in (-1, out_rank - 1):
        return ctx.decline(f"the add of {b} (shape {list(b_shape)}, axis {add.attr('axis')}) is not a bias "
                           f"on the last dim")
    if mm.type == "mul":
        if mm.attr("y_num_col_dims") != 1:
            return ctx.decline("mul's y_num_col_dims is not 1")
        cols = mm.attr("x_num_col_dims")
    else:
        if mm.attr("trans_x") or len(x_shape) < 2:
            return ctx.decline("X is transposed or of rank < 2")
        cols = len(x_shape) - 1
        if transposed:
            value = ctx.value(w)
            if value is None:
                return ctx.decline(f"the scope holds no value for the transposed weight {w}")
            w = ctx.new_param(f"{w}.transposed", np.ascontiguousarray(value.T))
    return Operator("fc", {"Input": x, "W": w, "Bias": b}, {"Out": add.output("Out")},
                    {"in_num_col_dims": cols, "activation_type": ""})


def _fc_act(ctx: RewriteContext, *, act: Operator, fc: Operator) -> Operator | Decline:
    row = UNARY[act.type]
    if not fc_absorbable(row, {a.name: act.attr(a.name) for a in row.attrs}):
        return ctx.decline(f"fc computes {act.type} only with {({a.name: a.default for a in row.attrs})}")
    return copy_op(fc, outputs={"Out": act.output("Out")}, attrs={"activation_type": act.type})


def _fc_scale(ctx: RewriteContext, *, mul: Operator, fc: Operator, w: str, c: str) -> Operator | Decline:
    out_shape = ctx.var(fc.output("Out")[0]).shape or ()
    if not is_channel_bias(out_shape, ctx.var(c).shape or (), mul.attr("axis"), len(out_shape) - 1):
        return ctx.decline(f"{c} (shape {list(ctx.var(c).shape or ())}) is not one value per output column")
    biases = fc.input("Bias")
    weight, scale = ctx.values(w, c)
    bias = ctx.values(biases[0])[0] if biases else None
    if weight is None or scale is None or (biases and bias is None):
        return ctx.decline(f"the scope holds no value for {w}, {c} or the bias")
    factor = scale.reshape(-1).astype(np.float64)
    inputs = {"W": ctx.new_param(f"{w}.scaled", (weight.astype(np.float64) * factor).astype(weight.dtype))}
    if bias is not None:
        inputs["Bias"] = ctx.new_param(f"{biases[0]}.scaled", (bias.astype(np.float64) * factor).astype(bias.dtype))
    return copy_op(fc, inputs=inputs, outputs={"Out": mul.output("Out")})


RULES = Rules([
    # matmul_v2 + elementwise_add(bias) -> fc
    Rule(pattern("add:elementwise_add(X=mm:matmul_v2(X=x, Y=w:param), Y=b:param)"), _fc, "matmul_v2 + bias -> fc"),
    # elementwise_add(bias, matmul_v2) -> fc (the bias first, as TorchScript exports of Linear write it)
    Rule(pattern("add:elementwise_add(X=b:param, Y=mm:matmul_v2(X=x, Y=w:param))"), _fc, "bias + matmul_v2 -> fc"),
    # mul + elementwise_add(bias) -> fc
    Rule(pattern("add:elementwise_add(X=mm:mul(X=x, Y=w:param), Y=b:param)"), _fc, "mul + bias -> fc"),
    # fc (no activation) + activation -> fc(activation_type)
    Rule(pattern(f"act:{'|'.join(_ACTS)}(X=fc:fc(Input=_, W=_, ...))",
                 attrs={"fc": {"activation_type": ""}}), _fc_act, "fc + activation -> fc"),
    # fc (no activation) * per-column parameter -> fc(W * c, Bias * c), either operand order
    Rule(pattern("mul:elementwise_mul(X=fc:fc(Input=_, W=w:param, ...), Y=c:param)",
                 attrs={"fc": {"activation_type": ""}}), _fc_scale, "fc * scale -> fc"),
    Rule(pattern("mul:elementwise_mul(X=c:param, Y=fc:fc(Input=_, W=w:param, ...))",
                 attrs={"fc": {"activation_type": ""}}), _fc_scale, "scale * fc -> fc"),
])

register_rules("fuse_fc", RULES, "Fuse matmul_v2/mul, its bias add, its activation and a per-column scale after it "
               "into one fc op.")


def _residual(ctx: RewriteContext, *, add: Operator, fc: Operator, r: str) -> Operator | Decline:
    """Case 5."""
    out, table = fc.output("Out")[0], ctx.state
    dims, residual = table.dims_of(out), table.dims_of(r)
    if fc.input("ResidualData") or fc.attr("activation_type") or add.attr("axis") != -1:
        return ctx.decline(f"{fc.describe()} has a residual or an activation, or the add's axis is {add.attr('axis')}")
    if dims is None or dims != residual or ctx.var(r).dtype is not ctx.var(out).dtype:
        return ctx.decline(f"{r} {list(residual or ())} is not of the fc's output dims {list(dims or ())} and dtype")
    return copy_op(fc, inputs={"ResidualData": [r]}, outputs={"Out": add.output("Out")})


RESIDUAL_RULES = Rules([
    # fc(x) + r -> fc(x, ResidualData=r)
    Rule(pattern("add:elementwise_add(X=fc:fc(Input=_, W=_, ...), Y=r)"), _residual, "fc + residual -> fc"),
    # r + fc(x) -> fc(x, ResidualData=r)
    Rule(pattern("add:elementwise_add(X=r, Y=fc:fc(Input=_, W=_, ...))"), _residual, "residual + fc -> fc"),
])


@register_pass("fuse_residual")
def fuse_residual(program: Program, scope: Scope | None = None, options: None = None) -> PassResult:
    """Residual adds after an fc without activation into its epilogue (case 5)."""
    table = probe_dims(program.global_block(), scope)
    fired = apply_rules(program, RESIDUAL_RULES, name="fuse_residual", state=table).counts
    return PassResult(program, modified=fired.total() > 0, stats={"residuals_fused": fired.total()})
