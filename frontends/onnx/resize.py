"""Converters of ONNX's interpolations: Resize (opsets 10 to 19) and Upsample (7 to 9), to
Paddle's ``*_interp_v2`` ops with halfway's attrs for ONNX's coordinate and rounding modes.

Constant scales and sizes become attrs (``scale``, ``out_d``/``out_h``/``out_w``, or a constant
OutSize past three axes), and axes they leave as they are drop out; scales or sizes computed at
run time are the op's Scale or OutSize input, over every axis they cover. The op type follows the
method and how many axes are resized (linear over 1, 2, 3 axes: linear, bilinear, trilinear).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []

_LINEAR_OPS = {1: "linear_interp_v2", 3: "trilinear_interp_v2"}
_RESIZES = ("nearest_interp_v2", "bilinear_interp_v2", "bicubic_interp_v2", *_LINEAR_OPS.values())
"""The ops Resize and Upsample make, by mode and the number of axes resized."""


def _op_type(ctx: GraphContext, mode: str, count: int) -> str:
    if mode == "nearest":
        return "nearest_interp_v2"
    if mode == "cubic":
        return "bicubic_interp_v2"
    if mode in ("linear", "bilinear"):
        return _LINEAR_OPS.get(count, "bilinear_interp_v2")
    return ctx.fail(f"mode {mode!r} is not one of 'nearest', 'linear', 'cubic'")


def _input(node: NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


def _given(ctx: GraphContext, name: str) -> np.ndarray | str | None:
    """A scales/sizes input: its value when constant (None when absent or empty), else its name."""
    if not name:
        return None
    if not ctx.is_const(name):
        return name
    value = np.asarray(ctx.consts[name]).reshape(-1)
    return value if value.size else None


def _kept(ctx: GraphContext, shape: Sequence[int], axes: list[int], target: np.ndarray, by_sizes: bool,
          roi: list[float], policy: str) -> list[int]:
    """The positions in ``axes`` that constant scales or sizes (``by_sizes``) change (all under an
    aspect policy, which compares the axes, or a crop box)."""
    if policy != "stretch":
        return list(range(len(axes)))
    kept = []
    for i, axis in enumerate(axes):
        cropped = roi and (roi[i], roi[len(axes) + i]) != (0.0, 1.0)
        same = shape[axis] == int(target[i]) if by_sizes else target[i] == 1
        if cropped or not same:
            kept.append(i)
    return kept


def _emit(ctx: GraphContext, node: NodeProto, mode: str, target: np.ndarray | str | None, by_sizes: bool,
          axes: list[int], attrs: dict[str, Any]) -> None:
    """Append the interp op resizing ``axes`` of the node's input to ``target``: the sizes with
    ``by_sizes``, else the scales (a value, or the name of a run-time input)."""
    x, out = node.input[0], node.output[0]
    shape = ctx.shape(x)
    if target is None:
        ctx.fail("neither scales nor sizes is given")
    inputs: dict[str, str] = {"X": x}
    roi = attrs.get("roi", [])
    if isinstance(roi, str):  # a crop box known at run time: every axis resized, the box an input
        inputs["RoiTensor"], roi = roi, []
    if isinstance(target, str):
        inputs["OutSize" if by_sizes else "Scale"] = target
    else:
        kept = (list(range(len(axes))) if "RoiTensor" in inputs else
                _kept(ctx, shape, axes, target, by_sizes, roi, attrs.get("keep_aspect_ratio_policy", "stretch")))
        if not kept:
            ctx.emit("assign", {"X": x}, {"Out": out})
            return
        roi = [roi[i] for i in kept] + [roi[len(axes) + i] for i in kept] if roi else []
        axes = [axes[i] for i in kept]
        if by_sizes:
            values = [int(target[i]) for i in kept]
            if len(values) <= 3:
                attrs.update(zip(("out_d", "out_h", "out_w")[-len(values):], values))
            else:
                inputs["OutSize"] = ctx.add_const(f"{out}.sizes", np.array(values, np.int32))
        else:
            attrs["scale"] = [float(target[i]) for i in kept]
    attrs["roi"] = roi
    if axes != list(range(2, len(shape))):
        attrs["axes"] = axes
    ctx.emit(_op_type(ctx, mode, len(axes)), inputs, {"Out": out}, {"align_corners": False, **attrs})


def _axes(ctx: GraphContext, attrs: dict[str, Any], rank: int) -> list[int]:
    axes = [ctx.axis(a, rank, "an axis") for a in attrs.get("axes", range(rank))]
    if len(set(axes)) != len(axes):
        ctx.fail(f"axes {attrs['axes']} name a dim twice")
    return axes


def _roi(ctx: GraphContext, node: NodeProto, coordinates: str) -> list[float] | str:
    """tf_crop_and_resize's crop box: its values when constant, else the name of the run-time input."""
    if coordinates != "tf_crop_and_resize":
        return []
    if not _input(node, 1):
        return ctx.fail("tf_crop_and_resize needs roi")
    if not ctx.is_const(node.input[1]):
        return str(node.input[1])
    return [float(v) for v in np.asarray(ctx.const(node.input[1], "roi"), np.float32).reshape(-1)]


