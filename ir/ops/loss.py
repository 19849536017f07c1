"""Schemas of the losses: ``nll_loss`` (Paddle's op type, slots and attrs), which ONNX's
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (after a log_softmax over dim 1) import as.

X holds log-probabilities [N, C, d1, ..., dk] (Paddle's 2-D and 4-D cases, and any rank >= 2
beside them), Label the classes [N, d1, ..., dk]; Weight, when given, one weight per class.
"""

from __future__ import annotations

from ..attrs import AttrType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op

__all__: list[str] = []

REDUCTIONS = ("none", "sum", "mean")


def _infer_nll_loss(ctx: InferContext) -> None:
    x, label = ctx.input("X"), ctx.input("Label")
    ctx.check(len(x.shape) >= 2, f"X must have rank >= 2 ([N, C, ...]), has shape {list(x.shape)}")
    target = (x.shape[0], *x.shape[2:])
    ctx.check(len(label.shape) == len(target) and all(a in (b, -1) or b == -1 for a, b in zip(label.shape, target)),
              f"Label {list(label.shape)} must be X {list(x.shape)} without its class dim 1")
    ctx.check(not label.dtype.is_floating, f"Label must hold integer classes, is {label.dtype.name}")
    if ctx.has_input("Weight"):
        weight = ctx.input("Weight").shape
        ctx.check(len(weight) == 1 and weight[0] in (x.shape[1], -1) or x.shape[1] == -1,
                  f"Weight must hold one value per class ({x.shape[1]}), has shape {list(weight)}")
    reduced = ctx.attr("reduction") != "none"
    ctx.set_output("Out", () if reduced else target, x.dtype)
    ctx.set_output("Total_weight", (), x.dtype)


register_op(OpSchema(
    "nll_loss", inputs=[Slot("X"), Slot("Label"), Slot("Weight", dispensable=True)],
    outputs=[Slot("Out"), Slot("Total_weight", dispensable=True)],
    attrs=[AttrSpec("ignore_index", AttrType.LONG, -100),
           AttrSpec("reduction", AttrType.STRING, "mean", choices=REDUCTIONS)],
    infer=_infer_nll_loss, keep_dtype_slots=("Label",),
    doc="Out = -X[n, Label[n, ...], ...] * Weight[Label[n, ...]] per entry (0 where Label is ignore_index), "
        "summed, or averaged over the weights of the entries not ignored (their sum is Total_weight).",
))
