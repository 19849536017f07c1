"""Exporters of the indexing ops: where, expand_v2 (its Shape tensor an input of Expand), gather,
gather_nd, take_along_axis, range, arg_max/arg_min, top_k_v2, where_index, tril_triu, tile, unique, reverse_sequence, one_hot_v2, the
scatters (scatter_nd, scatter_nd_add, put_along_axis, tensor_scatter: opset 24), cumsum, cumprod, lookup_table_v2 (Gather
with its padding row zeroed) and einsum.
"""

from __future__ import annotations

import numpy as np

from ...ir.operator import Operator
from .context import ExportContext, onnx_type
from .registry import exports
from .tensor import one_input, refuse_lists

__all__: list[str] = []

_REDUCTIONS = {"assign": "none", "add": "add", "mul": "mul", "multiply": "mul", "amin": "min", "min": "min",
               "amax": "max", "max": "max"}
"""halfway's scatter reductions -> ONNX's ``reduction`` attr (min and max from opset 18)."""


def _optional_input(op: Operator, slot: str) -> str | None:
    names = op.input(slot)
    return names[0] if names else None


def _output(ctx: ExportContext, value: str, out: str) -> None:
    """``value`` (int64) as var ``out``'s dtype, written to ``out``."""
    ctx.cast(value, ctx.dtype(out), out)


@exports("arg_max", "arg_min")
def arg(ctx: ExportContext, op: Operator) -> None:
    x, out = op.input("X")[0], op.output("Out")[0]
    axis = op.attr("axis")
    if op.attr("flatten"):
        x, axis = ctx.node("Reshape", [x, ctx.ints([-1])]), 0
    index = ctx.node("ArgMax" if op.type == "arg_max" else "ArgMin", [x], axis=axis,
                     keepdims=int(bool(op.attr("keepdims"))))
    _output(ctx, index, out)


@exports("top_k_v2")
def top_k(ctx: ExportContext, op: Operator) -> None:
    x = op.input("X")[0]
    k_input = _optional_input(op, "K")
    k = ctx.node("Reshape", [ctx.int64(k_input), ctx.ints([1])]) if k_input else ctx.ints([op.attr("k")])
    values, indices = op.output("Out")[0], op.output("Indices")[0]
    raw = ctx.temp(f"{indices}.int64")
    ctx.node("TopK", [x, k], [values, raw], axis=op.attr("axis"), largest=int(op.attr("largest")),
             sorted=int(op.attr("sorted")))
    _output(ctx, raw, indices)


