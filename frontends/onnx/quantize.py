"""Converters of ONNX's quantization ops: QuantizeLinear, DequantizeLinear and
DynamicQuantizeLinear one-to-one; MatMulInteger as int32 casts, zero points subtracted and an
int32 ``matmul_v2``; QLinearMatMul as that product scaled by a_scale * b_scale / y_scale (in
float64, as ONNX's reference computes it) and quantized with scale 1 around y_zero_point; ConvInteger
and QLinearConv likewise, their convolution a float32 Conv of X and W less their zero points
(exact while an output sums at most 258 products).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, helper

from ...ir.dtypes import DType
from .context import GraphContext
from .math import cast_to
from .registry import converts
from .tensors import elem_dtype

__all__: list[str] = []


def _optional(node: NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


def _linear_inputs(node: NodeProto) -> dict[str, str]:
    inputs = {"X": node.input[0], "Scale": node.input[1]}
    if _optional(node, 2):
        inputs["ZeroPoint"] = node.input[2]
    return inputs


def _axis_attrs(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> dict[str, Any]:
    """quant_axis and block_size; the axis of a one-value scale (per tensor) is not read."""
    rank, axis, block = len(ctx.shape(node.input[0])), attrs.get("axis", 1), int(attrs.get("block_size", 0))
    per_tensor = int(np.prod(ctx.shape(node.input[1]))) == 1 and not block
    return {"quant_axis": 0 if per_tensor else ctx.axis(axis, rank, "axis"), "block_size": block}


@converts("QuantizeLinear", makes="quantize_linear")
def quantize_linear(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Y's type is attr output_dtype's, else the zero point's, else uint8."""
    zero = _optional(node, 2)
    if attrs.get("output_dtype"):
        out = elem_dtype(attrs["output_dtype"], "attr output_dtype")
    else:
        out = ctx.info(zero).dtype if zero else DType.uint8
    ctx.emit("quantize_linear", _linear_inputs(node), {"Y": node.output[0]},
             {**_axis_attrs(ctx, node, attrs), "out_dtype": int(out)})


