"""fuse_conv_bn: fold an inference batch_norm into the weights of the op before it.

    x -> conv2d(W) [-> elementwise_add(b)] -> batch_norm(scale, shift, mean, var) -> y
  becomes
    x -> conv2d(W') -> elementwise_add(b') -> y

with ``s = scale / sqrt(var + epsilon)``, ``W' = W * s`` along W's output-channel axis and
``b' = (b - mean) * s + shift`` (``b`` = 0 without a bias add). Cases:

1. conv2d / depthwise_conv2d / conv3d, channel axis of W 0 (filters are [C_out, C_in / g, kh, kw]
   or [C_out, C_in / g, kd, kh, kw]); batch_norm's layout must match the conv's data_format;
2. matmul_v2 (Y is W, not transposed X, any trans_y) and mul (2-D Y, y_num_col_dims 1) whose
   output is 2-D [N, C], W's channel axis 1 (0 for trans_y);
3. each of them followed by an elementwise_add of a per-channel bias parameter.

Before that, a first set of rules folds per-channel constant scales and shifts that follow a
batch_norm (``elementwise_mul`` / ``elementwise_add`` of a parameter broadcast along its channel
dim, as Caffe2-born ONNX models write after every BatchNormalization) into its Scale and Bias,
so they fold into the conv with it — or, for a batch_norm after a concat, at least go away.

W', b' are computed in float64 and stored in W's dtype as new parameters with new names; the
caller's arrays are never written. The bias add is an ``elementwise_add`` so fuse_conv_act and
fuse_fc can take it next.
"""

from __future__ import annotations

import numpy as np

from ..ir.operator import Operator
from .fuse_channels import CONVS, is_channel_bias
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES"]

_BN_PARAMS = "Scale=scale:param, Bias=shift:param, Mean=mean:param, Variance=variance:param"
_BN_SCALE_SHIFT = "Scale=scale:param, Bias=shift:param, Mean=_:param, Variance=_:param"
_CONVS = (*CONVS, "conv3d")
_CONV = "conv:conv2d|depthwise_conv2d|conv3d(Input=_, Filter=w:param)"
_MATMUL = "conv:matmul_v2(X=_, Y=w:param)"
_MUL = "conv:mul(X=_, Y=w:param)"


def _weight_axis(producer: Operator, w_rank: int) -> int | None:
    """W's output-channel axis, None where folding does not apply."""
    if producer.type in _CONVS:
        return 0
    if w_rank != 2:
        return None
    if producer.type == "mul":
        return 1 if producer.attr("y_num_col_dims") == 1 else None
    return None if producer.attr("trans_x") else (0 if producer.attr("trans_y") else 1)


def _channel_dim(ctx: RewriteContext, producer: Operator, bn: Operator) -> int | None:
    """The channel dim of the producer's output, None if unknown or the layouts disagree."""
    out = ctx.var(producer.output(_main_slot(producer))[0]).shape or ()
    if producer.type in _CONVS:
        rank = 5 if producer.type == "conv3d" else 4
        dim = rank - 1 if producer.attr("data_format") in ("NHWC", "NDHWC") else 1
        return dim if len(out) == rank and dim == _bn_channel_dim(bn, rank) else None
    return 1 if len(out) == 2 else None


def _main_slot(producer: Operator) -> str:
    return "Output" if producer.type in _CONVS else "Out"


