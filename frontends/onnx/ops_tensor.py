"""Converters of ONNX's tensor ops: Concat, Split, Reshape, Flatten, Transpose, Squeeze,
Unsqueeze, Slice, Pad, Gather, and the run-time forms of Shape and ConstantOfShape (their
static forms are folded at import).

Ops whose axes, shapes or sizes are inputs (from opset 10, 11, 13 or 18 on) need those inputs to
be constants, or computable from initializers and static shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from halfway.frontends.onnx.context import GraphContext
from halfway.frontends.onnx.registry import converts
from halfway.ir.dtypes import DType

__all__: list[str] = []


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _axes(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], from_opset: int, index: int = 1) -> list[int] | None:
    """An op's ``axes``: the attr before ``from_opset``, the constant input ``index`` after."""
    if ctx.opset < from_opset:
        return list(attrs["axes"]) if "axes" in attrs else None
    value = ctx.optional_const(node, index, "axes")
    return None if value is None else _ints(value)


@converts("Concat")
def concat(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("concat", {"X": list(node.input)}, {"Out": node.output[0]}, {"axis": attrs["axis"]})


@converts("Split")
def split(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, outs = node.input[0], list(node.output)
    axis = attrs.get("axis", 0)
    sizes = (_ints(ctx.const(node.input[1], "split")) if len(node.input) > 1 and node.input[1] else None) \
        if ctx.opset >= 13 else attrs.get("split")
    if sizes is None and "num_outputs" in attrs:
        dim = ctx.static_shape(x, "Split with num_outputs")[ctx.axis(axis, len(ctx.shape(x)))]
        chunk = -(-dim // attrs["num_outputs"])
        sizes = [min(chunk, dim - i * chunk) for i in range(attrs["num_outputs"])]
    split_attrs = {"axis": axis, "sections": list(sizes)} if sizes else {"axis": axis, "num": len(outs)}
    ctx.emit("split", {"X": x}, {"Out": outs}, split_attrs)


@converts("Reshape")
def reshape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x = node.input[0]
    shape = list(attrs["shape"]) if ctx.opset < 5 else _ints(ctx.const(node.input[1], "shape"))
    if attrs.get("allowzero", 0) and 0 in shape:
        ctx.fail("Reshape with allowzero=1 and a 0 in shape (an empty tensor) is not supported")
    ctx.emit("reshape2", {"X": x}, {"Out": node.output[0]}, {"shape": shape})


@converts("Flatten")
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


@converts("Transpose")
def transpose(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    rank = len(ctx.shape(node.input[0]))
    perm = list(attrs.get("perm", range(rank - 1, -1, -1)))
    ctx.emit("transpose2", {"X": node.input[0]}, {"Out": node.output[0]}, {"axis": perm})


@converts("Squeeze")
def squeeze(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    shape = ctx.shape(node.input[0])
    axes = [ctx.axis(a, len(shape), "axes entry") for a in _axes(ctx, node, attrs, 13) or []]
    wider = [a for a in axes if shape[a] not in (1, -1)]
    if wider:
        ctx.fail(f"cannot squeeze axes {wider} of shape {list(shape)}: only dims of size 1 can be removed")
    ctx.emit("squeeze2", {"X": node.input[0]}, {"Out": node.output[0]}, {"axes": axes})


@converts("Unsqueeze")
def unsqueeze(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """ONNX's axes count in the output's rank; inserted in ascending order, one at a time (as
    Paddle does), they land at the same places."""
    axes = _axes(ctx, node, attrs, 13)
    if not axes:
        ctx.fail("Unsqueeze needs axes")
    rank = len(ctx.shape(node.input[0])) + len(axes)
    normalized = sorted(ctx.axis(a, rank, "axes entry") for a in axes)
    if len(set(normalized)) != len(normalized):
        ctx.fail(f"axes {axes} repeat an axis")
    ctx.emit("unsqueeze2", {"X": node.input[0]}, {"Out": node.output[0]}, {"axes": normalized})


@converts("Slice")
def slice_(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x = node.input[0]
    rank = len(ctx.shape(x))
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


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@converts("Pad")
def pad(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Constant padding of any rank becomes ``pad``; reflect/edge/wrap padding of the last two
    dims of a 4-D tensor becomes ``pad3d`` on a unit depth."""
    x, out = node.input[0], node.output[0]
    rank = len(ctx.shape(x))
    mode = attrs.get("mode", "constant")
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


@converts("Gather")
def gather(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """``gather`` takes 0-D or 1-D indices; N-D indices are gathered flat and reshaped to
    ``data.shape[:axis] + indices.shape + data.shape[axis + 1:]``. Constant negative indices
    are wrapped (``gather`` reads them as they are)."""
    x, index, out = node.input[0], node.input[1], node.output[0]
    shape = ctx.shape(x)
    axis = ctx.axis(attrs.get("axis", 0), len(shape))
    if ctx.is_const(index) and shape[axis] >= 0:
        indices = ctx.consts[index]
        outside = indices[(indices < -shape[axis]) | (indices >= shape[axis])]
        if outside.size:
            ctx.fail(f"indices {outside.reshape(-1)[:4].tolist()} are out of range for axis {axis} of size "
                     f"{shape[axis]} (expected {-shape[axis]} to {shape[axis] - 1})")
    if ctx.is_const(index) and (ctx.consts[index] < 0).any():
        index = ctx.add_const(f"{index}.wrapped", ctx.consts[index] % ctx.static_shape(x, "negative indices")[axis])
    index_shape = ctx.shape(index)
    if len(index_shape) <= 1:
        ctx.emit("gather", {"X": x, "Index": index}, {"Out": out}, {"axis": axis})
        return
    flat, gathered = ctx.temp(f"{index}.flat"), ctx.temp(out)
    ctx.emit("reshape2", {"X": index}, {"Out": flat}, {"shape": [-1]})
    ctx.emit("gather", {"X": x, "Index": flat}, {"Out": gathered}, {"axis": axis})
    target = [*shape[:axis], *ctx.static_shape(index, "Gather with N-D indices"), *shape[axis + 1:]]
    ctx.emit("reshape2", {"X": gathered}, {"Out": out}, {"shape": [d if d >= 0 else -1 for d in target]})


@converts("Shape")
def shape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The run-time shape (some dims unknown): ``shape`` gives int32, ONNX wants int64."""
    out = node.output[0]
    dims = ctx.temp(out)
    ctx.emit("shape", {"Input": node.input[0]}, {"Out": dims})
    if "start" in attrs or "end" in attrs:
        rank = len(ctx.shape(node.input[0]))
        start, end = attrs.get("start", 0), attrs.get("end", rank)
        whole, dims = dims, ctx.temp(out)
        ctx.emit("slice", {"Input": whole}, {"Out": dims}, {"axes": [0], "starts": [start], "ends": [min(end, rank)]})
    ctx.emit("cast", {"X": dims}, {"Out": out}, {"in_dtype": int(DType.int32), "out_dtype": int(DType.int64)})


@converts("ConstantOfShape")
def constant_of_shape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """A run-time shape (a static one is folded)."""
    value = attrs.get("value", np.zeros(1, np.float32))
    ctx.emit("fill_constant", {"ShapeTensor": node.input[0]}, {"Out": node.output[0]},
             {"dtype": int(DType.from_any(value.dtype)), "value": float(value.reshape(-1)[0])})
