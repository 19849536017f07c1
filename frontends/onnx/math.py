"""Converters of ONNX's math ops: elementwise binary ops (numpy broadcasting), their variadic
forms, activations, comparisons and logical ops, Clip, Pow, Cast and the reductions.

The one-to-one ops come from the family rows' ``onnx`` entries (``halfway.ir.ops.families``);
the converters here that name ONNX ops themselves are the special ones."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, helper

from ...ir.dtypes import DType
from ...ir.ops.families import BINARY, COMPARE, REDUCE, UNARY
from ...ir.schema import get_schema
from .context import GraphContext
from .registry import converts

__all__ = ["cast_to"]

_ROWS = [(row.onnx, row) for row in (*BINARY.values(), *COMPARE.values(), *UNARY.values()) if row.onnx is not None]
_BINARY = {onnx.name: row for onnx, row in _ROWS if row.arity == 2}
"""ONNX op -> the binary row it is (Max and Min also take one or more than two inputs)."""
_UNARY = {onnx.name: (onnx, row) for onnx, row in _ROWS if row.arity == 1}
"""ONNX op -> the unary row it is, with its ONNX form (which maps the row's attrs)."""


def _emit_binary(ctx: GraphContext, op_type: str, x: str, y: str, out: str) -> None:
    axis = get_schema(op_type).attr_spec("axis") is not None
    ctx.emit(op_type, {"X": x, "Y": y}, {"Out": out}, {"axis": -1} if axis else {})


@converts(*_BINARY, makes={name: row.name for name, row in _BINARY.items()})
def binary(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Two-input elementwise ops and comparisons; Max and Min also take one or more than two inputs."""
    _fold_chain(ctx, node, _BINARY[node.op_type].name)


def _fold_chain(ctx: GraphContext, node: NodeProto, op_type: str) -> None:
    """out = ((in0 op in1) op in2) ...; one input is a copy."""
    inputs, out = list(node.input), node.output[0]
    if len(inputs) == 1:
        ctx.emit("assign", {"X": inputs[0]}, {"Out": out})
        return
    acc = inputs[0]
    for i, other in enumerate(inputs[1:], start=2):
        target = out if i == len(inputs) else ctx.temp(out)
        _emit_binary(ctx, op_type, acc, other, target)
        acc = target


@converts("BitShift", makes=("bitwise_left_shift", "bitwise_right_shift"))
def bit_shift(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    direction = attrs["direction"].decode() if isinstance(attrs["direction"], bytes) else attrs["direction"]
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(f"direction is {direction!r}; BitShift takes 'LEFT' or 'RIGHT'")
    op_type = "bitwise_left_shift" if direction == "LEFT" else "bitwise_right_shift"
    _emit_binary(ctx, op_type, node.input[0], node.input[1], node.output[0])


@converts("Sum", makes="sum")
def sum_(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    shapes = {ctx.shape(name) for name in node.input}
    if len(node.input) > 1 and len(shapes) == 1 and all(d >= 0 for d in next(iter(shapes))):
        ctx.emit("sum", {"X": list(node.input)}, {"Out": node.output[0]})
    else:
        _fold_chain(ctx, node, "elementwise_add")


@converts("Mean", makes="scale")
def mean(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    total = ctx.temp(node.output[0])
    _fold_chain(ctx, helper.make_node("Sum", list(node.input), [total]), "elementwise_add")
    ctx.emit("scale", {"X": total}, {"Out": node.output[0]}, {"scale": 1.0 / len(node.input)})


@converts(*_UNARY, makes={name: row.name for name, (_, row) in _UNARY.items()})
def unary(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    onnx, row = _UNARY[node.op_type]
    values = {ours: float(attrs.get(theirs, default)) for ours, (theirs, default) in onnx.attrs.items()}
    ctx.emit(row.name, {"X": node.input[0]}, {"Out": node.output[0]}, values)


@converts("HardSwish", makes="hard_swish")
def hard_swish(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """ONNX's x * max(0, min(1, x / 6 + 1 / 2)) is Paddle's hard_swish with its defaults."""
    ctx.emit("hard_swish", {"X": node.input[0]}, {"Out": node.output[0]})


@converts("Gelu", makes="gelu")
def gelu(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    approximate = attrs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        ctx.fail(f"unknown approximate {approximate!r}")
    ctx.emit("gelu", {"X": node.input[0]}, {"Out": node.output[0]}, {"approximate": approximate == "tanh"})


@converts("Neg", makes="scale")
def neg(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("scale", {"X": node.input[0]}, {"Out": node.output[0]}, {"scale": -1.0})


@converts("Mod", makes=("elementwise_mod", "elementwise_fmod"))
def mod(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """fmod 0: the remainder takes the divisor's sign (Python's); fmod 1: the dividend's (C's)."""
    op_type = "elementwise_fmod" if attrs.get("fmod", 0) else "elementwise_mod"
    _emit_binary(ctx, op_type, node.input[0], node.input[1], node.output[0])


@converts("IsInf", makes="isinf")
def is_inf(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """isinf, and'ed with a sign test when one of the infinities is not detected (neither: all false)."""
    x, out = node.input[0], node.output[0]
    negative, positive = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    if negative and positive:
        ctx.emit("isinf", {"X": x}, {"Out": out})
        return
    inf = ctx.temp(f"{out}.inf")
    ctx.emit("isinf", {"X": x}, {"Out": inf})
    if not (negative or positive):
        ctx.emit("logical_xor", {"X": inf, "Y": inf}, {"Out": out})
        return
    zero = ctx.add_const(f"{out}.zero", np.zeros((), ctx.info(x).dtype.numpy))
    side = ctx.temp(f"{out}.side")
    _emit_binary(ctx, "less_than" if negative else "greater_than", x, zero, side)
    ctx.emit("logical_and", {"X": inf, "Y": side}, {"Out": out})


