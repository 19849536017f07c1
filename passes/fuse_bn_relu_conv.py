"""fuse_bn_relu_conv: a batch_norm and relu before a 1x1 convolution become one clamp.

Pre-activation networks (DenseNet, ResNet v2) normalise a conv's *input*:

    x -> batch_norm(scale, shift, mean, var) -> relu -> conv2d 1x1 (W) [-> elementwise_add(b)] -> y

With ``s = scale / sqrt(var + epsilon)`` and ``t = shift - mean * s`` per channel, the relu of
``s * x + t`` is ``|s| * max(sign(s) * x, -t / |s|) + t`` (and the constant ``relu(t)`` where
``s`` is 0). A 1x1 unpadded conv is a per-pixel matrix product over channels, so the factor
``|s|`` folds into W's input-channel axis and the constant ``t`` into a bias ``W @ t``:

    x [-> elementwise_mul(sign(s)), only where some s < 0] -> elementwise_max(-t / |s|)
      -> conv2d 1x1 (W * |s|) -> elementwise_add(b + W @ t) -> y

One pass over x instead of three (scale, shift, relu); the bias add joins the conv's epilogue
in fuse_conv_act. The conv must be the relu's only reader, ungrouped, 1x1 and unpadded (any
stride: subsampling commutes with a per-channel map), in the batch_norm's layout.

The new weights and constants are computed in float64 and stored in W's dtype as new
parameters; the caller's arrays are never written.
"""

from __future__ import annotations

import numpy as np

from ..ir.operator import Operator
from .fuse_channels import conv_channel_dim, is_channel_bias, is_pointwise
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES", "clamp_form"]

_BN = ("bn:batch_norm(X=x, Scale=scale:param, Bias=shift:param, Mean=mean:param, "
       "Variance=variance:param)")
_CONV = f"conv:conv2d(Input=act:relu(X={_BN}), Filter=w:param)"


def clamp_form(s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(sign, floor, factor, offset)`` with ``relu(s * x + t) == factor * max(sign * x, floor) +
    offset`` for every x, per channel (float64)."""
    zero = s == 0
    sign = np.where(s < 0, -1.0, 1.0)
    factor = np.abs(s)
    floor = np.where(zero, 0.0, -t / np.where(zero, 1.0, factor))
    offset = np.where(zero, np.maximum(t, 0.0), t)
    return sign, floor, factor, offset


def _fold(ctx: RewriteContext, *, conv: Operator, act: Operator, bn: Operator, x: str, w: str, scale: str,
          shift: str, mean: str, variance: str, add: Operator | None = None, b: str | None = None
          ) -> list[Operator] | Decline:
    values = ctx.values(w, scale, shift, mean, variance)
    bias = ctx.values(b)[0] if b is not None else None
    y = (add.output("Out") if add is not None else conv.output("Output"))[0]
    channel_dim = conv_channel_dim(conv)
    weight = values[0]
    if not is_pointwise(conv, weight.shape):
        return ctx.decline("the conv is not an ungrouped, unpadded 1x1 conv")
    if channel_dim != (3 if bn.attr("data_layout") == "NHWC" else 1) or len(ctx.var(x).shape or ()) != 4:
        return ctx.decline("batch_norm and the conv disagree on the layout, or the input is not 4-D")
    if not all(v.shape == (weight.shape[1],) for v in values[1:]):
        return ctx.decline(f"batch_norm's parameters are not [{weight.shape[1]}], one per conv input channel")
    if add is not None and b is not None and not is_channel_bias(ctx.var(y).shape or (), ctx.var(b).shape or (), add.attr("axis"),
                                               channel_dim):
        return ctx.decline(f"the add of {b} is not a per-channel bias")
    gamma, beta, mu, sigma2 = values[1:]
    sign, floor, new_w, new_bias = _folded(weight, gamma, beta, mu, sigma2, bn.attr("epsilon"), bias)
    dtype = weight.dtype
    ops: list[Operator] = []
    source = x
    if (sign < 0).any():
        source = ctx.new_var(f"{x}.signed", like=x)
        ops.append(Operator("elementwise_mul", {"X": x, "Y": ctx.new_param(f"{scale}.sign", sign.astype(dtype))},
                            {"Out": source}, {"axis": channel_dim}))
    floor_name = ctx.new_param(f"{shift}.floor", floor.astype(dtype))
    ops.append(Operator("elementwise_max", {"X": source, "Y": floor_name}, {"Out": act.output("Out")},
                        {"axis": channel_dim}))
    inner = ctx.new_var(f"{y}.conv", like=y)
    ops.append(copy_op(conv, inputs={"Filter": ctx.new_param(f"{w}.preact", new_w.astype(dtype))},
                       outputs={"Output": inner}))
    bias_name = ctx.new_param(f"{b or w}.preact_bias", new_bias.astype(dtype))
    ops.append(Operator("elementwise_add", {"X": inner, "Y": bias_name}, {"Out": y}, {"axis": channel_dim}))
    return ops


def _folded(weight: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mu: np.ndarray, sigma2: np.ndarray,
            epsilon: float, bias: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The clamp's ``sign`` and ``floor``, the conv's new weights and bias (float64)."""
    s = gamma.astype(np.float64) / np.sqrt(sigma2.astype(np.float64) + epsilon)
    t = beta.astype(np.float64) - mu.astype(np.float64) * s
    sign, floor, factor, offset = clamp_form(s, t)
    w64 = weight.astype(np.float64)
    base = bias.reshape(-1).astype(np.float64) if bias is not None else 0.0
    return sign, floor, w64 * factor.reshape(1, -1, 1, 1), base + w64[:, :, 0, 0] @ offset


def _no_bias_add_after(conv: Operator) -> bool:
    """Whether the first rule (with the bias add) cannot take ``conv``: the driver meets the conv
    before its add, and would otherwise leave two bias adds."""
    assert conv.block is not None
    readers = conv.block.uses(conv.output("Output")[0])
    if len(readers) != 1 or readers[0][0].type != "elementwise_add":
        return True
    return not all(conv.block.find_var(n).persistable for n in readers[0][0].input("Y"))


RULES = Rules([
    # batch_norm + relu + conv2d 1x1 + bias -> elementwise_max + conv2d(W') + bias'
    Rule(pattern(f"add:elementwise_add(X={_CONV}, Y=b:param)"), _fold,
         "batch_norm + relu + conv2d 1x1 + bias -> elementwise_max + conv2d + bias"),
    # batch_norm + relu + conv2d 1x1 -> elementwise_max + conv2d(W') + bias
    Rule(pattern(_CONV, where={"conv": _no_bias_add_after}), _fold,
         "batch_norm + relu + conv2d 1x1 -> elementwise_max + conv2d + bias"),
])

register_rules("fuse_bn_relu_conv", RULES, "Turn batch_norm + relu before a 1x1 conv2d into one elementwise_max, "
               "folding the scale into the conv's weights and the shift into a bias.", needs_scope=True)
