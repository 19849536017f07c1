"""Exporters of the quantization ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__: list[str] = []


def _axis_attrs(ctx: ExportContext, op: Operator) -> dict[str, Any]:
    block = op.attr("block_size")
    if block and ctx.opset < 21:
        ctx.fail(f"blocked quantization needs opset 21 (asked for {ctx.opset})")
    return {"axis": op.attr("quant_axis"), "block_size": block or None}


def _zero_point(ctx: ExportContext, op: Operator, dtype: DType) -> list[str]:
    """The ZeroPoint input, or zeros of ``dtype`` shaped as the scale (which give Y its type)."""
    given = op.input("ZeroPoint")
    if given:
        return [given[0]]
    scale = ctx.shape(op.input("Scale")[0])
    if -1 in scale:
        ctx.fail(f"a quantization without zero point needs a scale of known shape, not {list(scale)}")
    return [ctx.const(np.zeros(scale, dtype.numpy), base="zero_point")]


@exports("quantize_linear")
def quantize_linear(ctx: ExportContext, op: Operator) -> None:
    x, y = op.input("X")[0], op.output("Y")[0]
    scale = op.input("Scale")[0]
    if ctx.dtype(x) is DType.float64:  # QuantizeLinear takes float32 and narrower
        x, scale = ctx.cast(x, DType.float32), ctx.cast(scale, DType.float32)
    inputs = [x, scale, *_zero_point(ctx, op, ctx.dtype(y))]
    ctx.node("QuantizeLinear", inputs, [y], **_axis_attrs(ctx, op))


@exports("dequantize_linear")
def dequantize_linear(ctx: ExportContext, op: Operator) -> None:
    x, y = op.input("X")[0], op.output("Y")[0]
    zero = op.input("ZeroPoint")
    ctx.node("DequantizeLinear", [x, op.input("Scale")[0], *zero[:1]], [y], **_axis_attrs(ctx, op))


@exports("dynamic_quantize_linear")
def dynamic_quantize_linear(ctx: ExportContext, op: Operator) -> None:
    ctx.node("DynamicQuantizeLinear", [op.input("X")[0]],
             [op.output("Y")[0], op.output("Scale")[0], op.output("ZeroPoint")[0]])


