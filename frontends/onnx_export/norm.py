"""Exporters of the normalisations and the ops alike: layer_norm as LayerNormalization (opset 17
on) or its decomposition, skip_layer_norm as Add and that (or, with ``contrib``, ONNX Runtime's
SkipLayerNormalization), rms_norm as RMSNormalization (opset 23 on) or its decomposition,
skip_rms_norm as Add and that (or, with ``contrib``, SkipSimplifiedLayerNormalization);
batch_norm, lrn, softmax, log_softmax and prelu as their ONNX ops. A float16 decomposition
computes in float32 between two casts, as halfway's kernels do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.dtypes import DType
from ...ir.operator import Operator
from .context import CONTRIB_DOMAIN, ExportContext, onnx_type
from .family import reduce
from .registry import exports

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


def _in_float32(ctx: ExportContext, x: str, out: str, body: Body, like: str | None = None) -> None:
    """``body`` over ``x`` (of var ``like``'s dtype, by default x's own) in float32 (casts around it
    for float16), its result written to ``out``."""
    if ctx.dtype(like or x) is DType.float16:
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


def _slot(op: Operator, slot: str) -> str | None:
    return op.input(slot)[0] if op.input(slot) else None


def _layer_norm_of(ctx: ExportContext, value: str, like: str, out: str, op: Operator) -> None:
    """``op``'s layer normalisation (its Scale, Bias and attrs) of ``value``, which has the shape
    and dtype of var ``like``, written to ``out``."""
    begin, eps = op.attr("begin_norm_axis"), float(op.attr("epsilon"))
    scale = _affine(ctx, _slot(op, "Scale"), like, begin)
    bias = _affine(ctx, _slot(op, "Bias"), like, begin)
    if ctx.opset >= 17 and scale is not None:
        _in_float32(ctx, value, out, lambda v, outs: ctx.node("LayerNormalization", [v, _as32(ctx, scale, like)] + (
            [_as32(ctx, bias, like)] if bias else []), outs, axis=begin, epsilon=eps), like)
        return
    axes = list(range(begin, ctx.rank(like)))

    def body(v: str, outs: list[str] | None) -> str:
        centred = ctx.node("Sub", [v, reduce(ctx, "ReduceMean", v, axes, True)])
        variance = reduce(ctx, "ReduceMean", ctx.node("Mul", [centred, centred]), axes, True)
        std = ctx.node("Sqrt", [ctx.node("Add", [variance, _scalar32(ctx, eps)])])
        if bias is None:
            return _times(ctx, ctx.node("Div", [centred, std]), scale, like, outs)
        normed = _times(ctx, ctx.node("Div", [centred, std]), scale, like, None)
        return ctx.node("Add", [normed, _as32(ctx, bias, like)], outs)

    _in_float32(ctx, value, out, body, like)


@exports("layer_norm")
def layer_norm(ctx: ExportContext, op: Operator) -> None:
    x = op.input("X")[0]
    _statistics(ctx, op, x, list(range(op.attr("begin_norm_axis"), ctx.rank(x))))
    _layer_norm_of(ctx, x, x, op.output("Y")[0], op)


@exports("skip_layer_norm", "skip_rms_norm")
def skip_norm(ctx: ExportContext, op: Operator) -> None:
    """ONNX Runtime's SkipLayerNormalization (SkipSimplifiedLayerNormalization for skip_rms_norm)
    with ``contrib`` on float32 over the last dim of a 3-D X with a Scale; else Add, then the
    norm's own form."""
    x, y, out = op.input("X")[0], op.input("Y")[0], op.output("Out")[0]
    total = op.output("Sum")[0] if op.output("Sum") else None
    if _contrib_skip_fits(ctx, op, x):
        scale = _affine(ctx, _slot(op, "Scale"), x, ctx.rank(x) - 1)
        bias = _affine(ctx, _slot(op, "Bias"), x, ctx.rank(x) - 1)
        outputs = [out, "", "", total] if total else [out]
        assert scale is not None
        kind = "SkipLayerNormalization" if op.type == "skip_layer_norm" else "SkipSimplifiedLayerNormalization"
        ctx.node(kind, [x, y, scale] + ([bias] if bias else []), outputs, domain=CONTRIB_DOMAIN,
                 epsilon=float(op.attr("epsilon")))
        return
    of = _layer_norm_of if op.type == "skip_layer_norm" else _rms_norm_of
    of(ctx, ctx.node("Add", [x, y], [total] if total else None), x, out, op)


