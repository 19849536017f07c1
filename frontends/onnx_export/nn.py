"""Exporters of the neural-network ops: convolutions (fused ones as Conv and their epilogue, or
ONNX Runtime's FusedConv), pooling, batch and local response normalisation, dropout, softmax
and the matrix products (``fc`` as MatMul + Add and its activation).

Padding: Paddle's 4-value ``paddings`` are ``[top, bottom, left, right]`` (2 values: each side
alike), ONNX's ``pads`` ``[top, left, bottom, right]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import numpy_helper

from ...ir.dtypes import DType
from ...ir.operator import Operator
from ...ir.ops.families import epilogue_op
from .context import CONTRIB_DOMAIN, ExportContext
from .family import activation
from .registry import exports

__all__: list[str] = []


def _pads(ctx: ExportContext, paddings: Sequence[int], spatial: int) -> list[int]:
    if len(paddings) == spatial:
        return [*paddings, *paddings]
    if len(paddings) != 2 * spatial:
        ctx.fail(f"paddings {list(paddings)} must hold {spatial} or {2 * spatial} values")
    return [paddings[2 * i] for i in range(spatial)] + [paddings[2 * i + 1] for i in range(spatial)]


def _window(ctx: ExportContext, op: Operator, spatial: int) -> dict[str, Any]:
    """strides, and pads or auto_pad, of a sliding-window op."""
    layout = op.attr("data_format", "NCHW")
    if layout not in ("NCHW", "NCDHW", "AnyLayout"):
        ctx.fail(f"data_format {layout} (channels last) is not supported; ONNX windows are channels first")
    algorithm = op.attr("padding_algorithm", "EXPLICIT")
    window: dict[str, Any] = {"strides": list(op.attr("strides"))}
    if algorithm == "SAME":
        window["auto_pad"] = "SAME_UPPER"
    elif algorithm == "VALID":
        window["pads"] = [0] * (2 * spatial)
    else:
        window["pads"] = _pads(ctx, op.attr("paddings"), spatial)
    return window


def _conv(ctx: ExportContext, op: Operator, out: str | None, bias: str | None = None) -> str:
    x, w = op.input("Input")[0], op.input("Filter")[0]
    inputs = [x, w] + ([bias] if bias else [])
    return ctx.node("Conv", inputs, [out] if out else None, group=op.attr("groups"),
                    dilations=list(op.attr("dilations")), **_window(ctx, op, 2))


@exports("conv2d", "depthwise_conv2d")
def conv2d(ctx: ExportContext, op: Operator) -> None:
    _conv(ctx, op, op.output("Output")[0])


# the epilogues ONNX Runtime's FusedConv computes: halfway's activation -> its name and attrs
_FUSED_CONV_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "leaky_relu": "LeakyRelu",
                           "relu6": "Clip", "hard_sigmoid": "HardSigmoid"}


def _fused_conv_params(name: str, attrs: dict[str, Any]) -> list[float]:
    if name == "leaky_relu":
        return [float(attrs["alpha"])]
    if name == "relu6":
        return [0.0, float(attrs["threshold"])]
    if name == "hard_sigmoid":
        return [float(attrs["slope"]), float(attrs["offset"])]
    return []


@exports("fused_conv2d")
def fused_conv2d(ctx: ExportContext, op: Operator) -> None:
    """act(Conv(Input, Filter, Bias) + ResidualData), or ONNX Runtime's FusedConv (its Z input the
    residual) with ``contrib`` where it computes the activation and the program is float32."""
    out = op.output("Output")[0]
    bias = op.input("Bias")[0] if op.input("Bias") else None
    residual = op.input("ResidualData")[0] if op.input("ResidualData") else None
    act = epilogue_op(op.attr("fuse_activation"), op.attr("fuse_alpha"), op.attr("fuse_beta"))
    name = act[0] if act else ""
    if ctx.contrib and ctx.dtype(out) is DType.float32 and (act is None or name in _FUSED_CONV_ACTIVATIONS):
        inputs = [op.input("Input")[0], op.input("Filter")[0], bias or "", residual or ""]
        while inputs[-1] == "":
            inputs.pop()
        ctx.node("FusedConv", inputs, [out], domain=CONTRIB_DOMAIN, group=op.attr("groups"),
                 dilations=list(op.attr("dilations")), activation=_FUSED_CONV_ACTIVATIONS.get(name),
                 activation_params=(_fused_conv_params(name, act[1]) if act else None) or None, **_window(ctx, op, 2))
        return
    value = _conv(ctx, op, None if residual or act else out, bias)
    if residual:
        value = ctx.node("Add", [value, residual], None if act else [out])
    if act:
        activation(ctx, act[0], act[1], value, out)


@exports("fused_conv2d_pool")
def fused_conv2d_pool(ctx: ExportContext, op: Operator) -> None:
    """act(Conv(Input, Filter, Bias)), then MaxPool or AveragePool of pool_size windows at their own stride."""
    out = op.output("Output")[0]
    value = _conv(ctx, op, None, op.input("Bias")[0] if op.input("Bias") else None)
    act = epilogue_op(op.attr("fuse_activation"), op.attr("fuse_alpha"), op.attr("fuse_beta"))
    if act:
        value = activation(ctx, act[0], act[1], value, like=out)
    size = list(op.attr("pool_size"))
    ctx.node("MaxPool" if op.attr("pool_type") == "max" else "AveragePool", [value], [out], kernel_shape=size,
             strides=size)


@exports("pool2d", "pool3d")
def pool(ctx: ExportContext, op: Operator) -> None:
    x, out = op.input("X")[0], op.output("Out")[0]
    pooling = op.attr("pooling_type")
    ksize = list(op.attr("ksize"))
    spatial = 2 if op.type == "pool2d" else 3
    whole = op.attr("global_pooling") or (op.attr("adaptive") and ksize == [1] * spatial)
    if whole:
        ctx.node({"max": "GlobalMaxPool", "avg": "GlobalAveragePool", "lp": "GlobalLpPool"}[pooling], [x], [out],
                 p=int(op.attr("norm_type")) if pooling == "lp" else None)
        return
    if op.attr("adaptive"):
        ctx.fail(f"adaptive pooling to {ksize} has no ONNX op (only to size 1, a global pool)")
    window = _window(ctx, op, spatial) | {"kernel_shape": ksize}
    dilations = list(op.attr("dilations", ())) or None
    if pooling == "lp":
        ctx.node("LpPool", [x], [out], p=int(op.attr("norm_type")), dilations=dilations, **window)
        return
    ceil = int(bool(op.attr("ceil_mode")))
    if pooling == "max":
        ctx.node("MaxPool", [x], [out], ceil_mode=ceil, dilations=dilations, **window)
        return
    if dilations and any(d != 1 for d in dilations) and ctx.opset < 19:
        ctx.fail(f"a dilated average pool needs opset 19 (asked for {ctx.opset})")
    ctx.node("AveragePool", [x], [out], ceil_mode=ceil, count_include_pad=int(not op.attr("exclusive")),
             dilations=dilations if ctx.opset >= 19 else None, **window)


@exports("conv2d_transpose")
def conv2d_transpose(ctx: ExportContext, op: Operator) -> None:
    """ConvTranspose; an ``output_size`` becomes the ``output_padding`` that reaches it."""
    x, w, out = op.input("Input")[0], op.input("Filter")[0], op.output("Output")[0]
    window = _window(ctx, op, 2)
    dilations = list(op.attr("dilations"))
    output_padding = list(op.attr("output_padding")) or None
    if op.attr("output_size"):
        if "pads" not in window:
            ctx.fail("output_size with SAME padding is not supported")
        kernel, sizes, target = ctx.shape(w)[2:], ctx.shape(x)[2:], ctx.shape(out)[2:]
        if min(*sizes, *target) < 0:
            ctx.fail(f"output_size needs known spatial dims, {x!r} has shape {list(ctx.shape(x))}")
        pads, strides = window["pads"], window["strides"]
        output_padding = [t - (s * (n - 1) + d * (k - 1) + 1 - pads[i] - pads[i + 2])
                          for i, (t, s, n, d, k) in enumerate(zip(target, strides, sizes, dilations, kernel))]
    bias = op.input("Bias")[0] if op.input("Bias") else None
    ctx.node("ConvTranspose", [x, w] + ([bias] if bias else []), [out], group=op.attr("groups"), dilations=dilations,
             output_padding=output_padding, **window)


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


@exports("softmax", "log_softmax")
def softmax(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Softmax" if op.type == "softmax" else "LogSoftmax", [op.input("X")[0]], [op.output("Out")[0]],
             axis=op.attr("axis"))


def _transposed_last(ctx: ExportContext, name: str) -> str:
    rank = ctx.rank(name)
    if rank < 2:
        return name
    value = ctx.value(name)
    if value is not None:
        return ctx.const(value.swapaxes(-1, -2), base="transposed")
    return ctx.node("Transpose", [name], perm=[*range(rank - 2), rank - 1, rank - 2])


@exports("matmul_v2")
def matmul_v2(ctx: ExportContext, op: Operator) -> None:
    x, y = op.input("X")[0], op.input("Y")[0]
    if op.attr("trans_x"):
        x = _transposed_last(ctx, x)
    if op.attr("trans_y"):
        y = _transposed_last(ctx, y)
    ctx.node("MatMul", [x, y], [op.output("Out")[0]])


@exports("fc")
def fc(ctx: ExportContext, op: Operator) -> None:
    """act(Input flattened at in_num_col_dims @ W + Bias): Input reshaped to [d0.., -1] where it
    has more dims than that, then MatMul, Add and the activation."""
    x, w, out = op.input("Input")[0], op.input("W")[0], op.output("Out")[0]
    if op.attr("padding_weights"):
        ctx.fail("padding_weights (W padded by 4 rows and columns) is not supported")
    keep = op.attr("in_num_col_dims")
    if ctx.rank(x) != keep + 1:
        x = ctx.node("Reshape", [x, ctx.ints([0] * keep + [-1])])
    bias = op.input("Bias")[0] if op.input("Bias") else None
    act = epilogue_op(op.attr("activation_type"))
    value = ctx.node("MatMul", [x, w], None if bias or act else [out])
    if bias:
        value = ctx.node("Add", [value, bias], None if act else [out])
    if act:
        activation(ctx, act[0], act[1], value, out)


@exports("mul")
def mul(ctx: ExportContext, op: Operator) -> None:
    """The legacy matrix product: X flattened to 2-D at x_num_col_dims, Y at y_num_col_dims, their
    product reshaped to X's leading and Y's trailing dims."""
    x, y, out = op.input("X")[0], op.input("Y")[0], op.output("Out")[0]
    xs, ys = op.attr("x_num_col_dims"), op.attr("y_num_col_dims")
    product = ctx.node("MatMul", [ctx.node("Flatten", [x], axis=xs), ctx.node("Flatten", [y], axis=ys)])
    if ctx.rank(x) == xs + 1 and ctx.rank(y) == ys + 1 == 2:
        ctx.node("Identity", [product], [out])
        return
    lead = ctx.node("Slice", [ctx.node("Shape", [x]), ctx.ints([0]), ctx.ints([xs])])
    trail = ctx.node("Slice", [ctx.node("Shape", [y]), ctx.ints([ys]), ctx.ints([ctx.rank(y)])])
    ctx.node("Reshape", [product, ctx.node("Concat", [lead, trail], axis=0)], [out])


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
