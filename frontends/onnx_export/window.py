"""What the exporters of the sliding-window ops (convolutions, pools) share: strides and pads.

Padding: Paddle's 4-value ``paddings`` are ``[top, bottom, left, right]`` (2 values: each side
alike), ONNX's ``pads`` ``[top, left, bottom, right]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.operator import Operator
from .context import ExportContext

__all__ = ["onnx_pads", "window_attrs"]


def onnx_pads(ctx: ExportContext, paddings: Sequence[int], spatial: int) -> list[int]:
    if len(paddings) == spatial:
        return [*paddings, *paddings]
    if len(paddings) != 2 * spatial:
        ctx.fail(f"paddings {list(paddings)} must hold {spatial} or {2 * spatial} values")
    return [paddings[2 * i] for i in range(spatial)] + [paddings[2 * i + 1] for i in range(spatial)]


def window_attrs(ctx: ExportContext, op: Operator, spatial: int) -> dict[str, Any]:
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
        window["pads"] = onnx_pads(ctx, op.attr("paddings"), spatial)
    return window
