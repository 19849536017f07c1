"""Converters of ONNX's tensor ops: Concat, Split, Reshape, Flatten, Transpose, Squeeze,
Unsqueeze, Slice, Pad, Dropout, and the run-time forms of Shape and ConstantOfShape (their
static forms are folded at import).

Ops whose axes, pads or split sizes are inputs (from opset 10, 11, 13 or 18 on) need those inputs
to be constants, or computable from initializers and static shapes. A Reshape's shape and a Slice's
starts and ends may be computed at run time (from a ``Shape``): they become the ops' tensor inputs,
whose values the executor computes when it prepares the program for the fed shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, helper

from ...ir.dtypes import DType
from .context import GraphContext
from .registry import converts

__all__: list[str] = []


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _axes(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], from_opset: int, index: int = 1) -> list[int] | None:
    """An op's ``axes``: the attr before ``from_opset``, the constant input ``index`` after."""
    if ctx.opset < from_opset:
        return list(attrs["axes"]) if "axes" in attrs else None
    value = ctx.optional_const(node, index, "axes")
    return None if value is None else _ints(value)


@converts("Concat", makes="concat")
def concat(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("concat", {"X": list(node.input)}, {"Out": node.output[0]}, {"axis": attrs["axis"]})


@converts("Split", makes="split")
def split(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Sizes from the attr (before opset 13) or the input: a constant, or computed at run time (one
    one-value slice of it per output: split's SectionsTensorList)."""
    x, outs = node.input[0], list(node.output)
    axis = attrs.get("axis", 0)
    if ctx.opset >= 13 and len(node.input) > 1 and node.input[1] and not ctx.is_const(node.input[1]):
        sections = [ctx.temp(f"{node.input[1]}.section") for _ in outs]
        for i, section in enumerate(sections):
            ctx.emit("slice", {"Input": node.input[1]}, {"Out": section}, {"axes": [0], "starts": [i], "ends": [i + 1]})
        ctx.emit("split", {"X": x, "SectionsTensorList": sections}, {"Out": outs}, {"axis": axis})
        return
    sizes = (_ints(ctx.const(node.input[1], "split")) if len(node.input) > 1 and node.input[1] else None) \
        if ctx.opset >= 13 else attrs.get("split")
    dim = ctx.shape(x)[ctx.axis(axis, len(ctx.shape(x)))]
    if sizes is None and "num_outputs" in attrs and dim >= 0:  # an unknown dim is split evenly
        chunk = -(-dim // attrs["num_outputs"])
        sizes = [min(chunk, dim - i * chunk) for i in range(attrs["num_outputs"])]
    split_attrs = {"axis": axis, "sections": list(sizes)} if sizes else {"axis": axis, "num": len(outs)}
    ctx.emit("split", {"X": x}, {"Out": outs}, split_attrs)


@converts("BitCast", makes="bitcast")
def bit_cast(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    target = DType.from_any(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    ctx.emit("bitcast", {"X": node.input[0]}, {"Out": node.output[0]}, {"out_dtype": int(target)})


@converts("Reshape", makes="reshape2")
def reshape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x = node.input[0]
    if ctx.opset >= 5 and not ctx.is_const(node.input[1]):
        # allowzero only changes what a 0 means, and a shape computed from real dims holds none
        # (empty tensors are not supported)
        ctx.emit("reshape2", {"X": x, "Shape": node.input[1]}, {"Out": node.output[0]})
        return
    shape = list(attrs["shape"]) if ctx.opset < 5 else _ints(ctx.const(node.input[1], "shape"))
    if attrs.get("allowzero", 0) and 0 in shape:
        ctx.fail("Reshape with allowzero=1 and a 0 in shape (an empty tensor) is not supported")
    ctx.emit("reshape2", {"X": x}, {"Out": node.output[0]}, {"shape": shape})


@converts("Flatten", makes="flatten_contiguous_range")
def flatten(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """[d0..dn) -> [d0 * .. * d(axis-1), d(axis) * .. * d(n-1)]."""
    x, out = node.input[0], node.output[0]
    rank = len(ctx.shape(x))
    axis = attrs.get("axis", 1)
    axis = ctx.axis(axis, rank + 1) if axis >= 0 else ctx.axis(axis, rank)
    if axis == 0 or axis == rank:
        ctx.emit("reshape2", {"X": x}, {"Out": out}, {"shape": [1, -1] if axis == 0 else [-1, 1]})
        return
    if axis == 1:
        ctx.emit("flatten_contiguous_range", {"X": x}, {"Out": out}, {"start_axis": 1, "stop_axis": -1})
        return
    tail = ctx.temp(out)
    ctx.emit("flatten_contiguous_range", {"X": x}, {"Out": tail}, {"start_axis": axis, "stop_axis": -1})
    ctx.emit("flatten_contiguous_range", {"X": tail}, {"Out": out}, {"start_axis": 0, "stop_axis": axis - 1})


@converts("Transpose", makes="transpose2")
def transpose(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    rank = len(ctx.shape(node.input[0]))
    perm = list(attrs.get("perm", range(rank - 1, -1, -1)))
    ctx.emit("transpose2", {"X": node.input[0]}, {"Out": node.output[0]}, {"axis": perm})


@converts("Squeeze", makes="squeeze2")
def squeeze(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Axes from the attr, a constant input, or computed at run time (squeeze2's AxesTensor)."""
    if ctx.opset >= 13 and len(node.input) > 1 and node.input[1] and not ctx.is_const(node.input[1]):
        ctx.emit("squeeze2", {"X": node.input[0], "AxesTensor": node.input[1]}, {"Out": node.output[0]})
        return
    shape = ctx.shape(node.input[0])
    axes = [ctx.axis(a, len(shape), "axes entry") for a in _axes(ctx, node, attrs, 13) or []]
    wider = [a for a in axes if shape[a] not in (1, -1)]
    if wider:
        ctx.fail(f"cannot squeeze axes {wider} of shape {list(shape)}: only dims of size 1 can be removed")
    ctx.emit("squeeze2", {"X": node.input[0]}, {"Out": node.output[0]}, {"axes": axes})


@converts("Unsqueeze", makes="unsqueeze2")
def unsqueeze(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """ONNX's axes count in the output's rank; inserted in ascending order, one at a time (as
    Paddle does), they land at the same places. Axes computed at run time are put so (counted
    from 0, then sorted) before unsqueeze2 reads them as its AxesTensor."""
    if ctx.opset >= 13 and not ctx.is_const(node.input[1]):
        _runtime_unsqueeze(ctx, node)
        return
    axes = _axes(ctx, node, attrs, 13)
    if not axes:
        ctx.fail("Unsqueeze needs axes")
    rank = len(ctx.shape(node.input[0])) + len(axes)
    normalized = sorted(ctx.axis(a, rank, "axes entry") for a in axes)
    if len(set(normalized)) != len(normalized):
        ctx.fail(f"axes {axes} repeat an axis")
    ctx.emit("unsqueeze2", {"X": node.input[0]}, {"Out": node.output[0]}, {"axes": normalized})


def _runtime_unsqueeze(ctx: GraphContext, node: NodeProto) -> None:
    axes = node.input[1]
    (count,) = ctx.static_shape(axes, "Unsqueeze with run-time axes")
    rank = len(ctx.shape(node.input[0])) + count
    counted, ordered = ctx.temp(f"{axes}.counted"), ctx.temp(f"{axes}.sorted")
    ctx.emit("elementwise_mod", {"X": axes, "Y": ctx.add_const(ctx.temp("rank"), np.array([rank], ctx.info(axes).dtype.numpy))},
             {"Out": counted}, {"axis": -1})
    ctx.emit("top_k_v2", {"X": counted}, {"Out": ordered, "Indices": ctx.temp(f"{axes}.order")},
             {"k": count, "axis": 0, "largest": False, "sorted": True})
    ctx.emit("unsqueeze2", {"X": node.input[0], "AxesTensor": ordered}, {"Out": node.output[0]})


@converts("Slice", makes=("slice", "strided_slice"))
def slice_(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x = node.input[0]
    rank = len(ctx.shape(x))
    runtime = [n for n in node.input[1:] if n and not ctx.is_const(n)] if ctx.opset >= 10 else []
    if any(n in node.input[3:] for n in runtime):
        _every_dim_slice(ctx, node, rank)
        return
    if runtime:
        _runtime_slice(ctx, node, rank)
        return
    if ctx.opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = list(attrs.get("axes", range(len(starts)))), [1] * len(starts)
    else:
        starts, ends = _ints(ctx.const(node.input[1], "starts")), _ints(ctx.const(node.input[2], "ends"))
        given_axes = ctx.optional_const(node, 3, "axes")
        given_steps = ctx.optional_const(node, 4, "steps")
        axes = _ints(given_axes) if given_axes is not None else list(range(len(starts)))
        steps = _ints(given_steps) if given_steps is not None else [1] * len(starts)
    limit = np.iinfo(np.int32)
    starts, ends = ([min(max(v, limit.min), limit.max) for v in values] for values in (starts, ends))
    axes = [ctx.axis(a, rank, "axes entry") for a in axes]
    if len(set(axes)) != len(axes) or not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have one entry per axis, "
                 f"each axis once")
    if 0 in steps:
        ctx.fail(f"steps {steps} hold a 0")
    if all(s == 1 for s in steps):
        ctx.emit("slice", {"Input": x}, {"Out": node.output[0]}, {"axes": axes, "starts": starts, "ends": ends})
    else:
        ctx.emit("strided_slice", {"Input": x}, {"Out": node.output[0]},
                 {"axes": axes, "starts": starts, "ends": ends, "strides": steps})


def _every_dim_slice(ctx: GraphContext, node: NodeProto, rank: int) -> None:
    """A Slice whose axes or steps are computed at run time: starts, ends and steps put into
    vectors over every dim (0, the int64 maximum and 1 elsewhere) at the axes counted from 0, a
    ``strided_slice`` of every dim reading them."""
    x, starts = node.input[0], node.input[1]
    (count,) = ctx.static_shape(starts, "Slice with run-time axes")
    given = [node.input[i] if i < len(node.input) and node.input[i] else "" for i in (3, 4)]
    axes = _as_int64(ctx, given[0]) if given[0] else ctx.add_const(ctx.temp("axes"), np.arange(count, dtype=np.int64))
    counted = ctx.temp(f"{node.output[0]}.axes")
    ctx.emit("elementwise_mod", {"X": axes, "Y": ctx.add_const(ctx.temp("rank"), np.array([rank], np.int64))},
             {"Out": counted}, {"axis": -1})
    steps = given[1] or ctx.add_const(ctx.temp("steps"), np.ones(count, np.int64))
    vectors = {}
    for slot, values, default in (("StartsTensor", starts, 0), ("EndsTensor", node.input[2], np.iinfo(np.int64).max),
                                  ("StridesTensor", steps, 1)):
        vectors[slot] = ctx.temp(f"{node.output[0]}.{slot}")
        ctx.emit("put_along_axis", {"Input": ctx.add_const(ctx.temp("every"), np.full(rank, default, np.int64)),
                                    "Index": counted, "Value": _as_int64(ctx, values)},
                 {"Result": vectors[slot]}, {"Axis": 0, "Reduce": "assign"})
    ctx.emit("strided_slice", {"Input": x, **vectors}, {"Out": node.output[0]},
             {"axes": list(range(rank)), "starts": [0] * rank, "ends": [np.iinfo(np.int32).max] * rank,
              "strides": [1] * rank})


def _as_int64(ctx: GraphContext, name: str) -> str:
    if ctx.info(name).dtype is DType.int64:
        return name
    cast = ctx.temp(f"{name}.int64")
    ctx.emit("cast", {"X": name}, {"Out": cast}, {"in_dtype": int(ctx.info(name).dtype), "out_dtype": int(DType.int64)})
    return cast


def _runtime_slice(ctx: GraphContext, node: NodeProto, rank: int) -> None:
    """A Slice whose starts or ends are computed at run time: ``slice`` reading them as tensors
    (axes and steps must still be constants, and the steps 1)."""
    count = ctx.static_shape(node.input[1], "Slice with run-time starts")
    given_axes, given_steps = ctx.optional_const(node, 3, "axes"), ctx.optional_const(node, 4, "steps")
    axes = [ctx.axis(a, rank, "axes entry") for a in (_ints(given_axes) if given_axes is not None else range(count[0]))]
    if given_steps is not None and any(s != 1 for s in _ints(given_steps)):
        ctx.fail(f"steps {_ints(given_steps)} with starts or ends computed at run time are not supported (only 1s)")
    ctx.emit("slice", {"Input": node.input[0], "StartsTensor": node.input[1], "EndsTensor": node.input[2]},
             {"Out": node.output[0]}, {"axes": axes})


def _runtime_pad(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], rank: int) -> None:
    """A constant Pad whose pads are computed at run time: ONNX's [begins..., ends...] over
    ``axes`` gathered into ``pad``'s [before, after] per dim (a 0 for the axes not listed),
    which becomes its Paddings tensor; a value computed at run time becomes its ValueTensor; the
    reflect, edge and wrap modes are pad's of their names."""
    mode = attrs.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("constant", "reflect", "edge", "wrap"):
        ctx.fail(f"mode {mode!r} is none of constant, reflect, edge and wrap")
    value_input = node.input[2] if len(node.input) > 2 and node.input[2] else ""
    given = ctx.consts[value_input] if value_input and ctx.is_const(value_input) else None
    axes_input = node.input[3] if len(node.input) > 3 and node.input[3] else ""
    if axes_input and not ctx.is_const(axes_input):
        paddings = _paddings_at_axes(ctx, node.input[1], axes_input, rank, node.output[0])
    else:
        paddings = _paddings_of_pads(ctx, node, attrs, rank)
    value = float(given.reshape(-1)[0]) if given is not None and given.size else 0.0
    computed = {"ValueTensor": value_input} if value_input and given is None else {}
    ctx.emit("pad", {"X": node.input[0], "Paddings": paddings, **computed}, {"Out": node.output[0]},
             {"pad_value": value, "mode": mode})


def _paddings_of_pads(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], rank: int) -> str:
    """``pad``'s [before, after] per dim of ONNX's run-time pads over constant axes (a gather)."""
    axes = _axes(ctx, node, attrs, 18, index=3)
    axes = [ctx.axis(a, rank, "axes entry") for a in axes] if axes is not None else list(range(rank))
    zero = 2 * len(axes)
    order = [zero] * (2 * rank)
    for i, a in enumerate(axes):
        order[2 * a], order[2 * a + 1] = i, i + len(axes)
    widened, paddings = ctx.temp(f"{node.output[0]}.pads"), ctx.temp(f"{node.output[0]}.paddings")
    zeros = ctx.add_const(ctx.temp("zero"), np.zeros(1, dtype=ctx.info(node.input[1]).dtype.numpy))
    ctx.emit("concat", {"X": [node.input[1], zeros]}, {"Out": widened}, {"axis": 0})
    ctx.emit("gather", {"X": widened, "Index": ctx.add_const(ctx.temp("order"), np.array(order, dtype=np.int64))},
             {"Out": paddings}, {"axis": 0})
    return paddings


def _paddings_at_axes(ctx: GraphContext, pads: str, axes: str, rank: int, hint: str) -> str:
    """``pad``'s [before, after] per dim of ONNX's pads over axes computed at run time: the begins
    and the ends put at the axes (counted from 0) of vectors of zeros, then interleaved."""
    (count,) = ctx.static_shape(axes, "Pad with run-time axes")
    as_int, counted = _as_int64(ctx, pads), ctx.temp(f"{hint}.axes")
    ctx.emit("elementwise_mod", {"X": _as_int64(ctx, axes), "Y": ctx.add_const(ctx.temp("rank"), np.array([rank], np.int64))},
             {"Out": counted}, {"axis": -1})
    columns = []
    for start in (0, count):
        part, full, column = (ctx.temp(f"{hint}.{what}") for what in ("part", "full", "column"))
        ctx.emit("slice", {"Input": as_int}, {"Out": part}, {"axes": [0], "starts": [start], "ends": [start + count]})
        ctx.emit("put_along_axis", {"Input": ctx.add_const(ctx.temp("zeros"), np.zeros(rank, np.int64)),
                                    "Index": counted, "Value": part}, {"Result": full}, {"Axis": 0, "Reduce": "assign"})
        ctx.emit("unsqueeze2", {"X": full}, {"Out": column}, {"axes": [1]})
        columns.append(column)
    pairs, paddings = ctx.temp(f"{hint}.pairs"), ctx.temp(f"{hint}.paddings")
    ctx.emit("concat", {"X": columns}, {"Out": pairs}, {"axis": 1})
    ctx.emit("reshape2", {"X": pairs}, {"Out": paddings}, {"shape": [-1]})
    return paddings


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@converts("Pad", makes=("pad", "pad3d"))
def pad(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Constant padding of any rank becomes ``pad``; reflect/edge/wrap padding of the last two
    dims of a 4-D tensor becomes ``pad3d`` on a unit depth."""
    x, out = node.input[0], node.output[0]
    rank = len(ctx.shape(x))
    mode = attrs.get("mode", "constant")
    computed = [name for name in node.input[1:4] if name and not ctx.is_const(name)]
    if ctx.opset >= 11 and computed:
        _runtime_pad(ctx, node, attrs, rank)
        return
    if ctx.opset < 11:
        pads, value = list(attrs.get("pads", attrs.get("paddings", []))), float(attrs.get("value", 0.0))
    else:
        pads = _ints(ctx.const(node.input[1], "pads"))
        given = ctx.optional_const(node, 2, "constant_value")
        value = float(given.reshape(-1)[0]) if given is not None and given.size else 0.0
    axes = _axes(ctx, node, attrs, 18, index=3)
    per_axis = [(0, 0)] * rank
    axes = [ctx.axis(a, rank, "axes entry") for a in axes] if axes is not None else list(range(rank))
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads {pads} must hold two values per padded axis ({len(axes)} axes)")
    for i, a in enumerate(axes):
        per_axis[a] = (pads[i], pads[i + len(axes)])
    if any(p < 0 for pair in per_axis for p in pair):
        ctx.fail(f"negative pads {pads} (cropping) are not supported")
    if mode == "constant":
        ctx.emit("pad", {"X": x}, {"Out": out}, {"paddings": [p for pair in per_axis for p in pair], "pad_value": value})
        return
    if mode not in _PAD_MODES or rank != 4 or any(p for pair in per_axis[:2] for p in pair):
        ctx.fail(f"{mode} padding is supported on the last two dims of a 4-D tensor, got pads {pads}")
    deep, padded = ctx.temp(out), ctx.temp(out)
    ctx.emit("unsqueeze2", {"X": x}, {"Out": deep}, {"axes": [2]})
    (top, bottom), (left, right) = per_axis[2], per_axis[3]
    ctx.emit("pad3d", {"X": deep}, {"Out": padded},
             {"paddings": [left, right, top, bottom, 0, 0], "mode": _PAD_MODES[mode]})
    ctx.emit("squeeze2", {"X": padded}, {"Out": out}, {"axes": [2]})


@converts("Shape", makes="shape")
def shape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The run-time shape (some dims unknown; a static one is folded), or a part of it."""
    out, whole = node.output[0], ctx.runtime_shape(node.input[0])
    rank = len(ctx.shape(node.input[0]))
    start, end = attrs.get("start", 0), min(attrs.get("end", rank), rank)
    if (start, end) == (0, rank):
        ctx.emit("assign", {"X": whole}, {"Out": out})
    else:
        ctx.emit("slice", {"Input": whole}, {"Out": out}, {"axes": [0], "starts": [start], "ends": [end]})


@converts("ConstantOfShape", makes="fill_constant")
def constant_of_shape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """A run-time shape (a static one is folded)."""
    value = attrs.get("value", np.zeros(1, np.float32))
    ctx.emit("fill_constant", {"ShapeTensor": node.input[0]}, {"Out": node.output[0]},
             {"dtype": int(DType.from_any(value.dtype)), "value": float(value.reshape(-1)[0])})


@converts("Dropout", makes="dropout")
def dropout(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Inference dropout is the identity; its mask, when read, is all true."""
    if len(node.input) > 2 and node.input[2] and bool(ctx.const(node.input[2], "training_mode")):
        ctx.fail("Dropout in training mode is not supported")
    outputs = {"Out": node.output[0]}
    mask = ctx.temp(f"{node.output[0]}.mask") if ctx.is_used(node, 1) else None
    if mask is not None:
        outputs["Mask"] = mask
    ctx.emit("dropout", {"X": node.input[0]}, outputs,
             {"is_test": True, "dropout_implementation": "upscale_in_train",
              "dropout_prob": float(attrs.get("ratio", 0.5))})
    if mask is not None:
        ctx.emit("cast", {"X": mask}, {"Out": node.output[1]},
                 {"in_dtype": int(DType.uint8), "out_dtype": int(DType.bool)})
