"""Converters of ONNX's losses: NegativeLogLikelihoodLoss as ``nll_loss``, and
SoftmaxCrossEntropyLoss as ``log_softmax`` over the class dim 1 (its log_prob output) followed by
``nll_loss``.

ONNX has no ignore_index unless the node gives one, and then every label must be a class;
``nll_loss`` always has one (Paddle's default -100, never a class), so an absent one changes
nothing for a valid model and a label of -100 fails in the kernel like any other non-class.
"""

from __future__ import annotations

from typing import Any

from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []

_PADDLE_IGNORE_INDEX = -100


def _nll_loss(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], log_prob: str) -> None:
    inputs = {"X": log_prob, "Label": node.input[1]}
    if len(node.input) > 2 and node.input[2]:
        inputs["Weight"] = node.input[2]
    ctx.emit("nll_loss", inputs, {"Out": node.output[0]},
             {"reduction": attrs.get("reduction", "mean"),
              "ignore_index": int(attrs.get("ignore_index", _PADDLE_IGNORE_INDEX))})


@converts("NegativeLogLikelihoodLoss", makes="nll_loss")
def nll_loss(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    _nll_loss(ctx, node, attrs, node.input[0])


@converts("SoftmaxCrossEntropyLoss", makes=("log_softmax", "nll_loss"))
def softmax_cross_entropy(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    log_prob = node.output[1] if ctx.is_used(node, 1) else ctx.temp(f"{node.output[0]}.log_prob")
    ctx.emit("log_softmax", {"X": node.input[0]}, {"Out": log_prob}, {"axis": 1})
    _nll_loss(ctx, node, attrs, log_prob)
