"""Converters of ONNX's signal ops DFT (to halfway's dft: ``halfway.ir.ops.signal``) and
MelWeightMatrix (mel_weight_matrix, one to one).

The axis is an attr before opset 20 and an input from it, which may be computed at run time
(the dft's AxisTensor); dft_length must be a constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from .context import GraphContext
from .registry import converts
from .tensors import elem_dtype

__all__: list[str] = []


@converts("DFT", makes="dft")
def dft(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, out = node.input[0], node.output[0]
    given = ctx.optional_const(node, 1, "dft_length")
    flags = {"inverse": bool(attrs.get("inverse", 0)), "onesided": bool(attrs.get("onesided", 0)),
             "dft_length": 0 if given is None else int(np.asarray(given).reshape(-1)[0])}
    axis_input = node.input[2] if ctx.opset >= 20 and len(node.input) > 2 and node.input[2] else ""
    if axis_input and not ctx.is_const(axis_input):
        ctx.emit("dft", {"X": x, "AxisTensor": axis_input}, {"Out": out}, flags)
        return
    axis = int(np.asarray(ctx.consts[axis_input]).reshape(-1)[0]) if axis_input else attrs.get(
        "axis", -2 if ctx.opset >= 20 else 1)
    ctx.emit("dft", {"X": x}, {"Out": out}, {"axis": ctx.axis(axis, len(ctx.shape(x))), **flags})


@converts("MelWeightMatrix", makes="mel_weight_matrix")
def mel_weight_matrix(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    slots = ("NumMelBins", "DftLength", "SampleRate", "LowerEdgeHertz", "UpperEdgeHertz")
    out = elem_dtype(attrs.get("output_datatype", 1), "attr output_datatype")
    ctx.emit("mel_weight_matrix", dict(zip(slots, node.input)), {"Out": node.output[0]}, {"out_dtype": int(out)})
