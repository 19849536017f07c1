"""Exporters of the normalisations: layer_norm as LayerNormalization (opset 17 on) or its
decomposition, rms_norm as RMSNormalization (opset 23 on) or its decomposition. A float16
decomposition computes in float32 between two casts, as halfway's kernels do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from halfway.frontends.onnx_export.context import ExportContext, onnx_type
from halfway.frontends.onnx_export.ops_family import reduce
from halfway.frontends.onnx_export.registry import exports
from halfway.ir.dtypes import DType
from halfway.ir.operator import Operator

__all__: list[str] = []


def _affine(ctx: ExportContext, name: str | None, x: str, begin: int) -> str | None:
    """Scale or Bias (flat over the normalised dims in Paddle) in the normalised dims' shape."""
    if name is None:
        return None
    dims = list(ctx.shape(x)[begin:])
    if len(ctx.shape(name)) == len(dims):
        return name
    if any(d < 0 for d in dims):
        return ctx.node("Reshape", [name, ctx.node("Slice", [ctx.node("Shape", [x]), ctx.ints([begin]),
                                                            ctx.ints([len(ctx.shape(x))])])])
    value = ctx.value(name)
    if value is not None:
        return ctx.const(value.reshape(dims), base="affine")
    return ctx.node("Reshape", [name, ctx.ints(dims)])


Body = Callable[[str, "list[str] | None"], str]
"""Writes nodes over its input; its last node writes the given outputs (None: a fresh name)."""


def _in_float32(ctx: ExportContext, x: str, out: str, body: Body) -> None:
    """``body`` over ``x`` in float32 (casts around it for float16), its result written to ``out``."""
    if ctx.dtype(x) is DType.float16:
        result = body(ctx.node("Cast", [x], to=onnx_type(DType.float32)), None)
        ctx.node("Cast", [result], [out], to=onnx_type(DType.float16))
    else:
        body(x, [out])


def _scalar32(ctx: ExportContext, value: float) -> str:
    return ctx.const(value, np.float32, "scalar")


def _as32(ctx: ExportContext, name: str, like: str) -> str:
    """A Scale or Bias in float32 where ``like`` is float16 (the float16 transpile may keep
    either dtype for them), else as it is."""
    if ctx.dtype(like) is not DType.float16:
        return name
    return ctx.node("Cast", [name], to=onnx_type(DType.float32))


def _times(ctx: ExportContext, value: str, factor: str | None, like: str, outs: list[str] | None) -> str:
    """``value * factor`` in the float32 of the decomposition."""
    if factor is None:
        return ctx.node("Identity", [value], outs) if outs else value
    return ctx.node("Mul", [value, _as32(ctx, factor, like)], outs)


def _statistics(ctx: ExportContext, op: Operator, x: str, axes: list[int]) -> None:
    """The Mean and Variance outputs (one value per normalised row, flat) where the op has them."""
    if not (op.output("Mean") or op.output("Variance")):
        return
    v = ctx.cast(x, DType.float32)
    mean = reduce(ctx, "ReduceMean", v, axes, True)
    if op.output("Mean"):
        _flat(ctx, mean, op.output("Mean")[0])
    if op.output("Variance"):
        centred = ctx.node("Sub", [v, mean])
        _flat(ctx, reduce(ctx, "ReduceMean", ctx.node("Mul", [centred, centred]), axes, True), op.output("Variance")[0])


def _flat(ctx: ExportContext, value: str, out: str) -> None:
    ctx.cast(ctx.node("Reshape", [value, ctx.ints([-1])]), ctx.dtype(out), out)


@exports("layer_norm")
def layer_norm(ctx: ExportContext, op: Operator) -> None:
    x, y = op.input("X")[0], op.output("Y")[0]
    begin, eps = op.attr("begin_norm_axis"), float(op.attr("epsilon"))
    _statistics(ctx, op, x, list(range(begin, ctx.rank(x))))
    scale = _affine(ctx, op.input("Scale")[0] if op.input("Scale") else None, x, begin)
    bias = _affine(ctx, op.input("Bias")[0] if op.input("Bias") else None, x, begin)
    if ctx.opset >= 17 and scale is not None:
        _in_float32(ctx, x, y, lambda v, outs: ctx.node("LayerNormalization", [v, _as32(ctx, scale, x)] + (
            [_as32(ctx, bias, x)] if bias else []), outs, axis=begin, epsilon=eps))
        return
    axes = list(range(begin, ctx.rank(x)))

    def body(v: str, outs: list[str] | None) -> str:
        centred = ctx.node("Sub", [v, reduce(ctx, "ReduceMean", v, axes, True)])
        variance = reduce(ctx, "ReduceMean", ctx.node("Mul", [centred, centred]), axes, True)
        std = ctx.node("Sqrt", [ctx.node("Add", [variance, _scalar32(ctx, eps)])])
        if bias is None:
            return _times(ctx, ctx.node("Div", [centred, std]), scale, x, outs)
        normed = _times(ctx, ctx.node("Div", [centred, std]), scale, x, None)
        return ctx.node("Add", [normed, _as32(ctx, bias, x)], outs)

    _in_float32(ctx, x, y, body)