@converts("DequantizeLinear", makes="dequantize_linear")
def dequantize_linear(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    if attrs.get("output_dtype") and elem_dtype(attrs["output_dtype"], "attr output_dtype") != ctx.info(
            node.input[1]).dtype:
        ctx.fail("an output_dtype other than the scale's type is not supported")
    ctx.emit("dequantize_linear", _linear_inputs(node), {"Y": node.output[0]}, _axis_attrs(ctx, node, attrs))


@converts("DynamicQuantizeLinear", makes="dynamic_quantize_linear")
def dynamic_quantize_linear(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    y, scale, zero = node.output
    ctx.emit("dynamic_quantize_linear", {"X": node.input[0]}, {"Y": y, "Scale": scale, "ZeroPoint": zero})


def _centred(ctx: GraphContext, x: str, zero: str, per_row: bool, hint: str) -> str:
    """``x`` - ``zero`` in int32; a zero point per row of A ([M]) is made a column first."""
    wide = cast_to(ctx, x, DType.int32, hint)
    if not zero:
        return wide
    offset = cast_to(ctx, zero, DType.int32, f"{hint}.zero")
    if per_row and len(ctx.shape(offset)) == 1 and ctx.shape(offset)[0] != 1:
        column = ctx.temp(f"{hint}.zero.column")
        ctx.emit("unsqueeze2", {"X": offset}, {"Out": column}, {"axes": [-1]})
        offset = column
    out = ctx.temp(f"{hint}.centred")
    ctx.emit("elementwise_sub", {"X": wide, "Y": offset}, {"Out": out}, {"axis": -1})
    return out


def _integer_product(ctx: GraphContext, a: str, a_zero: str, b: str, b_zero: str, out: str) -> None:
    ctx.emit("matmul_v2", {"X": _centred(ctx, a, a_zero, True, f"{out}.a"),
                           "Y": _centred(ctx, b, b_zero, False, f"{out}.b")}, {"Out": out})


@converts("MatMulInteger", makes="matmul_v2")
def matmul_integer(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    _integer_product(ctx, node.input[0], _optional(node, 2), node.input[1], _optional(node, 3), node.output[0])


def _multiplier(ctx: GraphContext, a_scale: str, b_scale: str, y_scale: str, hint: str) -> str:
    """a_scale * b_scale / y_scale in the scales' type, then float64."""
    if all(ctx.is_const(s) for s in (a_scale, b_scale, y_scale)):
        a, b, y = (ctx.consts[s] for s in (a_scale, b_scale, y_scale))
        return ctx.add_const(f"{hint}.multiplier", np.asarray(a * b / y).astype(np.float64))
    both, ratio = ctx.temp(f"{hint}.scales"), ctx.temp(f"{hint}.multiplier")
    ctx.emit("elementwise_mul", {"X": a_scale, "Y": b_scale}, {"Out": both}, {"axis": -1})
    ctx.emit("elementwise_div", {"X": both, "Y": y_scale}, {"Out": ratio}, {"axis": -1})
    return cast_to(ctx, ratio, DType.float64, hint)


@converts("QLinearMatMul", makes="matmul_v2")
def qlinear_matmul(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = node.input
    out = node.output[0]
    product, scaled, one = ctx.temp(f"{out}.product"), ctx.temp(f"{out}.scaled"), ctx.temp(f"{out}.one")
    _integer_product(ctx, a, a_zero, b, b_zero, product)
    wide = cast_to(ctx, product, DType.float64, f"{out}.product")
    ctx.emit("elementwise_mul", {"X": wide, "Y": _multiplier(ctx, a_scale, b_scale, y_scale, out)},
             {"Out": scaled}, {"axis": -1})
    unit = ctx.add_const(one, np.ones((), np.float64))
    inputs = {"X": scaled, "Scale": unit, **({"ZeroPoint": y_zero} if y_zero else {})}
    out_dtype = ctx.info(y_zero).dtype if y_zero else ctx.info(a).dtype
    ctx.emit("quantize_linear", inputs, {"Y": out}, {"out_dtype": int(out_dtype)})


_EXACT_TAPS = 2**24 // (255 * 255)
"""The most products of 8-bit values less their zero points (each within 255 * 255) a float32 sum
holds exactly: a float32 convolution computes ConvInteger and QLinearConv."""


def _shifted(ctx: GraphContext, x: str, zero: str, axis: int, hint: str) -> str:
    """``x`` - ``zero`` in float32 (a zero point per output channel broadcast along ``axis``)."""
    wide = cast_to(ctx, x, DType.float32, hint)
    if not zero:
        return wide
    out = ctx.temp(f"{hint}.shifted")
    ctx.emit("elementwise_sub", {"X": wide, "Y": cast_to(ctx, zero, DType.float32, f"{hint}.zero")}, {"Out": out},
             {"axis": axis if len(ctx.shape(zero)) == 1 and ctx.shape(zero)[0] != 1 else -1})
    return out


def _integer_conv(ctx: GraphContext, node: NodeProto, x: str, x_zero: str, w: str, w_zero: str, out: str) -> None:
    """Conv of the shifted 8-bit X and W in float32, exact for up to ``_EXACT_TAPS`` taps an output."""
    assert ctx.convert_node is not None, "the converter runs inside an import"
    shape = ctx.static_shape(w, f"{node.op_type}'s weight")
    if int(np.prod(shape[1:])) > _EXACT_TAPS:
        ctx.fail(f"a weight {list(shape)} sums {int(np.prod(shape[1:]))} products an output, more than the "
                 f"{_EXACT_TAPS} a float32 convolution holds exactly")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    ctx.convert_node(helper.make_node("Conv", [_shifted(ctx, x, x_zero, -1, f"{out}.x"),
                                               _shifted(ctx, w, w_zero, 0, f"{out}.w")], [out], **attrs))


@converts("ConvInteger", makes="conv2d")
def conv_integer(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    products = ctx.temp(f"{node.output[0]}.products")
    _integer_conv(ctx, node, node.input[0], _optional(node, 2), node.input[1], _optional(node, 3), products)
    ctx.emit("cast", {"X": products}, {"Out": node.output[0]},
             {"in_dtype": int(DType.float32), "out_dtype": int(DType.int32)})


@converts("QLinearConv", makes="conv2d")
def qlinear_conv(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """ConvInteger's sum plus the int32 bias, scaled by x_scale * w_scale / y_scale (float64) and
    quantized with scale 1 around y_zero_point, as QLinearMatMul."""
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = (list(node.input) + [""] * 9)[:8]
    bias, out = _optional(node, 8), node.output[0]
    products, wide, scaled = ctx.temp(f"{out}.products"), ctx.temp(f"{out}.wide"), ctx.temp(f"{out}.scaled")
    _integer_conv(ctx, node, x, x_zero, w, w_zero, products)
    ctx.emit("cast", {"X": products}, {"Out": wide}, {"in_dtype": int(DType.float32), "out_dtype": int(DType.float64)})
    if bias:
        biased = ctx.temp(f"{out}.biased")
        ctx.emit("elementwise_add", {"X": wide, "Y": cast_to(ctx, bias, DType.float64, f"{out}.bias")},
                 {"Out": biased}, {"axis": 1})
        wide = biased
    multiplier = _multiplier(ctx, x_scale, w_scale, y_scale, out)
    ctx.emit("elementwise_mul", {"X": wide, "Y": multiplier}, {"Out": scaled},
             {"axis": 1 if len(ctx.shape(multiplier)) == 1 and ctx.shape(multiplier)[0] != 1 else -1})
    unit = ctx.add_const(ctx.temp(f"{out}.one"), np.ones((), np.float64))
    ctx.emit("quantize_linear", {"X": scaled, "Scale": unit, **({"ZeroPoint": y_zero} if y_zero else {})},
             {"Y": out}, {"out_dtype": int(ctx.info(y_zero).dtype if y_zero else ctx.info(x).dtype)})
