"""Schemas of the poolings: pool2d and pool3d (max, avg and lp; global and adaptive), and
max_pool2d_with_index (the maximum and where it lies) — Paddle's op types, slots, attrs and
defaults; the geometry is ``halfway.ir.ops.window``'s."""

from __future__ import annotations

from collections.abc import Sequence

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, InferError, OpSchema, Slot, register_op
from .window import infer_window, join_channels, ranked, split_channels, window_attrs, window_geometry

__all__ = ["unpooled_shape"]


def _infer_pool(ctx: InferContext) -> None:
    rank = 5 if ctx.op_type == "pool3d" else 4
    x = ranked(ctx, "X", rank)
    channel_last = ctx.attr("data_format") in ("NHWC", "NDHWC")
    n, c, spatial = split_channels(x.shape, channel_last)
    ksize = ctx.attr("ksize")
    ctx.check(len(ksize) == rank - 2 and all(k > 0 for k in ksize),
              f"attr ksize must be {rank - 2} positive values, got {list(ksize)}")
    ctx.check(ctx.attr("norm_type") > 0, f"attr norm_type must be positive, got {ctx.attr('norm_type')}")
    if ctx.attr("global_pooling"):
        out: Sequence[int] = (1,) * (rank - 2)
    elif ctx.attr("adaptive"):
        ctx.check(rank == 4 and ctx.attr("pooling_type") != "lp", "adaptive pooling is supported in 2-D, max or avg")
        out = ksize
    else:
        dilations = ctx.attr("dilations") or (1,) * (rank - 2)
        out = infer_window(ctx, spatial, ksize, dilations, ceil_mode=ctx.attr("ceil_mode")).out
    ctx.set_output("Out", join_channels(n, c, out, channel_last), x.dtype)


def _pool_attrs(window: list[AttrSpec]) -> list[AttrSpec]:
    """pool2d's and pool3d's attrs around the ``window`` ones, with halfway's ``dilations`` (empty:
    ones) and "lp" pooling, (sum |x|^norm_type)^(1 / norm_type) over each window, pads adding zeros."""
    return [AttrSpec("pooling_type", AttrType.STRING, choices=("max", "avg", "lp")), AttrSpec("ksize", AttrType.INTS),
            *window, AttrSpec("global_pooling", AttrType.BOOLEAN, False), AttrSpec("adaptive", AttrType.BOOLEAN, False),
            AttrSpec("ceil_mode", AttrType.BOOLEAN, False), AttrSpec("exclusive", AttrType.BOOLEAN, True),
            AttrSpec("dilations", AttrType.INTS, []), AttrSpec("norm_type", AttrType.FLOAT, 2.0)]


register_op(OpSchema(
    "pool2d", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=_pool_attrs(window_attrs()),
    infer=_infer_pool,
    doc="2-D max/avg/lp pooling; global_pooling pools each plane to 1x1 (ignoring ksize, paddings, adaptive), "
        "adaptive makes the output ksize; exclusive avg divides by the unpadded window area.",
))


register_op(OpSchema(
    "pool3d", inputs=[Slot("X")], outputs=[Slot("Out")],
    attrs=_pool_attrs(window_attrs(3)),
    infer=_infer_pool,
    doc="3-D max/avg/lp pooling over [N, C, D, H, W] (or NDHWC), as pool2d (adaptive excepted).",
))


def _infer_max_pool_with_index(ctx: InferContext) -> None:
    x = ranked(ctx, "X", 4)
    n, c, spatial = split_channels(x.shape, False)
    ksize = ctx.attr("ksize")
    ctx.check(len(ksize) == 2 and all(k > 0 for k in ksize), f"attr ksize must be 2 positive values, got {list(ksize)}")
    if ctx.attr("global_pooling"):
        out: Sequence[int] = (1, 1)
    elif ctx.attr("adaptive"):
        out = ksize
    else:
        try:
            out = window_geometry(spatial, ksize, ctx.attr("strides"), (1, 1), ctx.attr("paddings")).out
        except InferError as e:
            ctx.fail(f"{e} (input spatial dims {list(spatial)})")
    ctx.set_output("Out", join_channels(n, c, out, False), x.dtype)
    ctx.set_output("Mask", join_channels(n, c, out, False), DType.int32)


register_op(OpSchema(
    "max_pool2d_with_index", inputs=[Slot("X")], outputs=[Slot("Out"), Slot("Mask")],
    attrs=[AttrSpec("ksize", AttrType.INTS), AttrSpec("strides", AttrType.INTS, [1, 1]),
           AttrSpec("paddings", AttrType.INTS, [0, 0]), AttrSpec("global_pooling", AttrType.BOOLEAN, False),
           AttrSpec("adaptive", AttrType.BOOLEAN, False)],
    infer=_infer_max_pool_with_index,
    doc="2-D max pooling over [N, C, H, W] (padding never the maximum), and Mask: where each maximum lies "
        "in its plane, h * W + w (int32; the first of equals in row-major order).",
))


def unpooled_shape(shape: Sequence[int], ksize: Sequence[int], strides: Sequence[int],
                   paddings: Sequence[int]) -> list[int]:
    """max_unpool's window inverse of an [N, C, ...] shape: (in - 1) * stride + ksize - paddings."""
    spatial = len(shape) - 2
    strides, paddings = list(strides) or [1] * spatial, list(paddings) or [0] * (2 * spatial)
    if not len(ksize) == len(strides) == spatial or len(paddings) != 2 * spatial:
        raise InferError(f"ksize {list(ksize)}, strides {strides} and paddings {paddings} must describe {spatial} "
                         f"spatial dims")
    return [*shape[:2], *((d - 1) * s + k - paddings[i] - paddings[spatial + i] if d >= 0 else -1
                          for i, (d, k, s) in enumerate(zip(shape[2:], ksize, strides)))]


def _infer_max_unpool(ctx: InferContext) -> None:
    x, index = ctx.input("X"), ctx.input("Indices")
    ctx.check(len(x.shape) >= 3 and index.shape == x.shape, f"X {list(x.shape)} and Indices {list(index.shape)} must "
                                                            f"be one [N, C, ...] shape")
    inverse = unpooled_shape(x.shape, ctx.attr("ksize"), ctx.attr("strides"), ctx.attr("paddings"))
    ctx.set_output("Out", [-1] * len(x.shape) if ctx.has_input("OutputShape") else inverse, x.dtype)


register_op(OpSchema(
    "max_unpool", inputs=[Slot("X"), Slot("Indices"), Slot("OutputShape", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("ksize", AttrType.INTS), AttrSpec("strides", AttrType.INTS, []),
           AttrSpec("paddings", AttrType.INTS, [])],
    infer=_infer_max_unpool, keep_dtype_slots=("Indices", "OutputShape"),
    doc="ONNX's MaxUnpool: zeros of the window's inverse shape ((in - 1) * stride + ksize - paddings, all begins "
        "then all ends) with X written at the flat indices in Indices, placed at the start of zeros of the "
        "OutputShape tensor's shape where it is given.",
))
