"""reorder_pool_conv: average pools and 1x1 convs trade places where the pool then does less.

A 1x1 unpadded conv is a linear map over channels at each pixel, an average pool a linear map
over pixels with the same weights in every channel, so they commute; a bias after the conv
commutes with the pool too when every window averages only input values (no padding, or
exclusive padding). Two cases gain:

1. Inception's pool branches average 3x3 windows of every input channel (192 to 1024), then
   project them to 32-128 channels. A pool that keeps the size moves after a conv that narrows
   the channels, and then averages C_out channels instead of C_in (the conv costs the same):

       x -> pool2d avg (same size) -> conv2d 1x1 (C_in -> C_out < C_in) -> y
         => x -> conv2d 1x1 -> pool2d avg -> y      (the conv's bias and activation stay after)

2. DenseNet's transitions project, then halve the image with a 2x2 pool. A pool that shrinks
   the image moves before the conv, whose multiply-adds shrink with the image (4x there):

       x -> conv2d 1x1 [-> elementwise_add(b)] -> pool2d avg (shrinking, unpadded) -> y
         => x -> pool2d avg -> conv2d 1x1 [-> elementwise_add(b)] -> y

Max pools, whose maximum does not commute with a weighted sum, are left alone, as are grouped,
padded or strided convs and layouts that disagree.
"""

from __future__ import annotations

from ..ir.operator import Operator
from ..ir.ops.window import window_geometry
from .fuse_channels import conv_channel_dim, is_channel_bias, is_pointwise
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES"]

Shape = tuple[int, ...]


def _why_not_commuting(ctx: RewriteContext, conv: Operator, pool: Operator, w: str, x: str) -> Decline | None:
    """Why ``pool`` and ``conv`` are not the linear pair of the module docstring in one layout,
    or None when they are."""
    w_shape, x_shape = tuple(ctx.var(w).shape or ()), tuple(ctx.var(x).shape or ())
    if pool.attr("pooling_type") != "avg" or pool.attr("adaptive") or pool.attr("global_pooling"):
        return ctx.decline("the pool is not a plain average pool")
    if conv_channel_dim(conv) != (3 if pool.attr("data_format") == "NHWC" else 1):
        return ctx.decline("the pool and the conv disagree on the layout")
    if not is_pointwise(conv, w_shape) or tuple(conv.attr("strides")) != (1, 1):
        return ctx.decline("the conv is not an ungrouped, unpadded, unstrided 1x1 conv")
    if len(x_shape) != 4 or min(x_shape) <= 0:
        return ctx.decline(f"the input {x} is not 4-D with known dims")
    return None


def _spatial(shape: Shape, channel_dim: int) -> Shape:
    return tuple(d for i, d in enumerate(shape[1:], 1) if i != channel_dim)


def _pool_after(ctx: RewriteContext, *, conv: Operator, pool: Operator, x: str, w: str) -> list[Operator] | Decline:
    """Case 1: pool2d (same size) + conv2d 1x1 narrowing -> conv2d 1x1 + pool2d."""
    x_shape, pooled = tuple(ctx.var(x).shape or ()), tuple(ctx.var(pool.output("Out")[0]).shape or ())
    why_not = _why_not_commuting(ctx, conv, pool, w, x)
    if why_not is not None:
        return why_not
    if x_shape != pooled:
        return ctx.decline("the pool changes the size")
    if ctx.var(w).tensor_shape[0] >= x_shape[conv_channel_dim(conv)]:
        return ctx.decline("the conv does not narrow the channels: the pool would average as many or more")
    y = conv.output("Output")[0]
    projected = ctx.new_var(f"{y}.unpooled", like=y)
    return [copy_op(conv, inputs={"Input": x}, outputs={"Output": projected}),
            copy_op(pool, inputs={"X": projected}, outputs={"Out": y})]


