"""fuse_conv_act: conv2d / depthwise_conv2d, its bias add and its activation -> one fused_conv2d.

    x -> conv2d(W) -> elementwise_add(b) -> relu -> y      becomes      x -> fused_conv2d(W, b, relu) -> y

Rules (applied until nothing matches, so the steps chain):

1. conv2d / depthwise_conv2d + elementwise_add of a [C] parameter on the channel dim ->
   fused_conv2d with Bias;
2. conv2d / depthwise_conv2d / fused_conv2d without residual or activation + elementwise_add or
   two-input sum with a tensor of the output's dims (``probe_dims`` proves them equal, symbolic
   ones included: a residual block of a model with a free batch dim) -> fused_conv2d with
   ResidualData;
3. conv2d / depthwise_conv2d + activation -> fused_conv2d with fuse_activation;
4. fused_conv2d without activation + activation -> fused_conv2d with it;
5. rules 3 and 4 for a clip from 0 to constant bounds (ONNX's ``Clip(0, 6)``, ReLU6 as exporters
   write it) -> relu6 at the clip's max.

The activations are the family rows marked absorbable (``halfway.ir.ops.families``), and those
it computes as one of them (``EPILOGUE_ALIASES``: silu as swish at beta 1); each row says how its
attrs map to fuse_alpha / fuse_beta (``halfway.ir.ops.family.fused_params``). An activation
whose attrs no pair expresses is left alone.
"""

from __future__ import annotations

from ..ir.operator import Operator
from ..ir.ops.families import EPILOGUE_ALIASES, UNARY, absorbable
from ..ir.ops.family import fused_params
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import DimTable, probe_dims
from .fuse_channels import CONVS, channel_vector, conv_channel_dim, is_channel_bias
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op

__all__ = ["RULES", "fused_activation"]

_CONVS = "|".join(CONVS)
_ANY_CONV = f"conv:{_CONVS}|fused_conv2d(Input=_, Filter=_, ...)"
_ACTS = "|".join([*absorbable(), *EPILOGUE_ALIASES])


def fused_activation(act: Operator) -> tuple[str, float, float] | None:
    """(fuse_activation, fuse_alpha, fuse_beta) computing ``act``, or None if the fused kernel cannot."""
    name, attrs = EPILOGUE_ALIASES.get(act.type, (act.type, None))
    row = UNARY.get(name)
    if row is None:
        return None
    params = fused_params(row, attrs if attrs is not None else {a.name: act.attr(a.name) for a in row.attrs})
    return (name, *params) if params is not None else None


def _fuse_bias(ctx: RewriteContext, *, add: Operator, conv: Operator, b: str) -> Operator | Decline:
    out = ctx.var(conv.output("Output")[0]).shape or ()
    if not is_channel_bias(out, ctx.var(b).shape or (), add.attr("axis"), conv_channel_dim(conv)):
        return ctx.decline(f"{b} (shape {list(ctx.var(b).shape or ())}) is not one value per output channel")
    vector = channel_vector(ctx, b)
    if vector is None:
        return ctx.decline(f"the scope holds no value for the bias {b}")
    return copy_op(conv, type="fused_conv2d", inputs={"Bias": vector}, outputs={"Output": add.output("Out")})


def _fuse_residual(ctx: RewriteContext, *, add: Operator, conv: Operator, r: str) -> Operator | Decline:
    out, other = ctx.var(conv.output("Output")[0]), ctx.var(r)
    if conv.type == "fused_conv2d" and (conv.attr("fuse_activation") != "" or conv.input("ResidualData")):
        return ctx.decline("the fused conv already has an activation or a residual")
    table: DimTable = ctx.state
    dims = table.dims_of(out.name)
    if out.dtype is not other.dtype or dims is None or dims != table.dims_of(r):
        return ctx.decline(f"the residual {r} {list(other.shape or ())} is not of the conv output's dims "
                           f"{list(dims or ())} and dtype")
    return copy_op(conv, type="fused_conv2d", inputs={"ResidualData": r}, outputs={"Output": add.output("Out")})


