"""Converters of ONNX's selection and indexing ops: Where, Expand, Tile, CumSum, CumProd, Trilu, Range,
ArgMax / ArgMin, TopK, NonZero, Compress, Unique, ReverseSequence, Gather, GatherND, GatherElements, ScatterElements / Scatter,
ScatterND, TensorScatter, OneHot, Einsum and Size.

Expand's shape and Tile's repeats may be computed at run time (they become the ops' tensor
inputs), and so may CumSum's and CumProd's axis, Trilu's k and OneHot's depth; TopK's K must be a
constant, or computable from initializers and static shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from ...ir.dtypes import DType
from .context import GraphContext
from .registry import converts

__all__: list[str] = []


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _scalar(ctx: GraphContext, node: NodeProto, index: int, what: str, default: int) -> int:
    value = ctx.optional_const(node, index, what)
    return default if value is None else int(np.asarray(value).reshape(-1)[0])


@converts("Where", makes="where")
def where(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    cond, x, y = node.input
    ctx.emit("where", {"Condition": cond, "X": x, "Y": y}, {"Out": node.output[0]})


@converts("Expand", makes="expand_v2")
def expand(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """ONNX broadcasts both ways (a 1 in shape keeps X's dim): expand_v2 to the broadcast shape,
    -1 where X's dim is unknown and shape says 1."""
    x = node.input[0]
    if not ctx.is_const(node.input[1]):
        ctx.emit("expand_v2", {"X": x, "Shape": node.input[1]}, {"Out": node.output[0]})
        return
    target = _ints(ctx.consts[node.input[1]])
    shape = list(ctx.shape(x))
    rank = max(len(shape), len(target))
    shape, target = [1] * (rank - len(shape)) + shape, [1] * (rank - len(target)) + target
    out = [d if t == 1 else t for d, t in zip(shape, target)]
    ctx.emit("expand_v2", {"X": x}, {"Out": node.output[0]}, {"shape": out})


@converts("Tile", makes="tile")
def tile(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    if not ctx.is_const(node.input[1]):
        ctx.emit("tile", {"X": node.input[0], "RepeatTimes": node.input[1]}, {"Out": node.output[0]})
        return
    repeats = _ints(ctx.const(node.input[1], "repeats"))
    if len(repeats) != len(ctx.shape(node.input[0])) or min(repeats, default=1) < 0:
        ctx.fail(f"repeats {repeats} must hold one count >= 0 per dim of the input")
    if 0 in repeats:
        ctx.fail(f"repeats {repeats} hold a 0 (an empty tensor), which is not supported")
    ctx.emit("tile", {"X": node.input[0]}, {"Out": node.output[0]}, {"repeat_times": repeats})


@converts("CumSum", "CumProd", makes={"CumSum": "cumsum", "CumProd": "cumprod"})
def cumulative(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The axis a constant (an attr) or computed at run time (the AxisTensor)."""
    op_type, axis_attr = ("cumsum", "axis") if node.op_type == "CumSum" else ("cumprod", "dim")
    flags = {"exclusive": bool(attrs.get("exclusive", 0)), "reverse": bool(attrs.get("reverse", 0))}
    x, axis = node.input[0], node.input[1]
    if not ctx.is_const(axis):
        ctx.emit(op_type, {"X": x, "AxisTensor": axis}, {"Out": node.output[0]}, flags)
        return
    value = int(np.asarray(ctx.consts[axis]).reshape(-1)[0])
    ctx.emit(op_type, {"X": x}, {"Out": node.output[0]}, {axis_attr: ctx.axis(value, len(ctx.shape(x))), **flags})


@converts("Trilu", makes="tril_triu")
def trilu(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """k a constant (an attr) or computed at run time (the DiagonalTensor)."""
    lower = not attrs.get("upper", 1)
    if len(node.input) > 1 and node.input[1] and not ctx.is_const(node.input[1]):
        ctx.emit("tril_triu", {"X": node.input[0], "DiagonalTensor": node.input[1]}, {"Out": node.output[0]},
                 {"lower": lower})
        return
    ctx.emit("tril_triu", {"X": node.input[0]}, {"Out": node.output[0]},
             {"diagonal": _scalar(ctx, node, 1, "k", 0), "lower": lower})


@converts("Range", makes="range")
def range_(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    start, limit, delta = node.input
    ctx.emit("range", {"Start": start, "End": limit, "Step": delta}, {"Out": node.output[0]})


@converts("ArgMax", "ArgMin", makes={"ArgMax": "arg_max", "ArgMin": "arg_min"})
def arg(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """select_last_index: the op on X reversed along the axis, the index read back as dim - 1 - i."""
    x, out = node.input[0], node.output[0]
    op_type = "arg_max" if node.op_type == "ArgMax" else "arg_min"
    shape = ctx.shape(x)
    axis = ctx.axis(attrs.get("axis", 0), len(shape))
    arg_attrs = {"axis": axis, "keepdims": bool(attrs.get("keepdims", 1)), "dtype": int(DType.int64)}
    if not attrs.get("select_last_index", 0):
        ctx.emit(op_type, {"X": x}, {"Out": out}, arg_attrs)
        return
    size = ctx.static_shape(x, f"{node.op_type} with select_last_index")[axis]
    flipped, index = ctx.temp(f"{out}.flipped"), ctx.temp(f"{out}.reversed")
    ctx.emit("strided_slice", {"Input": x}, {"Out": flipped},
             {"axes": [axis], "starts": [-1], "ends": [-size - 1], "strides": [-1]})
    ctx.emit(op_type, {"X": flipped}, {"Out": index}, arg_attrs)
    ctx.emit("scale", {"X": index}, {"Out": out}, {"scale": -1.0, "bias": float(size - 1)})


@converts("TopK", makes="top_k_v2")
def top_k(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """K an attr where it is known at import (opset < 10: always), else top_k_v2's K input."""
    inputs, k = {"X": node.input[0]}, attrs.get("k", 1)
    if ctx.opset >= 10 and ctx.is_const(node.input[1]):
        k = int(np.asarray(ctx.const(node.input[1], "K")).reshape(-1)[0])
    elif ctx.opset >= 10:
        inputs["K"] = node.input[1]
    ctx.emit("top_k_v2", inputs, {"Out": node.output[0], "Indices": node.output[1]},
             {"k": k, "axis": attrs.get("axis", -1), "largest": bool(attrs.get("largest", 1)),
              "sorted": bool(attrs.get("sorted", 1))})


@converts("NonZero", makes="where_index")
def non_zero(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """where_index's [count, rank] rows, transposed to ONNX's [rank, count]."""
    rows = ctx.temp(f"{node.output[0]}.rows")
    ctx.emit("where_index", {"Condition": node.input[0]}, {"Out": rows})
    ctx.emit("transpose2", {"X": rows}, {"Out": node.output[0]}, {"axis": [1, 0]})


@converts("GatherND", makes="gather_nd")
def gather_nd(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("gather_nd", {"X": node.input[0], "Index": node.input[1]}, {"Out": node.output[0]},
             {"batch_dims": attrs.get("batch_dims", 0)})


@converts("GatherElements", makes="take_along_axis")
def gather_elements(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("take_along_axis", {"Input": node.input[0], "Index": node.input[1]}, {"Result": node.output[0]},
             {"Axis": attrs.get("axis", 0)})


_REDUCTIONS = {"none": "assign", "add": "add", "mul": "mul", "max": "amax", "min": "amin"}


def _reduction(ctx: GraphContext, attrs: dict[str, Any]) -> str:
    name = attrs.get("reduction", "none")
    if name not in _REDUCTIONS:
        ctx.fail(f"unknown reduction {name!r} (known: {', '.join(_REDUCTIONS)})")
    return _REDUCTIONS[name]


@converts("ScatterElements", "Scatter", makes="put_along_axis")
def scatter_elements(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, index, updates = node.input
    ctx.emit("put_along_axis", {"Input": x, "Index": index, "Value": updates}, {"Result": node.output[0]},
             {"Axis": attrs.get("axis", 0), "Reduce": _reduction(ctx, attrs)})


@converts("ScatterND", makes=("scatter_nd", "scatter_nd_add"))
def scatter_nd(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, index, updates = node.input
    reduce = _reduction(ctx, attrs)
    op_type, op_attrs = ("scatter_nd_add", {}) if reduce == "add" else ("scatter_nd", {"reduce": reduce})
    ctx.emit(op_type, {"X": x, "Index": index, "Updates": updates}, {"Out": node.output[0]}, op_attrs)


@converts("TensorScatter", makes="tensor_scatter")
def tensor_scatter(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    inputs = {slot: name for slot, name in zip(("PastCache", "Update", "WriteIndices"), node.input) if name}
    ctx.emit("tensor_scatter", inputs, {"Out": node.output[0]},
             {"axis": attrs.get("axis", -2), "mode": attrs.get("mode", "linear")})


@converts("OneHot", makes="one_hot_v2")
def one_hot(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """one_hot_v2 of the indices as int64 (negative ones counted from depth, others outside
    [0, depth) giving a row of off values), scaled to (on - off) * hot + off, its new dim moved
    to ``axis``. Depth and values may be computed at run time (one_hot_v2's depth_tensor; the
    scaling then by elementwise ops)."""
    indices, out = node.input[0], node.output[0]
    rank = len(ctx.shape(indices)) + 1
    axis = ctx.axis(attrs.get("axis", -1), rank)
    depth = _depth(ctx, node.input[1], out)
    wrapped = _wrapped_indices(ctx, indices, depth, out)
    hot, scaled = ctx.temp(f"{out}.hot"), out if axis == rank - 1 else ctx.temp(f"{out}.scaled")
    dtype = ctx.info(node.input[2]).dtype
    counted = {"depth": depth} if isinstance(depth, int) else {"depth": -1}
    ctx.emit("one_hot_v2", {"X": wrapped, **({} if isinstance(depth, int) else {"depth_tensor": depth})},
             {"Out": hot}, {**counted, "dtype": int(dtype), "allow_out_of_range": True})
    _scaled_to_values(ctx, hot, node.input[2], scaled)
    if axis != rank - 1:
        perm = [*range(axis), rank - 1, *range(axis, rank - 1)]
        ctx.emit("transpose2", {"X": scaled}, {"Out": out}, {"axis": perm})


def _depth(ctx: GraphContext, name: str, hint: str) -> int | str:
    """OneHot's depth: a constant int, or a one-value int64 tensor computed at run time."""
    if ctx.is_const(name):
        return int(np.asarray(ctx.consts[name]).reshape(-1)[0])
    as_int, flat = ctx.temp(f"{hint}.depth"), ctx.temp(f"{hint}.depth")
    ctx.emit("cast", {"X": name}, {"Out": as_int}, {"in_dtype": int(ctx.info(name).dtype), "out_dtype": int(DType.int64)})
    ctx.emit("reshape2", {"X": as_int}, {"Out": flat}, {"shape": [1]})
    return flat


def _scaled_to_values(ctx: GraphContext, hot: str, values: str, out: str) -> None:
    """(on - off) * hot + off, of the [off, on] in ``values``."""
    if ctx.is_const(values):
        off, on = (v.item() for v in ctx.consts[values].reshape(-1))
        ctx.emit("scale", {"X": hot}, {"Out": out}, {"scale": float(on - off), "bias": float(off)})
        return
    off, on, span, spread = (ctx.temp(f"{out}.{what}") for what in ("off", "on", "span", "spread"))
    for value, start in ((off, 0), (on, 1)):
        ctx.emit("slice", {"Input": values}, {"Out": value}, {"axes": [0], "starts": [start], "ends": [start + 1]})
    ctx.emit("elementwise_sub", {"X": on, "Y": off}, {"Out": span}, {"axis": -1})
    ctx.emit("elementwise_mul", {"X": hot, "Y": span}, {"Out": spread}, {"axis": -1})
    ctx.emit("elementwise_add", {"X": spread, "Y": off}, {"Out": out}, {"axis": -1})


def _wrapped_indices(ctx: GraphContext, indices: str, depth: int | str, hint: str) -> str:
    """``indices`` as int64, a negative one plus depth."""
    if ctx.is_const(indices) and isinstance(depth, int):
        value = ctx.consts[indices].astype(np.int64)
        return ctx.add_const(f"{hint}.indices", np.where(value < 0, value + depth, value))
    as_int = indices
    if ctx.info(indices).dtype is not DType.int64:
        as_int = ctx.temp(f"{hint}.indices")
        ctx.emit("cast", {"X": indices}, {"Out": as_int},
                 {"in_dtype": int(ctx.info(indices).dtype), "out_dtype": int(DType.int64)})
    negative, shifted, wrapped = (ctx.temp(f"{hint}.{what}") for what in ("negative", "shifted", "wrapped"))
    zero = ctx.add_const(f"{hint}.zero", np.zeros((), np.int64))
    ctx.emit("less_than", {"X": as_int, "Y": zero}, {"Out": negative}, {"axis": -1})
    if isinstance(depth, int):
        ctx.emit("scale", {"X": as_int}, {"Out": shifted}, {"bias": float(depth)})
    else:
        ctx.emit("elementwise_add", {"X": as_int, "Y": depth}, {"Out": shifted}, {"axis": -1})
    ctx.emit("where", {"Condition": negative, "X": shifted, "Y": as_int}, {"Out": wrapped})
    return wrapped


@converts("Compress", makes=("where_index", "gather"))
def compress(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The slices of X along axis (of X flattened without one) where the 1-D condition holds: a
    gather of the condition's where_index (a condition shorter than the axis leaves the rest out)."""
    x, condition, out = node.input[0], node.input[1], node.output[0]
    if len(ctx.shape(condition)) != 1:
        ctx.fail(f"condition must be 1-D, has shape {list(ctx.shape(condition))}")
    if "axis" in attrs:
        axis = ctx.axis(attrs["axis"], len(ctx.shape(x)))
    else:
        axis, flat = 0, ctx.temp(f"{out}.flat")
        ctx.emit("reshape2", {"X": x}, {"Out": flat}, {"shape": [-1]})
        x = flat
    rows, index = ctx.temp(f"{out}.rows"), ctx.temp(f"{out}.index")
    ctx.emit("where_index", {"Condition": condition}, {"Out": rows})
    ctx.emit("reshape2", {"X": rows}, {"Out": index}, {"shape": [-1]})
    ctx.emit("gather", {"X": x, "Index": index}, {"Out": out}, {"axis": axis})


@converts("Unique", makes="unique")
def unique(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    outputs = {slot: name for slot, name in zip(("Out", "Indices", "Index", "Counts"), node.output) if name}
    axis = [ctx.axis(attrs["axis"], len(ctx.shape(node.input[0])))] if "axis" in attrs else []
    ctx.emit("unique", {"X": node.input[0]}, outputs, {"axis": axis, "is_sorted": bool(attrs.get("sorted", 1))})


@converts("ReverseSequence", makes="reverse_sequence")
def reverse_sequence(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("reverse_sequence", {"X": node.input[0], "SequenceLength": node.input[1]}, {"Y": node.output[0]},
             {"batch_axis": attrs.get("batch_axis", 1), "time_axis": attrs.get("time_axis", 0)})


@converts("Einsum", makes="einsum")
def einsum(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("einsum", {"Operands": list(node.input)}, {"Out": node.output[0]}, {"equation": attrs["equation"]})


@converts("Size")
def size(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Size of a tensor with static dims folds at import; this says why one with unknown dims cannot."""
    shape = ctx.static_shape(node.input[0], "Size")
    ctx.consts[node.output[0]] = np.array(int(np.prod(shape)), dtype=np.int64)


@converts("Gather", makes=("gather", "gather_nd"))
def gather(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """``gather`` takes 0-D or 1-D indices; N-D indices into dim 0 (embeddings) are ``gather_nd``
    of the indices with a unit dim after them; on other dims they are gathered flat and reshaped to
    ``data.shape[:axis] + indices.shape + data.shape[axis + 1:]``. Constant negative indices
    are wrapped where the dim is known (Paddle's gather takes none); halfway's numpy kernel
    counts the others from the end."""
    x, index, out = node.input[0], node.input[1], node.output[0]
    shape = ctx.shape(x)
    axis = ctx.axis(attrs.get("axis", 0), len(shape))
    if ctx.is_const(index) and shape[axis] >= 0:
        indices = ctx.consts[index]
        outside = indices[(indices < -shape[axis]) | (indices >= shape[axis])]
        if outside.size:
            ctx.fail(f"indices {outside.reshape(-1)[:4].tolist()} are out of range for axis {axis} of size "
                     f"{shape[axis]} (expected {-shape[axis]} to {shape[axis] - 1})")
    if ctx.is_const(index) and (ctx.consts[index] < 0).any() and shape[axis] >= 0:
        index = ctx.add_const(f"{index}.wrapped", ctx.consts[index] % shape[axis])
    index_shape = ctx.shape(index)
    if len(index_shape) <= 1:
        ctx.emit("gather", {"X": x, "Index": index}, {"Out": out}, {"axis": axis})
        return
    if axis == 0:  # an embedding: gather_nd of the indices with a unit dim after them, any shape
        deep = ctx.temp(f"{index}.nd")
        ctx.emit("unsqueeze2", {"X": index}, {"Out": deep}, {"axes": [len(index_shape)]})
        ctx.emit("gather_nd", {"X": x, "Index": deep}, {"Out": out})
        return
    flat, gathered = ctx.temp(f"{index}.flat"), ctx.temp(out)
    ctx.emit("reshape2", {"X": index}, {"Out": flat}, {"shape": [-1]})
    ctx.emit("gather", {"X": x, "Index": flat}, {"Out": gathered}, {"axis": axis})
    dims, index_dims = ctx.dims_of(x), ctx.dims_of(index)
    ctx.reshape_to(gathered, [*dims[:axis], *index_dims, *dims[axis + 1:]], out)
