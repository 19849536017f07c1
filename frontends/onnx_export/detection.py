"""Exporter of the detection op: non_max_suppression, as ONNX's NonMaxSuppression."""

from __future__ import annotations

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