def _fuse_act(ctx: RewriteContext, *, act: Operator, conv: Operator) -> Operator | Decline:
    fused = fused_activation(act)
    if fused is None:
        return ctx.decline(f"the fused conv cannot compute this {act.type} (its attrs are out of range)")
    name, alpha, beta = fused
    return copy_op(conv, type="fused_conv2d", outputs={"Output": act.output("Out")},
                   attrs={"fuse_activation": name, "fuse_alpha": alpha, "fuse_beta": beta})


def _fuse_clip(ctx: RewriteContext, *, act: Operator, conv: Operator) -> Operator | Decline:
    """Case 5."""
    low, high = act.attr("min"), act.attr("max")
    params = fused_params(UNARY["relu6"], {"threshold": high})
    if low != 0 or params is None:
        return ctx.decline(f"a clip to [{low}, {high}] is no relu6 (it must clip from 0 to a bound > 0)")
    return copy_op(conv, type="fused_conv2d", outputs={"Output": act.output("Out")},
                   attrs={"fuse_activation": "relu6", "fuse_alpha": params[0], "fuse_beta": params[1]})


RULES = Rules([
    # conv2d + elementwise_add(bias) -> fused_conv2d(Bias)
    Rule(pattern(f"add:elementwise_add(X=conv:{_CONVS}(Input=_, Filter=_), Y=b:param)"), _fuse_bias,
         "conv2d + bias -> fused_conv2d"),
    # conv2d / fused_conv2d (no activation) + elementwise_add(same-shape tensor) -> fused_conv2d(ResidualData)
    Rule(pattern(f"add:elementwise_add(X={_ANY_CONV}, Y=r)"), _fuse_residual, "conv2d + residual -> fused_conv2d"),
    # elementwise_add(same-shape tensor, conv2d) -> fused_conv2d(ResidualData)
    Rule(pattern(f"add:elementwise_add(X=r, Y={_ANY_CONV})"), _fuse_residual, "residual + conv2d -> fused_conv2d"),
    # sum(conv2d, same-shape tensor) -> fused_conv2d(ResidualData)
    Rule(pattern(f"add:sum(X=[{_ANY_CONV}, r])"), _fuse_residual, "sum(conv2d, residual) -> fused_conv2d"),
    # sum(same-shape tensor, conv2d) -> fused_conv2d(ResidualData)
    Rule(pattern(f"add:sum(X=[r, {_ANY_CONV}])"), _fuse_residual, "sum(residual, conv2d) -> fused_conv2d"),
    # conv2d + activation -> fused_conv2d(fuse_activation)
    Rule(pattern(f"act:{_ACTS}(X=conv:{_CONVS}(Input=_, Filter=_))"), _fuse_act,
         "conv2d + activation -> fused_conv2d"),
    # fused_conv2d (no activation) + activation -> fused_conv2d(fuse_activation)
    Rule(pattern(f"act:{_ACTS}(X=conv:fused_conv2d(Input=_, Filter=_, ...))",
                 attrs={"conv": {"fuse_activation": ""}}), _fuse_act,
         "fused_conv2d + activation -> fused_conv2d"),
    # conv2d + clip(0, t) -> fused_conv2d(relu6 at t)
    Rule(pattern(f"act:clip(X=conv:{_CONVS}(Input=_, Filter=_))"), _fuse_clip, "conv2d + clip(0, t) -> fused_conv2d"),
    # fused_conv2d (no activation) + clip(0, t) -> fused_conv2d(relu6 at t)
    Rule(pattern("act:clip(X=conv:fused_conv2d(Input=_, Filter=_, ...))", attrs={"conv": {"fuse_activation": ""}}),
         _fuse_clip, "fused_conv2d + clip(0, t) -> fused_conv2d"),
])


@register_pass("fuse_conv_act")
def fuse_conv_act(program: Program, scope: Scope | None = None, options: None = None) -> PassResult:
    """Fuse conv2d/depthwise_conv2d, its bias add, a residual add and its activation into one fused_conv2d."""
    table = probe_dims(program.global_block(), scope)
    counts = apply_rules(program, RULES, name="fuse_conv_act", scope=scope, state=table).counts
    return PassResult(program, counts.total() > 0, {"rewrites": counts.total(), **counts})
