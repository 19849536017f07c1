"""Exporters of the convolutions: conv2d, depthwise_conv2d and conv3d as Conv, conv2d_transpose and
conv3d_transpose as ConvTranspose; deformable_conv as DeformConv (opset 19); fused_conv2d as Conv
and its epilogue (or ONNX Runtime's FusedConv), and fused_conv2d_pool as that and the pool."""

from __future__ import annotations

from typing import Any

from ...ir.dtypes import DType
from ...ir.operator import Operator
from ...ir.ops.families import epilogue_op
from ...ir.ops.window import window_geometry
from .context import CONTRIB_DOMAIN, ExportContext
from .family import activation
from .registry import exports
from .window import window_attrs

__all__: list[str] = []


def _conv(ctx: ExportContext, op: Operator, out: str | None, bias: str | None = None) -> str:
    x, w = op.input("Input")[0], op.input("Filter")[0]
    inputs = [x, w] + ([bias] if bias else [])
    return ctx.node("Conv", inputs, [out] if out else None, group=op.attr("groups"),
                    dilations=list(op.attr("dilations")), **window_attrs(ctx, op, 3 if op.type == "conv3d" else 2))


@exports("conv2d", "depthwise_conv2d", "conv3d")
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
                 activation_params=(_fused_conv_params(name, act[1]) if act else None) or None, **window_attrs(ctx, op, 2))
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


@exports("conv2d_transpose", "conv3d_transpose")
def conv_transpose(ctx: ExportContext, op: Operator) -> None:
    """ConvTranspose; an ``output_size`` becomes the ``output_padding`` that reaches it."""
    x, w, out = op.input("Input")[0], op.input("Filter")[0], op.output("Output")[0]
    dims = 3 if op.type == "conv3d_transpose" else 2
    window = window_attrs(ctx, op, dims)
    dilations = list(op.attr("dilations"))
    output_padding = list(op.attr("output_padding")) or None
    if op.attr("output_size"):
        if "pads" not in window:
            ctx.fail("output_size with SAME padding is not supported")
        kernel, sizes, target = ctx.shape(w)[2:], ctx.shape(x)[2:], ctx.shape(out)[2:]
        if min(*sizes, *target) < 0:
            ctx.fail(f"output_size needs known spatial dims, {x!r} has shape {list(ctx.shape(x))}")
        pads, strides = window["pads"], window["strides"]
        output_padding = [t - (s * (n - 1) + d * (k - 1) + 1 - pads[i] - pads[i + dims])
                          for i, (t, s, n, d, k) in enumerate(zip(target, strides, sizes, dilations, kernel))]
    bias = op.input("Bias")[0] if op.input("Bias") else None
    ctx.node("ConvTranspose", [x, w] + ([bias] if bias else []), [out], group=op.attr("groups"), dilations=dilations,
             output_padding=output_padding, **window)


@exports("deformable_conv")
def deformable_conv(ctx: ExportContext, op: Operator) -> None:
    """DeformConv takes explicit pads only: SAME's are resolved for the input's spatial dims."""
    if ctx.opset < 19:
        ctx.fail(f"DeformConv needs opset 19 (asked for {ctx.opset})")
    x, w = op.input("Input")[0], op.input("Filter")[0]
    if op.attr("data_format") != "NCHW":
        ctx.fail(f"data_format {op.attr('data_format')} (channels last) is not supported")
    window = window_geometry(ctx.shape(x)[2:], ctx.shape(w)[2:], op.attr("strides"), op.attr("dilations"),
                             op.attr("paddings"), op.attr("padding_algorithm"))
    mask = ["", op.input("Mask")[0]] if op.input("Mask") else []  # no bias: a channel-wise add holds it
    ctx.node("DeformConv", [x, w, op.input("Offset")[0], *mask],
             [op.output("Output")[0]], group=op.attr("groups"), offset_group=op.attr("deformable_groups"),
             dilations=list(window.dilations), strides=list(op.attr("strides")),
             pads=[p[0] for p in window.pads] + [p[1] for p in window.pads], kernel_shape=list(ctx.shape(w)[2:]))