def _full_windows(pool: Operator, sizes: Shape) -> bool:
    """Whether every window of ``pool`` lies inside the unpadded input."""
    window = window_geometry(sizes, pool.attr("ksize"), pool.attr("strides"), (1, 1), pool.attr("paddings"),
                             pool.attr("padding_algorithm"), pool.attr("ceil_mode"))
    unpadded = not any(p for pair in window.pads for p in pair)
    return unpadded and all((o - 1) * s + k <= n for o, s, k, n in zip(window.out, pool.attr("strides"),
                                                                         pool.attr("ksize"), sizes))


def _pool_before(ctx: RewriteContext, *, pool: Operator, conv: Operator, x: str, w: str,
                 add: Operator | None = None, b: str | None = None) -> list[Operator] | Decline:
    """Case 2: conv2d 1x1 [+ bias] + pool2d (shrinking) -> pool2d + conv2d 1x1 [+ bias]."""
    channel_dim = conv_channel_dim(conv)
    x_shape, y = tuple(ctx.var(x).shape or ()), pool.output("Out")[0]
    y_shape = tuple(ctx.var(y).shape or ())
    why_not = _why_not_commuting(ctx, conv, pool, w, x)
    if why_not is not None:
        return why_not
    if len(y_shape) != 4:
        return ctx.decline(f"the pool's output {y} is not 4-D")
    sizes, out = _spatial(x_shape, channel_dim), _spatial(y_shape, channel_dim)
    if not _full_windows(pool, sizes):
        return ctx.decline("the pool has padded or partial windows")
    if out[0] * out[1] >= sizes[0] * sizes[1]:
        return ctx.decline("the pool does not shrink the image")
    conv_out = conv.output("Output")[0]
    if add is not None and b is not None and not is_channel_bias(ctx.var(conv_out).shape or (), ctx.var(b).shape or (),
                                               add.attr("axis"), channel_dim):
        return ctx.decline(f"the add of {b} is not a per-channel bias")
    pooled_shape = list(x_shape)
    for dim, size in zip([d for d in range(1, 4) if d != channel_dim], out):
        pooled_shape[dim] = size
    pooled = ctx.new_var(f"{x}.pooled", like=x, shape=pooled_shape)
    ops = [copy_op(pool, inputs={"X": x}, outputs={"Out": pooled})]
    if add is None:
        return ops + [copy_op(conv, inputs={"Input": pooled}, outputs={"Output": y})]
    projected = ctx.new_var(f"{y}.unbiased", like=y)
    return ops + [copy_op(conv, inputs={"Input": pooled}, outputs={"Output": projected}),
                  copy_op(add, inputs={"X": projected}, outputs={"Out": y})]


_CONV = "conv:conv2d(Input=x, Filter=w:param)"

RULES = Rules([
    # pool2d avg (same size) + conv2d 1x1 (fewer channels out) -> conv2d 1x1 + pool2d avg
    Rule(pattern("conv:conv2d(Input=pool:pool2d(X=x), Filter=w:param)"), _pool_after,
         "pool2d avg + conv2d 1x1 -> conv2d 1x1 + pool2d avg"),
    # conv2d 1x1 + bias + pool2d avg (shrinking) -> pool2d avg + conv2d 1x1 + bias
    Rule(pattern(f"pool:pool2d(X=add:elementwise_add(X={_CONV}, Y=b:param))"), _pool_before,
         "conv2d 1x1 + bias + pool2d avg -> pool2d avg + conv2d 1x1 + bias"),
    # conv2d 1x1 + pool2d avg (shrinking) -> pool2d avg + conv2d 1x1
    Rule(pattern(f"pool:pool2d(X={_CONV})"), _pool_before, "conv2d 1x1 + pool2d avg -> pool2d avg + conv2d 1x1"),
])

register_rules("reorder_pool_conv", RULES, "Swap average pools and the 1x1 conv2d next to them where the pool "
               "then does less: after a conv that narrows the channels when it keeps the size, before the "
               "conv when it shrinks the image.")
