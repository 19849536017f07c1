"""Exporters of the interpolations (``*_interp_v2``) as ONNX Resize over the full rank, the
leading dims keeping their size; from opset 18, over the resized axes alone (``axes``) where they
are not the trailing ones or an aspect ratio policy applies (it takes the ratio over the listed axes).

Sizes come from OutSize, else the Scale tensor or ``scale`` attr, else ``out_d``/``out_h``/
``out_w``; an empty ``coordinate_transformation_mode`` (Paddle's rule) maps to ONNX's mode:
``align_corners``, else ``asymmetric`` (align_mode 1) or ``half_pixel`` (align_mode 0).
"""

from __future__ import annotations

import numpy as np

from ...ir.operator import Operator
from ...ir.ops.resize import INTERP_OPS, resized_axes
from .context import ExportContext
from .registry import exports

__all__: list[str] = []

_MODES = {"nearest": "nearest", "linear": "linear", "cubic": "cubic"}


def _coordinates(op: Operator) -> tuple[str, str]:
    """(coordinate_transformation_mode, nearest_mode) in ONNX's words."""
    mode, nearest = op.attr("coordinate_transformation_mode"), op.attr("nearest_mode")
    if not mode:
        mode = "align_corners" if op.attr("align_corners") else (
            "asymmetric" if op.attr("align_mode") == 1 or INTERP_OPS[op.type] == "nearest" else "half_pixel")
    if not nearest:
        nearest = "round_prefer_ceil" if op.attr("align_corners") else "floor"
    return mode, nearest


def _leading_shape(ctx: ExportContext, x: str, count: int) -> str:
    return ctx.node("Slice", [ctx.node("Shape", [x]), ctx.ints([0]), ctx.ints([count])])


@exports(*INTERP_OPS)
def interp(ctx: ExportContext, op: Operator) -> None:
    x, out = op.input("X")[0], op.output("Out")[0]
    if op.input("SizeTensor") if "SizeTensor" in op.inputs else False:
        ctx.fail("SizeTensor (one scalar per axis) is not supported; give OutSize")
    if op.attr("data_layout") != "NCHW":
        ctx.fail(f"data_layout {op.attr('data_layout')} is not supported")
    rank = ctx.rank(x)
    attrs = {name: op.attr(name) for name in ("axes", "data_layout")}
    axes = resized_axes(attrs, rank)
    policy = op.attr("keep_aspect_ratio_policy")
    # from opset 18 Resize takes the resized axes; the aspect ratio policy must see those alone
    box = next(iter(op.inputs.get("RoiTensor", ())), "")  # tf_crop_and_resize's box, computed at run time
    listed = ctx.opset >= 18 and (axes != list(range(rank - len(axes), rank)) or policy != "stretch" or bool(box))
    lead = 0 if listed else rank - len(axes)
    if axes != list(range(lead, rank)) and not listed:
        ctx.fail(f"resized axes {axes} are not the trailing dims of {x!r} (opset 18 takes them; asked for {ctx.opset})")
    scales, sizes = "", ""
    out_size = op.input("OutSize")[0] if op.input("OutSize") else None
    scale_tensor = op.input("Scale")[0] if op.input("Scale") else None
    if out_size:
        sizes = ctx.node("Concat", [_leading_shape(ctx, x, lead), ctx.int64(out_size)], axis=0) if lead else ctx.int64(
            out_size)
    elif scale_tensor or op.attr("scale"):
        given = scale_tensor or ctx.const(np.asarray(op.attr("scale"), np.float32))
        scales = ctx.node("Concat", [ctx.const(np.ones(lead, np.float32)), given], axis=0) if lead else given
    else:
        wanted = [op.attr(name) for name in ("out_d", "out_h", "out_w")][-len(axes):]
        sizes = ctx.node("Concat", [_leading_shape(ctx, x, lead), ctx.ints(wanted)], axis=0) if lead else ctx.ints(
            wanted)
    mode, nearest = _coordinates(op)
    roi = box
    if box and lead:
        ctx.fail(f"a crop box computed at run time (RoiTensor) of axes {axes} of a rank-{rank} X needs opset 18 "
                 f"(asked for {ctx.opset})")
    if not box and op.attr("roi"):
        corners = [float(v) for v in op.attr("roi")]
        roi = ctx.const(np.asarray([0.0] * lead + corners[:len(axes)] + [1.0] * lead + corners[len(axes):], np.float32))
    method = INTERP_OPS[op.type]
    ctx.node("Resize", [x, roi, scales, sizes], [out], mode=_MODES[method], coordinate_transformation_mode=mode,
             nearest_mode=nearest if method == "nearest" else None,
             cubic_coeff_a=float(op.attr("cubic_coeff_a")) if method == "cubic" else None,
             exclude_outside=int(op.attr("exclude_outside")) or None,
             extrapolation_value=float(op.attr("extrapolation_value")) or None,
             antialias=int(op.attr("antialias")) or None, axes=axes if listed else None,
             keep_aspect_ratio_policy=policy if policy != "stretch" else None)
