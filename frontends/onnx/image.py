"""Converters of ONNX's image-geometry ops: DepthToSpace and SpaceToDepth (Paddle's
pixel_shuffle / pixel_unshuffle with halfway's block order), GridSample (grid_sampler),
AffineGrid (affine_grid; a size computed at run time is its OutputShape input), Col2Im (fold)
and CenterCropPad (a slice and a pad; its shape must be constant, the cropped dims static)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []

_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic",
               "cubic": "bicubic"}


@converts("DepthToSpace", makes="pixel_shuffle")
def depth_to_space(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("pixel_shuffle", {"X": node.input[0]}, {"Out": node.output[0]},
             {"upscale_factor": attrs["blocksize"], "mode": attrs.get("mode", "DCR")})


@converts("SpaceToDepth", makes="pixel_unshuffle")
def space_to_depth(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("pixel_unshuffle", {"X": node.input[0]}, {"Out": node.output[0]},
             {"downscale_factor": attrs["blocksize"], "mode": "DCR"})


@converts("GridSample", makes="grid_sampler")
def grid_sample(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Opset 16 names the modes bilinear and bicubic, 20 linear and cubic."""
    mode = attrs.get("mode", "bilinear")
    if mode not in _GRID_MODES:
        ctx.fail(f"mode {mode!r} is not one of {', '.join(map(repr, _GRID_MODES))}")
    ctx.emit("grid_sampler", {"X": node.input[0], "Grid": node.input[1]}, {"Output": node.output[0]},
             {"mode": _GRID_MODES[mode], "padding_mode": attrs.get("padding_mode", "zeros"),
              "align_corners": bool(attrs.get("align_corners", 0))})


@converts("AffineGrid", makes="affine_grid")
def affine_grid(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    theta, size = node.input
    options: dict[str, Any] = {"align_corners": bool(attrs.get("align_corners", 0))}
    inputs = {"Theta": theta}
    if ctx.is_const(size):
        options["output_shape"] = [int(v) for v in np.asarray(ctx.consts[size]).reshape(-1)]
    else:
        inputs["OutputShape"] = size
    ctx.emit("affine_grid", inputs, {"Output": node.output[0]}, options)


def _ints(ctx: GraphContext, name: str, what: str) -> list[int]:
    return [int(v) for v in np.asarray(ctx.const(name, what)).reshape(-1)]


@converts("Col2Im", makes="fold")
def col2im(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The image and block shapes constants (attrs), or computed at run time (fold's tensors)."""
    inputs, options = {"X": node.input[0]}, {}
    if ctx.is_const(node.input[1]) and ctx.is_const(node.input[2]):
        options = {"output_sizes": _ints(ctx, node.input[1], "image_shape"),
                   "kernel_sizes": _ints(ctx, node.input[2], "block_shape")}
    else:
        inputs |= {"OutputSizesTensor": node.input[1], "KernelSizesTensor": node.input[2]}
    for name, target in (("strides", "strides"), ("dilations", "dilations"), ("pads", "paddings")):
        if name in attrs:
            options[target] = list(attrs[name])
    ctx.emit("fold", inputs, {"Y": node.output[0]}, options)


@converts("CenterCropPad", makes=("slice", "pad"))
def center_crop_pad(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Each listed axis cropped to its centre (the extra element at the end) or padded around
    the input (the extra zero at the end)."""
    x, out = node.input[0], node.output[0]
    shape = ctx.shape(x)
    target = _ints(ctx, node.input[1], "shape")
    axes = [ctx.axis(a, len(shape), "an axis") for a in attrs.get("axes", range(len(shape)))]
    if len(target) != len(axes):
        ctx.fail(f"shape {target} must hold one length per axis {axes}")
    if any(shape[a] < 0 for a in axes):
        ctx.static_shape(x, "CenterCropPad")
    crops = [(a, (shape[a] - t) // 2, t) for a, t in zip(axes, target) if t < shape[a]]
    pads = [0] * (2 * len(shape))
    for a, t in zip(axes, target):
        if t > shape[a]:
            pads[2 * a], pads[2 * a + 1] = (t - shape[a]) // 2, t - shape[a] - (t - shape[a]) // 2
    source = x
    if crops:
        source = ctx.temp(out) if any(pads) else out
        ctx.emit("slice", {"Input": x}, {"Out": source}, {"axes": [a for a, _, _ in crops],
                                                          "starts": [s for _, s, _ in crops],
                                                          "ends": [s + t for _, s, t in crops]})
    if any(pads):
        ctx.emit("pad", {"X": source}, {"Out": out}, {"paddings": pads, "pad_value": 0.0})
    elif not crops:
        ctx.emit("assign", {"X": x}, {"Out": out})