@converts("Resize", makes=_RESIZES)
def resize(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Opset 10 samples as Upsample does (asymmetric coordinates, nearest rounding down, or up
    when downscaling); 11 on read roi, scales and sizes and the coordinate and rounding modes;
    18 adds antialias, axes and keep_aspect_ratio_policy."""
    mode = attrs.get("mode", "nearest")
    if ctx.opset < 11:
        _upsample_like(ctx, node, mode, _given(ctx, _input(node, 1)))
        return
    rank = len(ctx.shape(node.input[0]))
    coordinates = attrs.get("coordinate_transformation_mode", "half_pixel")
    options = {"coordinate_transformation_mode": coordinates, "roi": _roi(ctx, node, coordinates),
               "nearest_mode": attrs.get("nearest_mode", "round_prefer_floor") if mode == "nearest" else "",
               "cubic_coeff_a": float(attrs.get("cubic_coeff_a", -0.75)),
               "exclude_outside": bool(attrs.get("exclude_outside", 0)),
               "extrapolation_value": float(attrs.get("extrapolation_value", 0.0)),
               "antialias": bool(attrs.get("antialias", 0)),
               "keep_aspect_ratio_policy": attrs.get("keep_aspect_ratio_policy", "stretch")}
    sizes = _given(ctx, _input(node, 3))
    target = sizes if sizes is not None else _given(ctx, _input(node, 2))
    _emit(ctx, node, mode, target, sizes is not None, _axes(ctx, attrs, rank), options)


def _upsample_like(ctx: GraphContext, node: NodeProto, mode: str, scales: np.ndarray | str | None) -> None:
    """Asymmetric coordinates; nearest rounds down, or up where every changed axis shrinks (as
    ONNX Runtime does for Resize-10)."""
    rank = len(ctx.shape(node.input[0]))
    options: dict[str, Any] = {"coordinate_transformation_mode": "asymmetric"}
    if mode == "nearest":
        changed = [] if isinstance(scales, str) or scales is None else [s for s in scales if s != 1]
        options["nearest_mode"] = "ceil" if changed and max(changed) < 1 else "floor"
    _emit(ctx, node, mode, scales, False, list(range(rank)), options)


@converts("Upsample", makes=_RESIZES)
def upsample(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Opset 7 gives the scales as an attr, 9 as an input."""
    if "scales" in attrs:
        scales: np.ndarray | str | None = np.asarray(attrs["scales"], np.float32)
    else:
        scales = _given(ctx, _input(node, 1))
    _upsample_like(ctx, node, attrs.get("mode", "nearest"), scales)
