"""Schemas of linear quantization: ``quantize_linear`` and ``dequantize_linear`` (Paddle's op
types and slots X, Scale, ZeroPoint -> Y, and its ``quant_axis``), and ``dynamic_quantize_linear``
(halfway's, for ONNX's DynamicQuantizeLinear: no Paddle op computes its scale at run time).

Y = saturate(round_half_even(X / Scale) + ZeroPoint) into ``out_dtype``; X = (Y - ZeroPoint) *
Scale back. Scale and ZeroPoint hold one value (per tensor), one per index of dim ``quant_axis``
(per axis), or, with ``block_size`` > 0, X's shape with dim ``quant_axis`` divided into blocks of
``block_size`` (blocked, the last block possibly shorter).
"""

from __future__ import annotations

import math

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op

__all__ = ["QUANTIZED"]

QUANTIZED = (DType.int8, DType.uint8, DType.int16, DType.uint16)
"""The element types a quantized tensor may have."""


def _check_params(ctx: InferContext, shape: tuple[int, ...]) -> None:
    """Scale (and ZeroPoint) one value, one per index of dim quant_axis, or X's blocks."""
    axis, block = ctx.attr("quant_axis"), ctx.attr("block_size")
    rank = len(shape)
    for slot in ("Scale", "ZeroPoint"):
        if not ctx.has_input(slot):
            continue
        given = ctx.input(slot).shape
        if math.prod(given) == 1 and block == 0:
            continue
        ctx.check(-rank <= axis < rank, f"attr quant_axis {axis} is out of range for X {list(shape)}")
        dim = shape[axis % rank]
        if block == 0:
            ctx.check(len(given) == 1 and -1 in (dim, given[0]) or given == (dim,),
                      f"{slot} {list(given)} must hold one value or one per index of dim {axis} of X {list(shape)}")
            continue
        blocks = -1 if dim < 0 else -(-dim // block)
        wanted = tuple(blocks if d == axis % rank else n for d, n in enumerate(shape))
        ctx.check(len(given) == rank and all(-1 in (a, b) or a == b for a, b in zip(given, wanted)),
                  f"{slot} {list(given)} must be X {list(shape)} in blocks of {block} along dim {axis}: "
                  f"{list(wanted)}")


def _infer_quantize(ctx: InferContext) -> None:
    x = ctx.input("X")
    out = DType.from_any(ctx.attr("out_dtype"))
    ctx.check(out in QUANTIZED, f"attr out_dtype {out.name} is no quantized type ({', '.join(d.name for d in QUANTIZED)})")
    if ctx.has_input("ZeroPoint"):
        zero = ctx.input("ZeroPoint").dtype
        ctx.check(zero is out, f"ZeroPoint is {zero.name}, but out_dtype is {out.name}")
    _check_params(ctx, x.shape)
    ctx.set_output("Y", x.shape, out)


def _infer_dequantize(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.check(x.dtype in QUANTIZED or x.dtype is DType.int32, f"X must be quantized, is {x.dtype.name}")
    if ctx.has_input("ZeroPoint"):
        zero = ctx.input("ZeroPoint").dtype
        ctx.check(zero is x.dtype, f"ZeroPoint is {zero.name}, but X is {x.dtype.name}")
    _check_params(ctx, x.shape)
    ctx.set_output("Y", x.shape, ctx.input("Scale").dtype)


_AXIS_ATTRS = [AttrSpec("quant_axis", AttrType.INT, 0), AttrSpec("block_size", AttrType.INT, 0)]
_SLOTS = [Slot("X"), Slot("Scale"), Slot("ZeroPoint", dispensable=True)]

register_op(OpSchema(
    "quantize_linear", inputs=_SLOTS, outputs=[Slot("Y")],
    attrs=[*_AXIS_ATTRS, AttrSpec("out_dtype", AttrType.INT, int(DType.uint8))],
    infer=_infer_quantize, keep_dtype_slots=("ZeroPoint",),
    doc="Y = saturate(round_half_even(X / Scale) + ZeroPoint), of type out_dtype.",
))
register_op(OpSchema(
    "dequantize_linear", inputs=_SLOTS, outputs=[Slot("Y")], attrs=_AXIS_ATTRS,
    infer=_infer_dequantize, keep_dtype_slots=("Scale",),
    doc="Y = (X - ZeroPoint) * Scale, of Scale's type.",
))


def _infer_dynamic(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Y", x.shape, DType.uint8)
    ctx.set_output("Scale", (), x.dtype)
    ctx.set_output("ZeroPoint", (), DType.uint8)


register_op(OpSchema(
    "dynamic_quantize_linear", inputs=[Slot("X")], outputs=[Slot("Y"), Slot("Scale"), Slot("ZeroPoint")],
    infer=_infer_dynamic,
    doc="X quantized to uint8 over the range [min(X, 0), max(X, 0)]: Scale = (max - min) / 255 (1 / 255 when "
        "max = min), ZeroPoint = round_half_even(saturate(-min / Scale)), Y as quantize_linear computes it.",
))
