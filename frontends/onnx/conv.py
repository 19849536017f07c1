"""Converters of ONNX's convolutions: Conv (conv2d, or depthwise_conv2d when each group is one
input channel; conv3d in 3-D) and ConvTranspose (conv2d_transpose; conv3d_transpose in 3-D), in
1-D, 2-D and 3-D, and the 2-D DeformConv (deformable_conv, its offset_group the deformable_groups),
with their bias; padding as ``window``'s."""

from __future__ import annotations

from typing import Any

from onnx import NodeProto

from .context import GraphContext
from .registry import converts
from .window import lifts_1d, spatial_dims, window_attrs, window_paddings

__all__: list[str] = []


def _with_bias(ctx: GraphContext, node: NodeProto, op_type: str, inputs: dict[str, str], attrs: dict[str, Any],
               bias_input: int = 2) -> None:
    """Emit ``op_type`` and, when the node has a bias (input ``bias_input``), Paddle's channel-wise add of it."""
    out = node.output[0]
    has_bias = len(node.input) > bias_input and bool(node.input[bias_input])
    raw = ctx.temp(out) if has_bias else out
    ctx.emit(op_type, inputs, {"Output": raw}, attrs)
    if has_bias:
        ctx.emit("elementwise_add", {"X": raw, "Y": node.input[bias_input]}, {"Out": out}, {"axis": 1})


@converts("Conv", makes=("conv2d", "depthwise_conv2d", "conv3d"))
@lifts_1d
def conv(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """conv2d (depthwise_conv2d when each group is one input channel), or conv3d for a 5-D input."""
    x, w = node.input[0], node.input[1]
    w_shape = ctx.shape(w)
    kernel = list(attrs.get("kernel_shape", w_shape[2:]))
    dilations = list(attrs.get("dilations", [1] * len(kernel)))
    group = attrs.get("group", 1)
    conv_attrs = window_attrs(ctx, node, attrs, kernel, dilations) | {"groups": group, "dilations": dilations}
    channels = ctx.shape(x)[1]
    if len(kernel) == 3:
        _with_bias(ctx, node, "conv3d", {"Input": x, "Filter": w}, conv_attrs | {"data_format": "NCDHW"})
        return
    depthwise = group > 1 and group == channels and w_shape[1] == 1
    _with_bias(ctx, node, "depthwise_conv2d" if depthwise else "conv2d", {"Input": x, "Filter": w}, conv_attrs)


@converts("ConvTranspose", makes=("conv2d_transpose", "conv3d_transpose"))
@lifts_1d
def conv_transpose(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """conv2d_transpose, or conv3d_transpose for a 5-D input."""
    x, w = node.input[0], node.input[1]
    sizes = spatial_dims(ctx, node, x, most=3)
    dims = len(sizes)
    kernel = list(attrs.get("kernel_shape", ctx.shape(w)[2:]))
    strides = list(attrs.get("strides", [1] * dims))
    dilations = list(attrs.get("dilations", [1] * dims))
    output_padding = list(attrs.get("output_padding", [0] * dims))
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if "output_shape" in attrs or attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        if any(s < 0 for s in sizes):
            ctx.fail(f"output_shape/auto_pad need static spatial dims, got {list(sizes)}")
        target = list(attrs["output_shape"])[-dims:] if "output_shape" in attrs else [s * st for s, st in zip(sizes, strides)]
        pads = []
        for size, s, e, op, t in zip(sizes, strides, extents, output_padding, target):
            total = max(s * (size - 1) + op + e - t, 0)
            upper = attrs.get("auto_pad", "NOTSET") == "SAME_UPPER"  # ONNX: otherwise the odd pixel goes first
            pads.append((total // 2, total - total // 2) if upper else (total - total // 2, total // 2))
        paddings = [p for pair in pads for p in pair]
    else:
        paddings, _ = window_paddings(ctx, attrs, sizes, kernel, strides, dilations)
        target = None
    conv_attrs = {"strides": strides, "paddings": paddings, "dilations": dilations, "groups": attrs.get("group", 1)}
    if target is not None:
        conv_attrs["output_size"] = target
    elif any(output_padding):
        conv_attrs["output_padding"] = output_padding
    inputs = {"Input": x, "Filter": w}
    if len(node.input) > 2 and node.input[2]:
        inputs["Bias"] = node.input[2]
    if dims == 3:
        conv_attrs["data_format"] = "NCDHW"
    ctx.emit(f"conv{dims}d_transpose", inputs, {"Output": node.output[0]}, conv_attrs)


@converts("DeformConv", makes="deformable_conv")
def deform_conv(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, w, offset = node.input[:3]
    kernel = list(attrs.get("kernel_shape", ctx.shape(w)[2:]))
    if len(kernel) != 2:
        ctx.fail(f"only the 2-D DeformConv is supported, the kernel is {kernel}")
    dilations = list(attrs.get("dilations", [1, 1]))
    inputs = {"Input": x, "Offset": offset, "Filter": w}
    if len(node.input) > 4 and node.input[4]:
        inputs["Mask"] = node.input[4]
    _with_bias(ctx, node, "deformable_conv", inputs, window_attrs(ctx, node, attrs, kernel, dilations) | {
        "groups": attrs.get("group", 1), "dilations": dilations, "deformable_groups": attrs.get("offset_group", 1)},
               bias_input=3)
