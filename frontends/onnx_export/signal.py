"""Exporters of the signal ops: dft, as ONNX's DFT (its axis an input from opset 20), and
mel_weight_matrix, as MelWeightMatrix (opset 17)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.operator import Operator
from .context import ExportContext, onnx_type
from .registry import exports

__all__: list[str] = []


@exports("dft")
def dft(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 17:
        ctx.fail(f"DFT needs opset 17 (asked for {ctx.opset})")
    length = ctx.const(op.attr("dft_length"), np.int64, "dft_length") if op.attr("dft_length") else ""
    flags: dict[str, Any] = {"inverse": int(op.attr("inverse")), "onesided": int(op.attr("onesided"))}
    axis_tensor = op.input("AxisTensor")
    if ctx.opset >= 20:
        axis = ctx.int64(axis_tensor[0]) if axis_tensor else ctx.const(op.attr("axis"), np.int64, "axis")
        ctx.node("DFT", [op.input("X")[0], length, axis], [op.output("Out")[0]], **flags)
        return
    if axis_tensor:
        ctx.fail("DFT with its axis computed at run time needs opset 20")
    ctx.node("DFT", [op.input("X")[0], length] if length else [op.input("X")[0]], [op.output("Out")[0]],
             axis=op.attr("axis"), **flags)


@exports("mel_weight_matrix")
def mel_weight_matrix(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 17:
        ctx.fail(f"MelWeightMatrix needs opset 17 (asked for {ctx.opset})")
    slots = ("NumMelBins", "DftLength", "SampleRate", "LowerEdgeHertz", "UpperEdgeHertz")
    ctx.node("MelWeightMatrix", [op.input(slot)[0] for slot in slots], [op.output("Out")[0]],
             output_datatype=onnx_type(ctx.dtype(op.output("Out")[0])))
