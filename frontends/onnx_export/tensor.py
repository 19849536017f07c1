"""Exporters of the tensor ops: shapes (reshape, flatten, squeeze, unsqueeze, transpose, shape),
slicing, joining and splitting, padding (pad, pad3d), fills, copies, dropout, casts and the
scalar arithmetic ops (scale, pow, sum, clip, mean).

Shape tensors (reshape2's Shape, slice's StartsTensor, fill_constant's ShapeTensor, pad's
Paddings) become inputs of the ONNX op, cast to int64 where they are not.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir.dtypes import DType
from ...ir.operator import Operator
from .context import ExportContext, onnx_type
from .registry import exports

__all__ = ["one_input", "refuse_lists"]


def one_input(op: Operator, slot: str) -> str | None:
    names = op.input(slot) if slot in op.inputs else ()
    return names[0] if names else None


def refuse_lists(ctx: ExportContext, op: Operator, *slots: str) -> None:
    given = [slot for slot in slots if slot in op.inputs and op.input(slot)]
    if given:
        ctx.fail(f"tensor lists {given} are not supported (give one shape tensor)")


def _to_dtype_of(ctx: ExportContext, value: str, out: str, made: DType) -> None:
    """Write ``value`` (of dtype ``made``) into ``out``, cast to ``out``'s dtype if it differs."""
    if ctx.dtype(out) is made:
        ctx.node("Identity", [value], [out])
    else:
        ctx.node("Cast", [value], [out], to=onnx_type(ctx.dtype(out)))


