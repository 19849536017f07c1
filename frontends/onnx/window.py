"""What the converters of ONNX's sliding-window ops (Conv, ConvTranspose, the pools) share: their
spatial dims, their 1-D forms run as 2-D ones, and their padding.

Padding: ONNX ``pads`` are ``[x1_begin, x2_begin, x1_end, x2_end]``; Paddle's 4-value
``paddings`` are ``[top, bottom, left, right]``. ``auto_pad`` SAME_UPPER/SAME_LOWER are
resolved to explicit pads from the static input size (dilations included, as ONNX counts
them); with an unknown size, SAME_UPPER without dilation maps to Paddle's ``SAME``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, helper

from .context import GraphContext
from .registry import Converter

__all__ = ["spatial_dims", "lifts_1d", "window_paddings", "window_attrs"]


def spatial_dims(ctx: GraphContext, node: NodeProto, x: str, most: int = 2) -> tuple[int, ...]:
    """The spatial dims of ``x``, the input of a window over 2 to ``most`` of them (1-D ones are
    lifted to 2-D first: ``lifts_1d``)."""
    shape = ctx.shape(x)
    if not 4 <= len(shape) <= most + 2:
        forms = ["1-D", "2-D", "3-D"][:most]
        ctx.fail(f"only {', '.join(forms[:-1])} and {forms[-1]} {node.op_type} (a "
                 f"{', '.join(f'{d + 2}-D' for d in range(1, most))} or {most + 2}-D input) are supported, "
                 f"input {x!r} has shape {list(shape)}")
    return shape[2:]


_WINDOW_LISTS = ("kernel_shape", "strides", "dilations", "output_padding", "output_shape")


def lifts_1d(convert: Converter) -> Converter:
    """Let a 2-D window converter take 1-D nodes: [N, C, L] runs as [N, C, 1, L] (and a
    [O, I, k] filter as [O, I, 1, k]), the unit dim squeezed away after."""

    @functools.wraps(convert)
    def wrapper(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
        if len(ctx.shape(node.input[0])) != 3:
            return convert(ctx, node, attrs)
        if any(ctx.is_used(node, i) for i in range(1, len(node.output))):
            ctx.fail(f"only the first output of a 1-D {node.op_type} is supported")
        inputs = [_unit_height(ctx, name) if i < 2 and name else name for i, name in enumerate(node.input)]
        if node.op_type not in ("Conv", "ConvTranspose"):
            inputs[1:] = node.input[1:]
        lifted = {k: [1, *v] if k in _WINDOW_LISTS else v for k, v in attrs.items()}
        if "pads" in attrs:
            lifted["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
        out = ctx.temp(node.output[0])
        convert(ctx, helper.make_node(node.op_type, inputs, [out, *node.output[1:]], name=node.name), lifted)
        ctx.emit("squeeze2", {"X": out}, {"Out": node.output[0]}, {"axes": [2]})
        return None

    return wrapper


def _unit_height(ctx: GraphContext, name: str) -> str:
    if ctx.is_const(name):
        return ctx.add_const(f"{name}.2d", np.expand_dims(ctx.consts[name], 2))
    lifted = ctx.temp(f"{name}.2d")
    ctx.emit("unsqueeze2", {"X": name}, {"Out": lifted}, {"axes": [2]})
    return lifted


def window_paddings(ctx: GraphContext, attrs: dict[str, Any], sizes: Sequence[int], kernel: Sequence[int],
              strides: Sequence[int], dilations: Sequence[int]) -> tuple[list[int], str]:
    """(Paddle ``paddings``, ``padding_algorithm``) for a window over ``sizes``."""
    auto_pad, n = attrs.get("auto_pad", "NOTSET"), len(sizes)
    if auto_pad == "VALID":
        return [0] * (2 * n), "EXPLICIT"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if any(s < 0 for s in sizes):
            if auto_pad == "SAME_UPPER" and all(d == 1 for d in dilations):
                return [0] * (2 * n), "SAME"
            ctx.fail(f"auto_pad {auto_pad} needs static spatial dims, got {list(sizes)}")
        pads = []
        for size, k, s, d in zip(sizes, kernel, strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return [p for pair in pads for p in pair], "EXPLICIT"
    if auto_pad != "NOTSET":
        ctx.fail(f"unknown auto_pad {auto_pad!r}")
    onnx_pads = list(attrs.get("pads", [0] * (2 * n)))
    return [p for i in range(n) for p in (onnx_pads[i], onnx_pads[n + i])], "EXPLICIT"


def window_attrs(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], kernel: Sequence[int],
                  dilations: Sequence[int]) -> dict[str, Any]:
    sizes = spatial_dims(ctx, node, node.input[0], most=3)
    strides = list(attrs.get("strides", [1] * len(sizes)))
    paddings, algorithm = window_paddings(ctx, attrs, sizes, kernel, strides, dilations)
    return {"strides": strides, "paddings": paddings, "padding_algorithm": algorithm}
