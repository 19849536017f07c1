"""Exporter of the losses: nll_loss as NegativeLogLikelihoodLoss."""

from __future__ import annotations

from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__: list[str] = []


@exports("nll_loss")
def nll_loss(ctx: ExportContext, op: Operator) -> None:
    if op.output("Total_weight"):
        ctx.fail("Total_weight has no ONNX form")
    weight = op.input("Weight")
    ctx.node("NegativeLogLikelihoodLoss", [op.input("X")[0], ctx.int64(op.input("Label")[0]), *weight[:1]],
             [op.output("Out")[0]], reduction=op.attr("reduction"), ignore_index=op.attr("ignore_index"))
