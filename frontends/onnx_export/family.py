"""Exporters of the op family rows (``halfway.ir.ops.families``): every row with an ``onnx``
entry is written as that ONNX op, its attrs mapped back (the importer's table read in reverse),
and a few activations without one as their ONNX decomposition.

Paddle's ``axis`` broadcasting (Y's dims lined up with X's from dim ``axis``) becomes numpy's by
giving Y trailing unit dims: a parameter is reshaped, a computed Y unsqueezed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.operator import Operator
from ...ir.ops.families import BINARY, COMPARE, REDUCE, UNARY
from ...ir.ops.family import Elementwise
from .context import CONTRIB_DOMAIN, ExportContext
from .registry import exports

__all__ = ["aligned_y", "activation", "reduce"]


def aligned_y(ctx: ExportContext, x: str, y: str, axis: int) -> str:
    """Y with trailing unit dims so that numpy broadcasting lines it up with X from ``axis``."""
    rx, ry = ctx.rank(x), ctx.rank(y)
    trailing = rx - axis - ry if 0 <= axis < rx else 0
    if trailing <= 0:
        return y
    value = ctx.value(y)
    if value is not None:
        return ctx.const(value.reshape(value.shape + (1,) * trailing), base="aligned")
    return ctx.node("Unsqueeze", [y, ctx.ints(range(ry, ry + trailing))])


def _row_attrs(row: Elementwise, op: Operator) -> dict[str, Any]:
    assert row.onnx is not None
    return {theirs: float(op.attr(ours)) for ours, (theirs, _) in row.onnx.attrs.items()}


def _one_to_one(ctx: ExportContext, op: Operator) -> None:
    row = UNARY.get(op.type) or BINARY.get(op.type) or COMPARE[op.type]
    assert row.onnx is not None
    x, out = op.input("X")[0], op.output("Out")[0]
    inputs = [x]
    if row.arity == 2:
        y = op.input("Y")[0]
        inputs.append(aligned_y(ctx, x, y, op.attr("axis")) if row.axis else y)
    ctx.node(row.onnx.name, inputs, [out], **_row_attrs(row, op))


for _row in (*UNARY.values(), *BINARY.values(), *COMPARE.values()):
    if _row.onnx is not None:
        exports(_row.name)(_one_to_one)


def activation(ctx: ExportContext, op_type: str, attrs: dict[str, float], x: str, out: str | None = None,
               like: str | None = None) -> str:
    """Write activation ``op_type`` (a UNARY row's name) with ``attrs`` of ``x``; returns its output.
    The constants take the dtype of var ``like``, else ``out``, else ``x`` (then a var)."""
    row = UNARY[op_type]
    outputs = [out] if out else None
    if row.onnx is not None:
        mapped: dict[str, Any] = {theirs: float(attrs.get(ours, row.defaults()[ours])) for ours, (theirs, _) in row.onnx.attrs.items()}
        return ctx.node(row.onnx.name, [x], outputs, **mapped)
    full = row.defaults() | attrs
    return _DECOMPOSED[op_type](ctx, full, x, outputs, like or out or x)


def _relu6(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    return ctx.node("Clip", [x, ctx.scalar(0.0, like), ctx.scalar(attrs["threshold"], like)], outputs)


def _hard_swish(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    if (attrs["threshold"], attrs["scale"], attrs["offset"]) == (6.0, 6.0, 3.0) and ctx.opset >= 14:
        return ctx.node("HardSwish", [x], outputs)
    shifted = ctx.node("Add", [x, ctx.scalar(attrs["offset"], like)])
    clipped = ctx.node("Clip", [shifted, ctx.scalar(0.0, like), ctx.scalar(attrs["threshold"], like)])
    return ctx.node("Mul", [x, ctx.node("Div", [clipped, ctx.scalar(attrs["scale"], like)])], outputs)


def _swish(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    beta = attrs.get("beta", 1.0)
    gate = x if beta == 1.0 else ctx.node("Mul", [x, ctx.scalar(beta, like)])
    return ctx.node("Mul", [x, ctx.node("Sigmoid", [gate])], outputs)


def _gelu(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    """ONNX Runtime's Gelu or FastGelu (tanh) with ``contrib`` on float32; else Gelu from opset 20;
    before, 0.5 x (1 + erf(x / sqrt 2)) or its tanh approximation."""
    tanh = bool(attrs.get("approximate", False))
    if ctx.contrib and ctx.dtype(like) is DType.float32:
        return ctx.node("FastGelu" if tanh else "Gelu", [x], outputs, domain=CONTRIB_DOMAIN)
    if ctx.opset >= 20:
        return ctx.node("Gelu", [x], outputs, approximate="tanh" if tanh else "none")
    if tanh:
        cube = ctx.node("Mul", [ctx.node("Mul", [x, x]), x])
        inner = ctx.node("Add", [x, ctx.node("Mul", [cube, ctx.scalar(0.044715, like)])])
        phi = ctx.node("Tanh", [ctx.node("Mul", [inner, ctx.scalar(float(np.sqrt(2 / np.pi)), like)])])
    else:
        phi = ctx.node("Erf", [ctx.node("Mul", [x, ctx.scalar(float(np.sqrt(0.5)), like)])])
    half = ctx.node("Mul", [x, ctx.scalar(0.5, like)])
    return ctx.node("Mul", [half, ctx.node("Add", [phi, ctx.scalar(1.0, like)])], outputs)


def _square(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    return ctx.node("Mul", [x, x], outputs)


def _round(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    """Halves away from zero (ONNX's Round takes them to even): sign(x) floor(|x| + 0.5)."""
    floor = ctx.node("Floor", [ctx.node("Add", [ctx.node("Abs", [x]), ctx.scalar(0.5, like)])])
    return ctx.node("Mul", [ctx.node("Sign", [x]), floor], outputs)


def _hard_shrink(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    return ctx.node("Shrink", [x], outputs, lambd=float(attrs["threshold"]), bias=0.0)


def _logsigmoid(ctx: ExportContext, attrs: dict[str, float], x: str, outputs: list[str] | None, like: str) -> str:
    return ctx.node("Neg", [ctx.node("Softplus", [ctx.node("Neg", [x])])], outputs)


_DECOMPOSED = {"relu6": _relu6, "hard_swish": _hard_swish, "swish": _swish, "silu": _swish, "gelu": _gelu,
               "square": _square, "round": _round, "hard_shrink": _hard_shrink, "logsigmoid": _logsigmoid}
"""The activations without a one-to-one ONNX op, as ONNX subgraphs."""


@exports(*_DECOMPOSED)
def decomposed(ctx: ExportContext, op: Operator) -> None:
    attrs = {name: op.attr(name) for name in UNARY[op.type].defaults()}
    activation(ctx, op.type, attrs, op.input("X")[0], op.output("Out")[0])


@exports("not_equal", "isinf", "isfinite")
def negated_compare(ctx: ExportContext, op: Operator) -> None:
    """Not(Equal), IsInf, and finite as neither IsInf nor IsNaN."""
    x, out = op.input("X")[0], op.output("Out")[0]
    if op.type == "isinf":
        ctx.node("IsInf", [x], [out])
    elif op.type == "isfinite":
        ctx.node("Not", [ctx.node("Or", [ctx.node("IsInf", [x]), ctx.node("IsNaN", [x])])], [out])
    else:
        y = aligned_y(ctx, x, op.input("Y")[0], op.attr("axis"))
        ctx.node("Not", [ctx.node("Equal", [x, y])], [out])


@exports("elementwise_mod", "elementwise_fmod", "elementwise_floordiv")
def remainder(ctx: ExportContext, op: Operator) -> None:
    """Integers: ONNX Mod (Python's sign for mod, C's for fmod); floats: fmod as Mod fmod=1, mod
    and floordiv through floor(X / Y)."""
    x, out = op.input("X")[0], op.output("Out")[0]
    y = aligned_y(ctx, x, op.input("Y")[0], op.attr("axis"))
    floating = ctx.dtype(x).is_floating
    if op.type == "elementwise_fmod" or (op.type == "elementwise_mod" and not floating):
        ctx.node("Mod", [x, y], [out], fmod=int(op.type == "elementwise_fmod" or floating))
        return
    if not floating:
        ctx.fail("integer floor division has no ONNX op (Div truncates toward zero)")
    quotient = ctx.node("Floor", [ctx.node("Div", [x, y])])
    if op.type == "elementwise_floordiv":
        ctx.node("Identity", [quotient], [out])
        return
    ctx.node("Sub", [x, ctx.node("Mul", [quotient, y])], [out])


@exports("bitwise_left_shift", "bitwise_right_shift")
def bit_shift(ctx: ExportContext, op: Operator) -> None:
    """ONNX's BitShift, which ONNX defines on unsigned integers."""
    x = op.input("X")[0]
    ctx.node("BitShift", [x, aligned_y(ctx, x, op.input("Y")[0], op.attr("axis"))], [op.output("Out")[0]],
             direction="LEFT" if op.type == "bitwise_left_shift" else "RIGHT")


@exports("elementwise_pow")
def elementwise_pow(ctx: ExportContext, op: Operator) -> None:
    """ONNX's Pow (the importer's own converter makes this row's op, so the row names none)."""
    x = op.input("X")[0]
    ctx.node("Pow", [x, aligned_y(ctx, x, op.input("Y")[0], op.attr("axis"))], [op.output("Out")[0]])


def reduce(ctx: ExportContext, onnx_op: str, x: str, axes: list[int] | str | None, keepdims: bool,
           out: str | None = None) -> str:
    """An ONNX Reduce* over ``axes`` (None: all; a var name: computed at run time), axes as an
    input where the opset takes them so (ReduceSum from 13, the others from 18)."""
    outputs = [out] if out else None
    if axes is None:
        return ctx.node(onnx_op, [x], outputs, keepdims=int(keepdims))
    if ctx.opset >= 18 or onnx_op == "ReduceSum":
        given = ctx.int64(axes) if isinstance(axes, str) else ctx.ints(axes)
        return ctx.node(onnx_op, [x, given], outputs, keepdims=int(keepdims))
    if isinstance(axes, str):
        ctx.fail(f"{onnx_op} over axes computed at run time needs opset 18 (asked for {ctx.opset})")
    return ctx.node(onnx_op, [x], outputs, axes=list(axes), keepdims=int(keepdims))


@exports(*(name for name, row in REDUCE.items() if row.onnx is not None))
def reduction(ctx: ExportContext, op: Operator) -> None:
    row = REDUCE[op.type]
    assert row.onnx is not None
    x, out = op.input("X")[0], op.output("Out")[0]
    axes: list[int] | str | None = None if op.attr("reduce_all") or not op.attr("dim") else list(op.attr("dim"))
    if op.input("DimTensor"):
        axes = op.input("DimTensor")[0]
    out_dtype = op.attr("out_dtype") if op.has_attr("out_dtype") else -1
    if out_dtype not in (-1, int(ctx.dtype(x))) or ctx.dtype(out) is not ctx.dtype(x):
        x = ctx.cast(x, ctx.dtype(out))
    reduce(ctx, row.onnx.name, x, axes, bool(op.attr("keep_dim")), out)


