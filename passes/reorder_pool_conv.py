"""reorder_pool_conv: an average pool before a 1x1 conv that narrows the channels moves after it.

Inception's pool branches average 3x3 windows of every input channel (192 to 1024 of them),
then project them to 32-128 channels with a 1x1 conv:

    x -> pool2d avg (stride 1, same size out) -> conv2d 1x1 (W: C_in -> C_out < C_in) -> y
  becomes
    x -> conv2d 1x1 (W) -> pool2d avg -> y

Both are linear maps, one over channels at each pixel and one over pixels in each channel with
the same weights for every channel (zero padding, exclusive or not), so they commute; the
conv's work is the same at the same size, and the pool now averages C_out channels instead of
C_in. The conv's bias add and activation stay after the pool, where they were. Max pools, whose
maximum does not commute with a weighted sum, are left alone, as are pools that change the
size, grouped or padded or strided convs, and layouts that disagree.
"""

from __future__ import annotations

from halfway.ir.operator import Operator
from halfway.passes.fuse_channels import conv_channel_dim
from halfway.passes.pattern import pattern
from halfway.passes.rewrite import RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES"]


def _is_pointwise(conv: Operator, w_shape: tuple[int, ...]) -> bool:
    unpadded = conv.attr("padding_algorithm") in ("SAME", "VALID") or not any(conv.attr("paddings"))
    return (len(w_shape) == 4 and w_shape[2:] == (1, 1) and conv.attr("groups") == 1 and unpadded
            and tuple(conv.attr("strides")) == (1, 1))


def _same_size_avg(pool: Operator, x_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> bool:
    linear = pool.attr("pooling_type") == "avg" and not pool.attr("adaptive") and not pool.attr("global_pooling")
    return linear and len(x_shape) == 4 and x_shape == out_shape and min(x_shape) > 0


def _reorder(ctx: RewriteContext, *, conv: Operator, pool: Operator, x: str, w: str) -> list[Operator] | None:
    w_shape = tuple(ctx.var(w).shape or ())
    x_shape = tuple(ctx.var(x).shape or ())
    pooled = tuple(ctx.var(pool.output("Out")[0]).shape or ())
    channel_dim = conv_channel_dim(conv)
    layouts_agree = channel_dim == (3 if pool.attr("data_format") == "NHWC" else 1)
    if not (layouts_agree and _is_pointwise(conv, w_shape) and _same_size_avg(pool, x_shape, pooled)):
        return None
    if w_shape[0] >= x_shape[channel_dim]:
        return None  # the pool would average as many channels or more
    y = conv.output("Output")[0]
    projected = ctx.new_var(f"{y}.unpooled", like=y)
    return [copy_op(conv, inputs={"Input": x}, outputs={"Output": projected}),
            copy_op(pool, inputs={"X": projected}, outputs={"Out": y})]


RULES = Rules([
    # pool2d avg + conv2d 1x1 (fewer channels out) -> conv2d 1x1 + pool2d avg
    Rule(pattern("conv:conv2d(Input=pool:pool2d(X=x), Filter=w:param)"), _reorder,
         "pool2d avg + conv2d 1x1 -> conv2d 1x1 + pool2d avg"),
])

register_rules("reorder_pool_conv", RULES, "Move an average pool that keeps the size after the 1x1 conv2d "
               "reading it when the conv has fewer output than input channels: the pool then averages fewer "
               "channels.")
