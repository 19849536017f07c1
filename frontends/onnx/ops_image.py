"""Converters of ONNX's image-geometry ops: DepthToSpace and SpaceToDepth (Paddle's
pixel_shuffle / pixel_unshuffle with halfway's block order), GridSample (grid_sampler) and
AffineGrid (affine_grid; a size computed at run time is its OutputShape input)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from halfway.frontends.onnx.context import GraphContext
from halfway.frontends.onnx.registry import converts

__all__: list[str] = []

_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic",
               "cubic": "bicubic"}


@converts("DepthToSpace")
def depth_to_space(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("pixel_shuffle", {"X": node.input[0]}, {"Out": node.output[0]},
             {"upscale_factor": attrs["blocksize"], "mode": attrs.get("mode", "DCR")})


@converts("SpaceToDepth")
def space_to_depth(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("pixel_unshuffle", {"X": node.input[0]}, {"Out": node.output[0]},
             {"downscale_factor": attrs["blocksize"], "mode": "DCR"})


@converts("GridSample")
def grid_sample(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Opset 16 names the modes bilinear and bicubic, 20 linear and cubic."""
    mode = attrs.get("mode", "bilinear")
    if mode not in _GRID_MODES:
        ctx.fail(f"mode {mode!r} is not one of {', '.join(map(repr, _GRID_MODES))}")
    ctx.emit("grid_sampler", {"X": node.input[0], "Grid": node.input[1]}, {"Output": node.output[0]},
             {"mode": _GRID_MODES[mode], "padding_mode": attrs.get("padding_mode", "zeros"),
              "align_corners": bool(attrs.get("align_corners", 0))})


@converts("AffineGrid")
def affine_grid(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    theta, size = node.input
    options: dict[str, Any] = {"align_corners": bool(attrs.get("align_corners", 0))}
    inputs = {"Theta": theta}
    if ctx.is_const(size):
        options["output_shape"] = [int(v) for v in np.asarray(ctx.consts[size]).reshape(-1)]
    else:
        inputs["OutputShape"] = size
    ctx.emit("affine_grid", inputs, {"Output": node.output[0]}, options)
