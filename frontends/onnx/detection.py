"""Converter of ONNX's detection op NonMaxSuppression (to halfway's non_max_suppression:
``halfway.ir.ops.detection``); its limit and thresholds may be computed at run time."""

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
