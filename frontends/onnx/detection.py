"""Converters of ONNX's detection ops NonMaxSuppression (to halfway's non_max_suppression:
``halfway.ir.ops.detection``; its limit and thresholds may be computed at run time) and RoiAlign
(roi_align: its batch_indices the BatchIndices; half_pixel, opset 16's default, is aligned)."""

from __future__ import annotations

from typing import Any

from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []

_OPTIONAL = ("MaxOutputBoxesPerClass", "IouThreshold", "ScoreThreshold")


@converts("NonMaxSuppression", makes="non_max_suppression")
def non_max_suppression(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    given = {slot: name for slot, name in zip(_OPTIONAL, node.input[2:]) if name}
    ctx.emit("non_max_suppression", {"Boxes": node.input[0], "Scores": node.input[1], **given},
             {"Out": node.output[0]}, {"center_point_box": attrs.get("center_point_box", 0)})


@converts("RoiAlign", makes="roi_align")
def roi_align(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    transform = attrs.get("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    mode = attrs.get("mode", "avg")
    if transform not in ("half_pixel", "output_half_pixel") or mode not in ("avg", "max"):
        ctx.fail(f"coordinate_transformation_mode {transform!r} and mode {mode!r}: RoiAlign takes 'half_pixel' or "
                 f"'output_half_pixel', and 'avg' or 'max'")
    ctx.emit("roi_align", {"X": node.input[0], "ROIs": node.input[1], "BatchIndices": node.input[2]},
             {"Out": node.output[0]},
             {"spatial_scale": float(attrs.get("spatial_scale", 1.0)), "pooled_height": attrs.get("output_height", 1),
              "pooled_width": attrs.get("output_width", 1), "sampling_ratio": attrs.get("sampling_ratio", 0),
              "aligned": transform == "half_pixel", "mode": mode})
