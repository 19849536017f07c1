"""Exporters of the detection ops: non_max_suppression, as ONNX's NonMaxSuppression, and roi_align, as
RoiAlign (aligned needs opset 16's coordinate_transformation_mode; Paddle's RoisNum is refused)."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__: list[str] = []


@exports("non_max_suppression")
def non_max_suppression(ctx: ExportContext, op: Operator) -> None:
    optional = [op.input(slot)[0] if op.input(slot) else "" for slot in ("MaxOutputBoxesPerClass", "IouThreshold",
                                                                         "ScoreThreshold")]
    while optional and not optional[-1]:
        optional.pop()
    ctx.node("NonMaxSuppression", [op.input("Boxes")[0], op.input("Scores")[0], *optional], [op.output("Out")[0]],
             center_point_box=op.attr("center_point_box"))


@exports("roi_align")
def roi_align(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 10:
        ctx.fail(f"RoiAlign needs opset 10 (asked for {ctx.opset})")
    if op.attr("aligned") and ctx.opset < 16:
        ctx.fail(f"an aligned RoiAlign (half_pixel) needs opset 16 (asked for {ctx.opset})")
    transform = {"coordinate_transformation_mode": "half_pixel" if op.attr("aligned") else "output_half_pixel"}
    ctx.node("RoiAlign", [op.input("X")[0], op.input("ROIs")[0], _batch_indices(ctx, op)], [op.output("Out")[0]],
             mode=op.attr("mode"), output_height=op.attr("pooled_height"), output_width=op.attr("pooled_width"),
             sampling_ratio=max(op.attr("sampling_ratio"), 0), spatial_scale=op.attr("spatial_scale"),
             **(transform if ctx.opset >= 16 else {}))


def _batch_indices(ctx: ExportContext, op: Operator) -> str:
    """The rois' images as RoiAlign's int64 batch_indices: BatchIndices, or zeros (a one-image X)."""
    if op.input("RoisNum"):
        ctx.fail("roi_align's RoisNum (Paddle's rois per image) has no RoiAlign form; give BatchIndices")
    if op.input("BatchIndices"):
        return ctx.int64(op.input("BatchIndices")[0])
    count = ctx.node("Slice", [ctx.node("Shape", [op.input("ROIs")[0]]), ctx.const([0], np.int64, "starts"),
                               ctx.const([1], np.int64, "ends")])
    return ctx.node("ConstantOfShape", [count], value=numpy_helper.from_array(np.zeros(1, np.int64)))