@exports("bitcast")
def bitcast(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 26:
        ctx.fail(f"BitCast needs opset 26 (asked for {ctx.opset})")
    ctx.node("BitCast", [op.input("X")[0]], [op.output("Out")[0]], to=onnx_type(ctx.dtype(op.output("Out")[0])))


@exports("assign")
def assign(ctx: ExportContext, op: Operator) -> None:
    if not op.input("X"):
        ctx.fail("an assign without X (keeping Out as it is) has no ONNX form")
    ctx.node("Identity", [op.input("X")[0]], [op.output("Out")[0]])


@exports("cast")
def cast(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Cast", [op.input("X")[0]], [op.output("Out")[0]], to=onnx_type(DType(op.attr("out_dtype"))))


@exports("reshape2")
def reshape2(ctx: ExportContext, op: Operator) -> None:
    """Paddle's 0 (copy the dim) is ONNX's 0 without allowzero."""
    refuse_lists(ctx, op, "ShapeTensor")
    shape = one_input(op, "Shape")
    target = ctx.int64(shape) if shape else ctx.ints(op.attr("shape"))
    ctx.node("Reshape", [op.input("X")[0], target], [op.output("Out")[0]])


@exports("flatten_contiguous_range")
def flatten(ctx: ExportContext, op: Operator) -> None:
    """A Reshape: copied leading dims (0), the merged dim (-1), and the trailing dims — known ones
    as numbers, else taken from the run-time shape."""
    x, out = op.input("X")[0], op.output("Out")[0]
    rank = ctx.rank(x)
    start, stop = (a % rank if rank else 0 for a in (op.attr("start_axis"), op.attr("stop_axis")))
    tail = ctx.shape(x)[stop + 1:]
    if all(d >= 0 for d in tail):
        ctx.node("Reshape", [x, ctx.ints([0] * start + [-1] + list(tail))], [out])
        return
    whole = ctx.node("Shape", [x])
    parts = [ctx.ints([0] * start + [-1]), ctx.node("Slice", [whole, ctx.ints([stop + 1]), ctx.ints([rank])])]
    ctx.node("Reshape", [x, ctx.node("Concat", parts, axis=0)], [out])


@exports("transpose2")
def transpose2(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Transpose", [op.input("X")[0]], [op.output("Out")[0]], perm=list(op.attr("axis")))


@exports("squeeze2")
def squeeze2(ctx: ExportContext, op: Operator) -> None:
    """No axes: every unit dim (ONNX's Squeeze without axes); Paddle skips listed dims that are
    not 1, so only known unit dims (or unknown ones) are listed."""
    x, axes = op.input("X")[0], list(op.attr("axes"))
    if op.input("AxesTensor"):
        ctx.node("Squeeze", [x, ctx.int64(op.input("AxesTensor")[0])], [op.output("Out")[0]])
        return
    shape = ctx.shape(x)
    inputs = [x]
    if axes:
        axes = [a % len(shape) for a in axes if shape[a % len(shape)] in (1, -1)]
        if not axes:
            ctx.node("Identity", [x], [op.output("Out")[0]])
            return
        inputs.append(ctx.ints(axes))
    ctx.node("Squeeze", inputs, [op.output("Out")[0]])


@exports("unsqueeze2")
def unsqueeze2(ctx: ExportContext, op: Operator) -> None:
    """Paddle inserts its axes one after the other; in ascending order that is ONNX's reading. An
    AxesTensor (computed at run time) is ONNX's axes as it is: one axis reads alike in both, and
    several do when they ascend from 0 up, as the importer orders them."""
    refuse_lists(ctx, op, "AxesTensorList")
    if op.input("AxesTensor"):
        ctx.node("Unsqueeze", [op.input("X")[0], ctx.int64(op.input("AxesTensor")[0])], [op.output("Out")[0]])
        return
    rank = ctx.rank(op.input("X")[0])
    axes, placed = list(op.attr("axes")), list[int]()
    for a in axes:
        placed.append(a % (rank + len(placed) + 1))
    if placed != sorted(placed):
        ctx.fail(f"axes {axes} are not ascending")
    ctx.node("Unsqueeze", [op.input("X")[0], ctx.ints(placed)], [op.output("Out")[0]])


@exports("shape")
def shape(ctx: ExportContext, op: Operator) -> None:
    out = op.output("Out")[0]
    _to_dtype_of(ctx, ctx.node("Shape", [op.input("Input")[0]]), out, DType.int64)


@exports("concat")
def concat(ctx: ExportContext, op: Operator) -> None:
    if one_input(op, "AxisTensor"):
        ctx.fail("a run-time axis (AxisTensor) is not supported")
    ctx.node("Concat", list(op.input("X")), [op.output("Out")[0]], axis=op.attr("axis"))


@exports("split")
def split(ctx: ExportContext, op: Operator) -> None:
    refuse_lists(ctx, op, "AxisTensor")
    x, outs = op.input("X")[0], list(op.output("Out"))
    axis = op.attr("axis")
    if op.input("SectionsTensorList"):  # one-value tensors, computed at run time
        sizes = ctx.node("Concat", [ctx.node("Reshape", [ctx.int64(s), ctx.ints([1])]) for s in op.input("SectionsTensorList")],
                         axis=0)
        ctx.node("Split", [x, sizes], outs, axis=axis)
        return
    sections = list(op.attr("sections"))
    if -1 in sections:
        dim = ctx.shape(x)[axis]
        if dim < 0:
            ctx.fail(f"sections {sections} hold a -1 and dim {axis} of {x!r} is unknown")
        sections[sections.index(-1)] = dim - (sum(sections) + 1)
    if sections:
        ctx.node("Split", [x, ctx.ints(sections)], outs, axis=axis)
    else:
        ctx.node("Split", [x], outs, axis=axis, num_outputs=len(outs) if ctx.opset >= 18 else None)


def _slice(ctx: ExportContext, op: Operator, starts: str, ends: str, steps: str | None) -> None:
    x, out = op.input("Input")[0], op.output("Out")[0]
    inputs = [x, starts, ends, ctx.ints(op.attr("axes"))] + ([steps] if steps else [])
    decrease = list(op.attr("decrease_axis", ()))
    value = ctx.node("Slice", inputs, None if decrease else [out])
    if decrease:
        ctx.node("Squeeze", [value, ctx.ints(decrease)], [out])


@exports("slice")
def slice_(ctx: ExportContext, op: Operator) -> None:
    refuse_lists(ctx, op, "StartsTensorList", "EndsTensorList")
    starts, ends = one_input(op, "StartsTensor"), one_input(op, "EndsTensor")
    _slice(ctx, op, ctx.int64(starts) if starts else ctx.ints(op.attr("starts")),
           ctx.int64(ends) if ends else ctx.ints(op.attr("ends")), None)


@exports("strided_slice")
def strided_slice(ctx: ExportContext, op: Operator) -> None:
    """Paddle's ends are clamped int32s; a negative step's -2**31 is ONNX's "past the start". The
    bounds computed at run time are ONNX's as they are (int64)."""
    ends = [e if e > -2 ** 31 else -2 ** 63 for e in op.attr("ends")]
    starts_t, ends_t, strides_t = (one_input(op, s) for s in ("StartsTensor", "EndsTensor", "StridesTensor"))
    _slice(ctx, op, ctx.int64(starts_t) if starts_t else ctx.ints(op.attr("starts")),
           ctx.int64(ends_t) if ends_t else ctx.ints(ends),
           ctx.int64(strides_t) if strides_t else ctx.ints(op.attr("strides")))


@exports("pad")
def pad(ctx: ExportContext, op: Operator) -> None:
    """Paddle's [before0, after0, before1, ...] as ONNX's [before0, before1, ..., after0, ...]
    (a Paddings tensor reordered by Reshape and Transpose)."""
    x, out = op.input("X")[0], op.output("Out")[0]
    given = one_input(op, "Paddings")
    if given:
        pairs = ctx.node("Reshape", [ctx.int64(given), ctx.ints([-1, 2])])
        pads = ctx.node("Reshape", [ctx.node("Transpose", [pairs], perm=[1, 0]), ctx.ints([-1])])
    else:
        paddings = list(op.attr("paddings"))
        pads = ctx.ints(paddings[0::2] + paddings[1::2])
    value = one_input(op, "ValueTensor")
    if op.attr("mode") != "constant":
        ctx.node("Pad", [x, pads], [out], mode=op.attr("mode"))
        return
    ctx.node("Pad", [x, pads, ctx.node("Reshape", [value, ctx.ints([])]) if value else
                     ctx.scalar(float(op.attr("pad_value")), x)], [out], mode="constant")


@exports("fill_constant")
def fill_constant(ctx: ExportContext, op: Operator) -> None:
    """A constant of the attr's shape, or ConstantOfShape of the ShapeTensor."""
    refuse_lists(ctx, op, "ShapeTensorList")
    if one_input(op, "ValueTensor") or op.attr("str_value"):
        ctx.fail("a value from ValueTensor or str_value is not supported")
    dtype, out = DType(op.attr("dtype")).numpy, op.output("Out")[0]
    shape_tensor = one_input(op, "ShapeTensor")
    if shape_tensor:
        value = numpy_helper.from_array(np.full([1], op.attr("value"), dtype))
        ctx.node("ConstantOfShape", [ctx.int64(shape_tensor)], [out], value=value)
        return
    ctx.node("Identity", [ctx.const(np.full(list(op.attr("shape")), op.attr("value"), dtype))], [out])


@exports("scale")
def scale(ctx: ExportContext, op: Operator) -> None:
    """scale * X + bias, or scale * (X + bias) without bias_after_scale."""
    x, out = op.input("X")[0], op.output("Out")[0]
    factor = one_input(op, "ScaleTensor") or ctx.scalar(float(op.attr("scale")), x)
    bias = float(op.attr("bias"))
    if not bias:
        ctx.node("Mul", [x, factor], [out])
    elif op.attr("bias_after_scale"):
        ctx.node("Add", [ctx.node("Mul", [x, factor]), ctx.scalar(bias, x)], [out])
    else:
        ctx.node("Mul", [ctx.node("Add", [x, ctx.scalar(bias, x)]), factor], [out])


@exports("pow")
def pow_(ctx: ExportContext, op: Operator) -> None:
    x = op.input("X")[0]
    factor = one_input(op, "FactorTensor") or ctx.scalar(float(op.attr("factor")), x)
    ctx.node("Pow", [x, factor], [op.output("Out")[0]])


@exports("sum")
def sum_(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Sum", list(op.input("X")), [op.output("Out")[0]])


@exports("clip")
def clip(ctx: ExportContext, op: Operator) -> None:
    """Clip with its bounds as 0-D inputs of X's dtype: the Min/Max tensors where given, else the attrs."""
    x = op.input("X")[0]
    bounds = [ctx.node("Reshape", [ctx.cast(op.input(slot)[0], ctx.dtype(x)), ctx.ints([])]) if op.input(slot)
              else ctx.scalar(op.attr(attr), x) for slot, attr in (("Min", "min"), ("Max", "max"))]
    ctx.node("Clip", [x, *bounds], [op.output("Out")[0]])


@exports("mean")
def mean(ctx: ExportContext, op: Operator) -> None:
    """The mean of every element, shaped as the op's Out."""
    out = op.output("Out")[0]
    total = ctx.node("ReduceMean", [op.input("X")[0]], keepdims=0)
    ctx.node("Reshape", [total, ctx.ints(ctx.shape(out))], [out])


@exports("dropout")
def dropout(ctx: ExportContext, op: Operator) -> None:
    """Inference dropout: the identity, or X * (1 - p) for ``downgrade_in_infer``; its Mask (where
    the op has one) keeps everything: ones."""
    x, out = op.input("X")[0], op.output("Out")[0]
    if op.attr("dropout_implementation") == "downgrade_in_infer":
        ctx.node("Mul", [x, ctx.scalar(1.0 - float(op.attr("dropout_prob")), x)], [out])
    else:
        ctx.node("Identity", [x], [out])
    for mask in op.output("Mask"):
        one = numpy_helper.from_array(np.ones(1, ctx.dtype(mask).numpy), "value")
        ctx.node("ConstantOfShape", [ctx.node("Shape", [x])], [mask], value=one)


@exports("fill_any_like")
def fill_any_like(ctx: ExportContext, op: Operator) -> None:
    out = op.output("Out")[0]
    value = np.asarray([op.attr("value")], dtype=ctx.dtype(out).numpy)
    ctx.node("ConstantOfShape", [ctx.node("Shape", [op.input("X")[0]])], [out],
             value=numpy_helper.from_array(value, "value"))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
"""pad3d's modes -> Pad's (wrap from opset 19)."""


@exports("pad3d")
def pad3d(ctx: ExportContext, op: Operator) -> None:
    """Pad: pad3d's [left, right, top, bottom, front, back] as per-dim begins and ends."""
    x, out = op.input("X")[0], op.output("Out")[0]
    if op.input("Paddings"):
        ctx.fail("paddings computed at run time are not supported")
    mode = _PAD_MODES[op.attr("mode")]
    if mode == "wrap" and ctx.opset < 19:
        ctx.fail(f"circular padding needs opset 19 (asked for {ctx.opset})")
    left, right, top, bottom, front, back = op.attr("paddings")
    spatial = (1, 2, 3) if op.attr("data_format") == "NDHWC" else (2, 3, 4)
    pairs = dict(zip(spatial, ((front, back), (top, bottom), (left, right))))
    begins, ends = zip(*(pairs.get(d, (0, 0)) for d in range(5)))
    inputs = [x, ctx.ints([*begins, *ends])]
    if mode == "constant":
        inputs.append(ctx.scalar(op.attr("value"), x))
    ctx.node("Pad", inputs, [out], mode=mode)
