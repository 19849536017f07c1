"""Schemas of the detection ops: non_max_suppression, ONNX's NonMaxSuppression as halfway holds it,
and roi_align (Paddle's, with ONNX's RoiAlign in it).

non_max_suppression:

Boxes [batch, boxes, 4] are corners [y1, x1, y2, x2] (either corner first) or, with
``center_point_box``, [x_center, y_center, width, height]; Scores are [batch, classes, boxes]. Per
batch and class, the boxes scoring above ScoreThreshold, best first (equal scores by index), are
kept unless their intersection over union with a box kept before exceeds IouThreshold, at most
MaxOutputBoxesPerClass of them (none when it is absent). Out is [kept, 3] int64 rows (batch,
class, box), a count known only at run time.

roi_align: each of ROIs [rois, 4] ([x1, y1, x2, y2], scaled by ``spatial_scale``) over its image of
X [N, C, H, W] (BatchIndices [rois], a halfway slot for ONNX's batch_indices, or Paddle's RoisNum,
the rois of each image in turn) cut into ``pooled_height`` x ``pooled_width`` bins, each the mean
(``mode`` "avg") or the maximum ("max", a halfway attr for ONNX: of each sample's four corner
values times their bilinear weights, as ONNX Runtime computes it) of ``sampling_ratio`` x
``sampling_ratio`` bilinear samples (<= 0: ceil(the bin's size) per side). ``aligned`` shifts the
scaled corners by half a pixel (ONNX's half_pixel); unaligned rois are at least 1 x 1. A sample
beyond a pixel outside X reads 0. Out is [rois, C, pooled_height, pooled_width].
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


def _infer_roi_align(ctx: InferContext) -> None:
    x, rois = ctx.input("X"), ctx.input("ROIs")
    ctx.check(len(x.shape) == 4, f"X must be [N, C, H, W], has shape {list(x.shape)}")
    ctx.check(len(rois.shape) == 2 and rois.shape[1] in (4, -1), f"ROIs must be [rois, 4], has shape "
                                                                   f"{list(rois.shape)}")
    ctx.check(not (ctx.has_input("BatchIndices") and ctx.has_input("RoisNum")),
              "BatchIndices and RoisNum both name the rois' images; give one")
    height, width = ctx.attr("pooled_height"), ctx.attr("pooled_width")
    ctx.check(height > 0 and width > 0, f"attrs pooled_height and pooled_width must be > 0, got {height}, {width}")
    ctx.set_output("Out", [rois.shape[0], x.shape[1], height, width], x.dtype)


register_op(OpSchema(
    "roi_align",
    inputs=[Slot("X"), Slot("ROIs"), Slot("RoisNum", dispensable=True), Slot("BatchIndices", dispensable=True)],
    outputs=[Slot("Out")],
    attrs=[AttrSpec("spatial_scale", AttrType.FLOAT, 1.0), AttrSpec("pooled_height", AttrType.INT, 1),
           AttrSpec("pooled_width", AttrType.INT, 1), AttrSpec("sampling_ratio", AttrType.INT, -1),
           AttrSpec("aligned", AttrType.BOOLEAN, False), AttrSpec("mode", AttrType.STRING, "avg", choices=("avg", "max"))],
    infer=_infer_roi_align, keep_dtype_slots=("RoisNum", "BatchIndices"),
    doc="Each roi of X pooled into pooled_height x pooled_width bins of bilinear samples, averaged or their "
        "maximum (module docstring).",
))