@converts("Identity", makes="assign")
def identity(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("assign", {"X": node.input[0]}, {"Out": node.output[0]})


@converts("Clip", makes="clip")
def clip(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Bounds from attrs (before opset 11) or inputs: constants become attrs, run-time values
    the Min/Max tensors; an absent bound is the dtype's limit. ONNX clips to max when
    min > max, which the bounds reproduce by lowering min (a run-time Min by elementwise_min)."""
    x = node.input[0]
    dtype = ctx.info(x).dtype.numpy
    limits = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    bounds = {"min": max(float(limits.min), -_FLOAT_MAX), "max": min(float(limits.max), _FLOAT_MAX)}
    tensors = {}
    if ctx.opset < 11:
        bounds.update({k: float(attrs[k]) for k in ("min", "max") if k in attrs})
    for index, key in ((1, "min"), (2, "max")) if ctx.opset >= 11 else ():
        name = node.input[index] if index < len(node.input) else ""
        if ctx.is_const(name):
            bounds[key] = float(ctx.consts[name].reshape(-1)[0])
        elif name:
            tensors[key.capitalize()] = name
    bounds["min"] = min(bounds["min"], bounds["max"])
    if tensors:  # ONNX's min > max clips to max: the Min tensor lowered to Max where it exceeds it
        given = {key: tensors.get(key) or ctx.add_const(ctx.temp(key.lower()), _bound(bounds[key.lower()], dtype))
                 for key in ("Min", "Max")}
        tensors = {"Min": ctx.temp(f"{node.output[0]}.min"), "Max": given["Max"]}
        ctx.emit("elementwise_min", {"X": given["Min"], "Y": given["Max"]}, {"Out": tensors["Min"]}, {"axis": -1})
    ctx.emit("clip", {"X": x, **tensors}, {"Out": node.output[0]}, bounds)


_FLOAT_MAX = float(np.finfo(np.float32).max)


def _bound(value: float, dtype: np.dtype) -> np.ndarray:
    """A clip bound as a 0-d array of ``dtype``, an integer one held inside its range."""
    if np.issubdtype(dtype, np.floating):
        return np.array(value, dtype)
    limits = np.iinfo(dtype)
    return np.array(max(min(int(value), int(limits.max)), int(limits.min)), dtype)


@converts("Pow", makes="pow")
def pow_(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """A constant one-value exponent becomes ``pow``; otherwise elementwise_pow, with a constant
    exponent of another dtype converted (ONNX lets the exponent's dtype differ)."""
    x, y = node.input[0], node.input[1]
    dtype = ctx.info(x).dtype
    if ctx.is_const(y) and ctx.consts[y].size == 1 and dtype.is_floating and len(ctx.shape(y)) <= len(ctx.shape(x)):
        ctx.emit("pow", {"X": x}, {"Out": node.output[0]}, {"factor": float(ctx.consts[y].reshape(-1)[0])})
        return
    if ctx.info(y).dtype != dtype:
        y = cast_to(ctx, y, dtype, node.output[0])
    _emit_binary(ctx, "elementwise_pow", x, y, node.output[0])


def cast_to(ctx: GraphContext, name: str, dtype: DType, hint: str) -> str:
    """``name`` as ``dtype``: a converted constant, or a cast op's output."""
    if ctx.is_const(name):
        return ctx.add_const(f"{name}.{dtype.name}", ctx.consts[name].astype(dtype.numpy))
    out = ctx.temp(f"{hint}.cast")
    ctx.emit("cast", {"X": name}, {"Out": out}, {"in_dtype": int(ctx.info(name).dtype), "out_dtype": int(dtype)})
    return out


@converts("Cast", "CastLike", makes="cast")
def cast(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Cast to attr ``to``; CastLike to the dtype of its second input."""
    if node.op_type == "CastLike":
        target = ctx.info(node.input[1]).dtype
    else:
        target = DType.from_any(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    x = node.input[0]
    ctx.emit("cast", {"X": x}, {"Out": node.output[0]},
             {"in_dtype": int(ctx.info(x).dtype), "out_dtype": int(target)})


_REDUCE = {row.onnx.name: name for name, row in REDUCE.items() if row.onnx is not None}
_COMPOSED = {"ReduceL1": ("abs", None), "ReduceL2": ("square", "sqrt"), "ReduceSumSquare": ("square", None),
             "ReduceLogSum": (None, "log"), "ReduceLogSumExp": ("exp", "log")}
"""ONNX reductions that are a sum between a unary op before (on X) and one after (on the sum)."""
_AXES_AS_INPUT = {"ReduceSum": 13}
"""The opset from which an op takes its axes as an input (18 for the other reductions)."""


def _runtime_axes(ctx: GraphContext, node: NodeProto) -> str | None:
    """The axes input when it is computed at run time ("" where it is empty: its length is known),
    None when the axes are constants or attrs."""
    if ctx.opset < _AXES_AS_INPUT.get(node.op_type, 18) or len(node.input) < 2 or not node.input[1]:
        return None
    name = node.input[1]
    if ctx.is_const(name):
        return None
    length = ctx.shape(name)
    if len(length) != 1 or length[0] < 0:
        ctx.fail(f"axes ({name!r}) computed at run time must be a 1-D tensor of known length, got shape {list(length)}")
    return name if length[0] else ""


@converts(*_REDUCE, *_COMPOSED, makes=_REDUCE)
def reduce(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    runtime = _runtime_axes(ctx, node)
    if runtime is not None:
        axes: list[int] = []
    elif ctx.opset >= _AXES_AS_INPUT.get(node.op_type, 18):
        given = ctx.optional_const(node, 1, "axes")
        axes = [] if given is None else [int(a) for a in given.reshape(-1)]
    else:
        axes = list(attrs.get("axes", []))
    for flag in ("keepdims", "noop_with_empty_axes"):
        if attrs.get(flag, 0) not in (0, 1):
            ctx.fail(f"{flag} is {attrs[flag]}; it must be 0 or 1")
    rank = len(ctx.shape(node.input[0]))
    if len({ctx.axis(a, rank, "axes entry") for a in axes}) != len(axes):
        ctx.fail(f"axes {axes} repeat an axis")
    before, after = _COMPOSED.get(node.op_type, (None, None))
    x, out = node.input[0], node.output[0]
    if before is not None:
        x = ctx.temp(f"{out}.{before}")
        ctx.emit(before, {"X": node.input[0]}, {"Out": x})
    if not axes and not runtime and attrs.get("noop_with_empty_axes", 0):
        ctx.emit(after or "assign", {"X": x}, {"Out": out})
        return
    total = out if after is None else ctx.temp(f"{out}.sum")
    ctx.emit(_REDUCE.get(node.op_type, "reduce_sum"), {"X": x, **({"DimTensor": runtime} if runtime else {})},
             {"Out": total}, {"dim": axes, "keep_dim": bool(attrs.get("keepdims", 1)), "reduce_all": not axes})
    if after is not None:
        ctx.emit(after, {"X": total}, {"Out": out})
