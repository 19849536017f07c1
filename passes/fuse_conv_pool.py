"""fuse_conv_pool: a convolution and the pool that tiles its output -> one fused_conv2d_pool.

    x -> fused_conv2d(W, b, relu) -> pool2d(max, 2x2, stride 2) -> y
      becomes      x -> fused_conv2d_pool(W, b, relu, max 2x2) -> y

The pool is a max or avg pool2d of unpadded windows at their own stride (``ksize == strides``,
not ``ceil_mode``), in the convolution's layout; the convolution a ``conv2d`` or a
``fused_conv2d`` without ResidualData, whose output only the pool reads.

On tensor cores an NHWC convolution (the ``channels_last`` pass) stores a 2x2 max pool of its
output from its epilogue: the full-size output is never written, and the pool's launch goes
(VGG-19: 5 of its 25 launches at batch 1). Other kernels run the convolution, then the pool, as
before. Not in the default pipeline: run it after ``channels_last``.
"""

from __future__ import annotations

from ..ir.operator import Operator
from ..ir.ops.window import window_geometry
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES"]


def _why_not_tiling(ctx: RewriteContext, conv: Operator, pool: Operator) -> Decline | None:
    """Why ``pool`` is not a pool of whole windows at their own stride over ``conv``'s output in
    its layout, or None when it is."""
    shape = tuple(ctx.var(conv.output("Output")[0]).shape or ())
    if pool.attr("pooling_type") not in ("max", "avg") or pool.attr("adaptive") or pool.attr("global_pooling"):
        return ctx.decline("the pool is not a plain max or avg pool")
    if pool.attr("data_format") != conv.attr("data_format"):
        return ctx.decline("the pool and the conv disagree on the layout")
    if conv.input("ResidualData"):
        return ctx.decline("the conv adds a residual")
    if len(shape) != 4 or min(shape) <= 0:
        return ctx.decline("the conv's output is not 4-D with known dims")
    ksize, strides = list(pool.attr("ksize")), list(pool.attr("strides"))
    if len(ksize) != 2 or ksize != strides or any(d != 1 for d in pool.attr("dilations")):
        return ctx.decline("the pool's windows are not undilated and at their own stride")
    sizes = shape[1:3] if conv.attr("data_format") == "NHWC" else shape[2:]
    window = window_geometry(sizes, ksize, strides, (1, 1), pool.attr("paddings"), pool.attr("padding_algorithm"),
                             pool.attr("ceil_mode"))
    if any(p for pair in window.pads for p in pair) or list(window.out) != [n // k for n, k in zip(sizes, ksize)]:
        return ctx.decline("the pool pads its input or keeps a partial window")
    return None


def _fuse(ctx: RewriteContext, *, pool: Operator, conv: Operator) -> Operator | Decline:
    why_not = _why_not_tiling(ctx, conv, pool)
    if why_not is not None:
        return why_not
    return copy_op(conv, type="fused_conv2d_pool", outputs={"Output": pool.output("Out")},
                   attrs={"pool_type": pool.attr("pooling_type"), "pool_size": list(pool.attr("ksize"))})


RULES = Rules([
    Rule(pattern("pool:pool2d(X=conv:conv2d|fused_conv2d(Input=_, Filter=_, ...))"), _fuse,
         "conv2d + pool2d -> fused_conv2d_pool"),
])

register_rules("fuse_conv_pool", RULES, "Fuse a convolution and the pool of whole windows at their own stride "
               "after it into one fused_conv2d_pool.")
