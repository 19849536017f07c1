"""Exporters of the poolings: pool2d and pool3d as MaxPool, AveragePool, LpPool or their global
forms."""

from __future__ import annotations

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
