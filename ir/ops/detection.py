"""Schema of the detection op: non_max_suppression, ONNX's NonMaxSuppression as halfway holds it.

Boxes [batch, boxes, 4] are corners [y1, x1, y2, x2] (either corner first) or, with
``center_point_box``, [x_center, y_center, width, height]; Scores are [batch, classes, boxes]. Per
batch and class, the boxes scoring above ScoreThreshold, best first (equal scores by index), are
kept unless their intersection over union with a box kept before exceeds IouThreshold, at most
MaxOutputBoxesPerClass of them (none when it is absent). Out is [kept, 3] int64 rows (batch,
class, box), a count known only at run time.
"""

from __future__ import annotations

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op

__all__: list[str] = []


def _infer_nms(ctx: InferContext) -> None:
    boxes, scores = ctx.input("Boxes"), ctx.input("Scores")
    ctx.check(len(boxes.shape) == 3 and boxes.shape[2] in (4, -1), f"Boxes must be [batch, boxes, 4], has shape "
                                                                    f"{list(boxes.shape)}")
    ctx.check(len(scores.shape) == 3, f"Scores must be [batch, classes, boxes], has shape {list(scores.shape)}")
    ctx.check(ctx.attr("center_point_box") in (0, 1), f"attr center_point_box must be 0 or 1, got "
                                                       f"{ctx.attr('center_point_box')}")
    ctx.set_output("Out", [-1, 3], DType.int64)


register_op(OpSchema(
    "non_max_suppression",
    inputs=[Slot("Boxes"), Slot("Scores"), Slot("MaxOutputBoxesPerClass", dispensable=True),
            Slot("IouThreshold", dispensable=True), Slot("ScoreThreshold", dispensable=True)],
    outputs=[Slot("Out")], attrs=[AttrSpec("center_point_box", AttrType.INT, 0)], infer=_infer_nms,
    keep_dtype_slots=("MaxOutputBoxesPerClass", "IouThreshold", "ScoreThreshold"),
    doc="The (batch, class, box) rows of the boxes greedy non-maximum suppression keeps per batch and "
        "class (module docstring).",
))
