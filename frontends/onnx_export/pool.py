"""Exporters of the poolings: pool2d and pool3d as MaxPool, AveragePool, LpPool or their global
forms; max_pool2d_with_index as MaxPool with its Indices."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports
from .window import window_attrs

__all__: list[str] = []


@exports("pool2d", "pool3d")
def pool(ctx: ExportContext, op: Operator) -> None:
    x, out = op.input("X")[0], op.output("Out")[0]
    pooling = op.attr("pooling_type")
    ksize = list(op.attr("ksize"))
    spatial = 2 if op.type == "pool2d" else 3
    whole = op.attr("global_pooling") or (op.attr("adaptive") and ksize == [1] * spatial)
    if whole:
        ctx.node({"max": "GlobalMaxPool", "avg": "GlobalAveragePool", "lp": "GlobalLpPool"}[pooling], [x], [out],
                 p=int(op.attr("norm_type")) if pooling == "lp" else None)
        return
    if op.attr("adaptive"):
        ctx.fail(f"adaptive pooling to {ksize} has no ONNX op (only to size 1, a global pool)")
    window = window_attrs(ctx, op, spatial) | {"kernel_shape": ksize}
    dilations = list(op.attr("dilations", ())) or None
    if pooling == "lp":
        ctx.node("LpPool", [x], [out], p=int(op.attr("norm_type")), dilations=dilations, **window)
        return
    ceil = int(bool(op.attr("ceil_mode")))
    if pooling == "max":
        ctx.node("MaxPool", [x], [out], ceil_mode=ceil, dilations=dilations, **window)
        return
    if dilations and any(d != 1 for d in dilations) and ctx.opset < 19:
        ctx.fail(f"a dilated average pool needs opset 19 (asked for {ctx.opset})")
    ctx.node("AveragePool", [x], [out], ceil_mode=ceil, count_include_pad=int(not op.attr("exclusive")),
             dilations=dilations if ctx.opset >= 19 else None, **window)


@exports("max_pool2d_with_index")
def max_pool_with_index(ctx: ExportContext, op: Operator) -> None:
    """MaxPool with its Indices, made Paddle's Mask: the index in the plane, ONNX's modulo H * W (int32)."""
    x, out, mask = op.input("X")[0], op.output("Out")[0], op.output("Mask")[0]
    h, w = ctx.shape(x)[2:]
    if op.attr("adaptive") or min(h, w) < 0:
        ctx.fail("max_pool2d_with_index needs known spatial dims and no adaptive pooling")
    window: dict[str, Any] = {"kernel_shape": [h, w], "strides": [1, 1], "pads": [0, 0, 0, 0]}
    if not op.attr("global_pooling"):
        window = window_attrs(ctx, op, 2) | {"kernel_shape": list(op.attr("ksize"))}
    indices = ctx.temp(f"{mask}.indices")
    ctx.node("MaxPool", [x], [out, indices], **window)
    ctx.cast(ctx.node("Mod", [indices, ctx.const(h * w, np.int64, "plane")]), DType.int32, mask)


@exports("max_unpool")
def max_unpool(ctx: ExportContext, op: Operator) -> None:
    shape = [ctx.int64(op.input("OutputShape")[0])] if op.input("OutputShape") else []
    ctx.node("MaxUnpool", [op.input("X")[0], ctx.int64(op.input("Indices")[0]), *shape], [op.output("Out")[0]],
             kernel_shape=list(op.attr("ksize")), strides=list(op.attr("strides")) or None,
             pads=list(op.attr("paddings")) or None)