@exports("rms_norm")
def rms_norm(ctx: ExportContext, op: Operator) -> None:
    """RMSNormalization from opset 23, else X / sqrt(mean(X^2) + epsilon) * Scale."""
    x, y = op.input("X")[0], op.output("Y")[0]
    begin, eps = op.attr("begin_norm_axis"), float(op.attr("epsilon"))
    scale = _affine(ctx, op.input("Scale")[0] if op.input("Scale") else None, x, begin)
    if scale is not None and ctx.opset >= 23:
        _in_float32(ctx, x, y, lambda v, outs: ctx.node("RMSNormalization", [v, _as32(ctx, scale, x)], outs,
                                                        axis=begin, epsilon=eps))
        return
    axes = list(range(begin, ctx.rank(x)))

    def body(v: str, outs: list[str] | None) -> str:
        mean_square = reduce(ctx, "ReduceMean", ctx.node("Mul", [v, v]), axes, True)
        rms = ctx.node("Sqrt", [ctx.node("Add", [mean_square, _scalar32(ctx, eps)])])
        return _times(ctx, ctx.node("Div", [v, rms]), scale, x, outs)

    _in_float32(ctx, x, y, body)


def _channel_affine(ctx: ExportContext, name: str | None, x: str) -> str | None:
    """A per-channel Scale or Bias as [C, 1, ...] against channels-first ``x``, in float32."""
    if name is None:
        return None
    shape = [-1] + [1] * (ctx.rank(x) - 2)
    value = ctx.value(name)
    if value is not None:
        return ctx.const(value.astype(np.float32).reshape(shape), base="affine")
    return ctx.node("Reshape", [ctx.cast(name, DType.float32), ctx.ints(shape)])


def _grouped(ctx: ExportContext, op: Operator, groups: int | None) -> None:
    """X normalised per sample and group of channels (instance_norm: a group per channel), through
    InstanceNormalization of X seen as [N, groups, -1], then the per-channel Scale and Bias."""
    x, y = op.input("X")[0], op.output("Y")[0]
    if any(op.output(slot) for slot in ("Mean", "Variance", "SavedMean", "SavedVariance")):
        ctx.fail("the statistics outputs have no ONNX form")
    channels = ctx.shape(x)[1]
    groups = groups or channels
    if groups < 0:
        ctx.fail(f"instance_norm needs a known channel count, {x!r} has shape {list(ctx.shape(x))}")
    scale = _channel_affine(ctx, op.input("Scale")[0] if op.input("Scale") else None, x)
    bias = _channel_affine(ctx, op.input("Bias")[0] if op.input("Bias") else None, x)

    def body(v: str, outs: list[str] | None) -> str:
        rows = ctx.node("Reshape", [v, ctx.ints([0, groups, -1])])
        ones, zeros = (ctx.const(np.full(groups, fill, np.float32), base="unit") for fill in (1.0, 0.0))
        normed = ctx.node("InstanceNormalization", [rows, ones, zeros], epsilon=float(op.attr("epsilon")))
        value = ctx.node("Reshape", [normed, ctx.node("Shape", [v])], None if scale or bias else outs)
        if scale:
            value = ctx.node("Mul", [value, scale], None if bias else outs)
        return ctx.node("Add", [value, bias], outs) if bias else value

    _in_float32(ctx, x, y, body)


@exports("group_norm")
def group_norm(ctx: ExportContext, op: Operator) -> None:
    if op.attr("data_layout") != "NCHW":
        ctx.fail(f"data_layout {op.attr('data_layout')} is not supported (ONNX normalises channels first)")
    _grouped(ctx, op, op.attr("groups"))


@exports("instance_norm")
def instance_norm(ctx: ExportContext, op: Operator) -> None:
    _grouped(ctx, op, None)