@exports("where_index")
def where_index(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Transpose", [ctx.node("NonZero", [op.input("Condition")[0]])], [op.output("Out")[0]], perm=[1, 0])


@exports("tril_triu")
def tril_triu(ctx: ExportContext, op: Operator) -> None:
    k = _optional_input(op, "DiagonalTensor")
    ctx.node("Trilu", [op.input("X")[0], ctx.int64(k) if k else ctx.const(op.attr("diagonal"), np.int64, "k")],
             [op.output("Out")[0]], upper=int(not op.attr("lower")))


@exports("tile")
def tile(ctx: ExportContext, op: Operator) -> None:
    repeats = _optional_input(op, "RepeatTimes")
    counts = ctx.int64(repeats) if repeats else ctx.ints(op.attr("repeat_times"))
    ctx.node("Tile", [op.input("X")[0], counts], [op.output("Out")[0]])


@exports("unique")
def unique(ctx: ExportContext, op: Operator) -> None:
    outputs = [op.output(slot)[0] if op.output(slot) else "" for slot in ("Out", "Indices", "Index", "Counts")]
    while not outputs[-1]:
        outputs.pop()
    axis = {"axis": op.attr("axis")[0]} if op.attr("axis") else {}
    ctx.node("Unique", [op.input("X")[0]], outputs, sorted=int(op.attr("is_sorted")), **axis)


@exports("reverse_sequence")
def reverse_sequence(ctx: ExportContext, op: Operator) -> None:
    ctx.node("ReverseSequence", [op.input("X")[0], ctx.int64(op.input("SequenceLength")[0])], [op.output("Y")[0]],
             batch_axis=op.attr("batch_axis"), time_axis=op.attr("time_axis"))


@exports("one_hot_v2")
def one_hot(ctx: ExportContext, op: Operator) -> None:
    """ONNX's OneHot counts negative indices from the end as halfway's kernel does and gives a row
    of zeros for the others out of range (which ``allow_out_of_range`` allows). It is written with
    int64 indices and float32 values, the types every runtime has a kernel for, then cast."""
    out = op.output("Out")[0]
    values = ctx.const([0, 1], np.float32, "values")
    depth = _optional_input(op, "depth_tensor")
    hot = ctx.node("OneHot", [ctx.int64(op.input("X")[0]), ctx.int64(depth) if depth else
                              ctx.const(op.attr("depth"), np.int64, "depth"), values], axis=-1)
    ctx.node("Cast", [hot], [out], to=onnx_type(ctx.dtype(out)))


def _scatter_reduction(ctx: ExportContext, reduce: str) -> str | None:
    if reduce not in _REDUCTIONS:
        ctx.fail(f"reduction {reduce!r} has no ONNX form")
    reduction = _REDUCTIONS[reduce]
    if reduction in ("min", "max") and ctx.opset < 18:
        ctx.fail(f"reduction {reduce!r} needs opset 18 (asked for {ctx.opset})")
    if reduction != "none" and ctx.opset < 16:
        ctx.fail(f"reduction {reduce!r} needs opset 16 (asked for {ctx.opset})")
    return None if reduction == "none" else reduction


@exports("scatter_nd", "scatter_nd_add")
def scatter_nd(ctx: ExportContext, op: Operator) -> None:
    reduce = "add" if op.type == "scatter_nd_add" else op.attr("reduce")
    ctx.node("ScatterND", [op.input("X")[0], ctx.int64(op.input("Index")[0]), op.input("Updates")[0]],
             [op.output("Out")[0]], reduction=_scatter_reduction(ctx, reduce))


@exports("tensor_scatter")
def tensor_scatter(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 24:
        ctx.fail(f"TensorScatter needs opset 24 (asked for {ctx.opset})")
    indices = [ctx.int64(op.input("WriteIndices")[0])] if op.input("WriteIndices") else []
    ctx.node("TensorScatter", [op.input("PastCache")[0], op.input("Update")[0], *indices], [op.output("Out")[0]],
             axis=op.attr("axis"), mode=op.attr("mode"))


@exports("put_along_axis")
def put_along_axis(ctx: ExportContext, op: Operator) -> None:
    """ScatterElements; Value broadcast to Index's shape first where it has another."""
    index, value = op.input("Index")[0], op.input("Value")[0]
    if ctx.shape(value) != ctx.shape(index) or -1 in ctx.shape(index):
        value = ctx.node("Expand", [value, ctx.node("Shape", [index])])
    ctx.node("ScatterElements", [op.input("Input")[0], ctx.int64(index), value], [op.output("Result")[0]],
             axis=op.attr("Axis"), reduction=_scatter_reduction(ctx, op.attr("Reduce")))


@exports("cumprod")
def cumprod(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 26:
        ctx.fail(f"CumProd needs opset 26 (asked for {ctx.opset})")
    ctx.node("CumProd", [op.input("X")[0], _axis_input(ctx, op, "dim")], [op.output("Out")[0]],
             exclusive=int(op.attr("exclusive")), reverse=int(op.attr("reverse")))


@exports("lookup_table_v2")
def lookup_table_v2(ctx: ExportContext, op: Operator) -> None:
    """Gather of W's rows; rows looked up at ``padding_idx`` (counted from the end when negative)
    are zeros."""
    w, ids, out = op.input("W")[0], op.input("Ids")[0], op.output("Out")[0]
    padding = op.attr("padding_idx")
    if padding == -1:
        ctx.node("Gather", [w, ids], [out], axis=0)
        return
    rows = ctx.shape(w)[0]
    if padding < 0 and rows < 0:
        ctx.fail(f"padding_idx {padding} needs a known row count of {w!r}")
    padding = padding + rows if padding < 0 else padding
    gathered = ctx.node("Gather", [w, ids], axis=0)
    padded = ctx.node("Equal", [ctx.int64(ids), ctx.const(padding, np.int64, "padding_idx")])
    mask = ctx.node("Unsqueeze", [padded, ctx.ints([-1])])
    ctx.node("Where", [mask, ctx.scalar(0, w), gathered], [out])


@exports("einsum")
def einsum(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Einsum", list(op.input("Operands")), [op.output("Out")[0]], equation=op.attr("equation"))


@exports("expand_v2")
def expand_v2(ctx: ExportContext, op: Operator) -> None:
    """Paddle's -1 (keep the dim) is ONNX's 1 under its broadcasting."""
    refuse_lists(ctx, op, "expand_shapes_tensor")
    shape = one_input(op, "Shape")
    target = ctx.int64(shape) if shape else ctx.ints([1 if d == -1 else d for d in op.attr("shape")])
    ctx.node("Expand", [op.input("X")[0], target], [op.output("Out")[0]])


@exports("gather")
def gather(ctx: ExportContext, op: Operator) -> None:
    if one_input(op, "Axis"):
        ctx.fail("a run-time axis (Axis tensor) is not supported")
    ctx.node("Gather", [op.input("X")[0], op.input("Index")[0]], [op.output("Out")[0]], axis=op.attr("axis"))


@exports("gather_nd")
def gather_nd(ctx: ExportContext, op: Operator) -> None:
    batch = {"batch_dims": op.attr("batch_dims")} if op.attr("batch_dims") else {}
    ctx.node("GatherND", [op.input("X")[0], ctx.int64(op.input("Index")[0])], [op.output("Out")[0]], **batch)


@exports("take_along_axis")
def take_along_axis(ctx: ExportContext, op: Operator) -> None:
    ctx.node("GatherElements", [op.input("Input")[0], op.input("Index")[0]], [op.output("Result")[0]],
             axis=op.attr("Axis"))


@exports("where")
def where(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Where", [op.input(slot)[0] for slot in ("Condition", "X", "Y")], [op.output("Out")[0]])


@exports("range")
def range_(ctx: ExportContext, op: Operator) -> None:
    """ONNX's Range takes scalars: one-element Start, End and Step are reshaped to 0-D."""
    scalars = [ctx.node("Reshape", [op.input(slot)[0], ctx.ints([])]) if ctx.rank(op.input(slot)[0]) else
               op.input(slot)[0] for slot in ("Start", "End", "Step")]
    ctx.node("Range", scalars, [op.output("Out")[0]])


def _axis_input(ctx: ExportContext, op: Operator, attr: str, value: int | None = None) -> str:
    """CumSum's and CumProd's axis: the op's AxisTensor, else its attr (or ``value``)."""
    tensor = _optional_input(op, "AxisTensor")
    return ctx.int64(tensor) if tensor else ctx.const(op.attr(attr) if value is None else value, np.int64, "axis")


@exports("cumsum")
def cumsum(ctx: ExportContext, op: Operator) -> None:
    x, axis = op.input("X")[0], op.attr("axis")
    if op.attr("flatten"):
        x, axis = ctx.node("Reshape", [x, ctx.ints([-1])]), 0
    ctx.node("CumSum", [x, _axis_input(ctx, op, "axis", axis)], [op.output("Out")[0]], exclusive=int(op.attr("exclusive")),
             reverse=int(op.attr("reverse")))