def _contrib_skip_fits(ctx: ExportContext, op: Operator, x: str) -> bool:
    return (ctx.contrib and ctx.dtype(x) is DType.float32 and ctx.rank(x) == 3 and bool(op.input("Scale"))
            and op.attr("begin_norm_axis") == 2)


@exports("rms_norm")
def rms_norm(ctx: ExportContext, op: Operator) -> None:
    _rms_norm_of(ctx, op.input("X")[0], op.input("X")[0], op.output("Y")[0], op)


def _rms_norm_of(ctx: ExportContext, value: str, like: str, out: str, op: Operator) -> None:
    """``op``'s RMS normalisation of ``value`` (of var ``like``'s shape and dtype) into ``out``:
    RMSNormalization from opset 23, else value / sqrt(mean(value^2) + epsilon) * Scale."""
    begin, eps = op.attr("begin_norm_axis"), float(op.attr("epsilon"))
    scale = _affine(ctx, op.input("Scale")[0] if op.input("Scale") else None, like, begin)
    if scale is not None and ctx.opset >= 23:
        _in_float32(ctx, value, out, lambda v, outs: ctx.node("RMSNormalization", [v, _as32(ctx, scale, like)], outs,
                                                              axis=begin, epsilon=eps), like)
        return
    axes = list(range(begin, ctx.rank(like)))

    def body(v: str, outs: list[str] | None) -> str:
        mean_square = reduce(ctx, "ReduceMean", ctx.node("Mul", [v, v]), axes, True)
        rms = ctx.node("Sqrt", [ctx.node("Add", [mean_square, _scalar32(ctx, eps)])])
        return _times(ctx, ctx.node("Div", [v, rms]), scale, like, outs)

    _in_float32(ctx, value, out, body, like)


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


@exports("batch_norm")
def batch_norm(ctx: ExportContext, op: Operator) -> None:
    if op.attr("data_layout", "NCHW") not in ("NCHW", "AnyLayout"):
        ctx.fail(f"data_layout {op.attr('data_layout')} is not supported (ONNX normalises channels first)")
    inputs = [op.input(slot)[0] for slot in ("X", "Scale", "Bias", "Mean", "Variance")]
    ctx.node("BatchNormalization", inputs, [op.output("Y")[0]], epsilon=float(op.attr("epsilon")))


@exports("lrn")
def lrn(ctx: ExportContext, op: Operator) -> None:
    n = op.attr("n")
    ctx.node("LRN", [op.input("X")[0]], [op.output("Out")[0]], size=n, alpha=float(op.attr("alpha")) * n,
             beta=float(op.attr("beta")), bias=float(op.attr("k")))


@exports("softmax", "log_softmax")
def softmax(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Softmax" if op.type == "softmax" else "LogSoftmax", [op.input("X")[0]], [op.output("Out")[0]],
             axis=op.attr("axis"))


@exports("prelu")
def prelu(ctx: ExportContext, op: Operator) -> None:
    """PRelu with Alpha brought to a shape that broadcasts: one value (all), [C, 1, ...]
    (channel), or X's dims after the batch (element)."""
    x, alpha, out = op.input("X")[0], op.input("Alpha")[0], op.output("Out")[0]
    rank, mode = ctx.rank(x), op.attr("mode")
    if mode == "all":
        shape = [1]
    elif mode == "channel":
        shape = [-1] + [1] * (rank - 2)
    else:
        shape = list(ctx.shape(x)[1:])
        if -1 in shape:
            ctx.fail(f"element mode needs known dims after the batch, {x!r} has shape {list(ctx.shape(x))}")
    value = ctx.value(alpha)
    slope = (ctx.const(value.reshape(shape), base="slope") if value is not None
             else ctx.node("Reshape", [alpha, ctx.ints(shape)]))
    ctx.node("PRelu", [x, slope], [out])