def _fold(ctx: RewriteContext, *, bn: Operator, conv: Operator, w: str, scale: str, shift: str, mean: str,
          variance: str, add: Operator | None = None, b: str | None = None) -> list[Operator] | Decline:
    values = ctx.values(w, scale, shift, mean, variance)
    weight, gamma, beta, mu, sigma2 = values
    bias = ctx.values(b)[0] if b is not None else None
    axis, channel_dim = _weight_axis(conv, weight.ndim), _channel_dim(ctx, conv, bn)
    if axis is None:
        return ctx.decline(f"{conv.type}'s weight {w} has no output-channel axis to scale "
                           "(transposed X, 3-D+ weight or y_num_col_dims != 1)")
    if channel_dim is None:
        return ctx.decline(f"the {conv.type} output's channels are not where batch_norm's layout puts them")
    channels = weight.shape[axis]
    if any(v.shape != (channels,) for v in values[1:]):
        return ctx.decline(f"batch_norm's parameters are not [{channels}], one per output channel")
    if add is not None and b is not None and not is_channel_bias(ctx.var(add.input("X")[0]).shape or (), ctx.var(b).shape or (),
                                               add.attr("axis"), channel_dim):
        return ctx.decline(f"the add of {b} is not a per-channel bias")
    s = gamma.astype(np.float64) / np.sqrt(sigma2.astype(np.float64) + bn.attr("epsilon"))
    shape = [1] * weight.ndim
    shape[axis] = channels
    folded_w = (weight.astype(np.float64) * s.reshape(shape)).astype(weight.dtype)
    base = bias.reshape(-1).astype(np.float64) if bias is not None else 0.0
    folded_b = ((base - mu.astype(np.float64)) * s + beta.astype(np.float64)).astype(weight.dtype)
    slot = "Filter" if conv.type in _CONVS else "Y"
    new_conv = copy_op(conv, inputs={slot: ctx.new_param(f"{w}.bn_folded", folded_w)})
    inner = conv.output(_main_slot(conv))[0]
    y = bn.output("Y")[0]
    b_name = ctx.new_param(f"{b or w}.bn_bias", folded_b)
    return [new_conv, Operator("elementwise_add", {"X": inner, "Y": b_name}, {"Out": y}, {"axis": channel_dim})]


def _with_bias(producer: str) -> str:
    return f"add:elementwise_add(X={producer}, Y=b:param)"


def _rules(producer: str, label: str) -> list[Rule]:
    return [
        # <producer> + elementwise_add(bias) + batch_norm -> <producer>(W') + elementwise_add(b')
        Rule(pattern(f"bn:batch_norm(X={_with_bias(producer)}, {_BN_PARAMS})"), _fold,
             f"{label} + bias + batch_norm -> {label}(folded) + bias"),
        # <producer> + batch_norm -> <producer>(W') + elementwise_add(b')
        Rule(pattern(f"bn:batch_norm(X={producer}, {_BN_PARAMS})"), _fold,
             f"{label} + batch_norm -> {label}(folded) + bias"),
    ]


def _bn_channel_dim(bn: Operator, rank: int) -> int:
    return rank - 1 if bn.attr("data_layout") == "NHWC" else 1


def _absorb_affine(ctx: RewriteContext, *, op: Operator, bn: Operator, c: str, scale: str,
                   shift: str) -> Operator | Decline:
    """batch_norm's Scale and Bias times a per-channel factor, or its Bias plus a per-channel shift."""
    x_shape = ctx.var(bn.output("Y")[0]).shape or ()
    values = ctx.values(c, scale, shift)
    channel_dim = _bn_channel_dim(bn, len(x_shape))
    if not is_channel_bias(x_shape, ctx.var(c).shape or (), op.attr("axis"), channel_dim):
        return ctx.decline(f"{c} (shape {list(ctx.var(c).shape or ())}) is not one value per channel")
    factor, gamma, beta = (v.reshape(-1).astype(np.float64) for v in values)
    if op.type == "elementwise_mul":
        gamma, beta = gamma * factor, beta * factor
    else:
        beta = beta + factor
    kind = values[1].dtype
    return copy_op(bn, inputs={"Scale": ctx.new_param(f"{scale}.affine", gamma.astype(kind)),
                               "Bias": ctx.new_param(f"{shift}.affine", beta.astype(kind))},
                   outputs={"Y": op.output("Out")})


AFFINE_RULES = Rules([
    # batch_norm + elementwise_mul / elementwise_add of per-channel constants -> batch_norm(Scale', Bias')
    Rule(pattern(f"op:elementwise_mul|elementwise_add(X=bn:batch_norm(X=_, {_BN_SCALE_SHIFT}), Y=c:param)"),
         _absorb_affine, "batch_norm + channel affine -> batch_norm"),
])
RULES = Rules(_rules(_CONV, "conv2d") + _rules(_MATMUL, "matmul_v2") + _rules(_MUL, "mul"))

register_rules("fuse_conv_bn", [AFFINE_RULES, RULES], "Fold batch_norm (and the per-channel scales and shifts "
               "after it) into the preceding conv2d/depthwise_conv2d/conv3d/matmul_v2/mul weights and bias.",
               needs_scope=True)
