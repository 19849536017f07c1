"""Schemas of the interpolations: nearest_interp_v2, linear_interp_v2, bilinear_interp_v2,
trilinear_interp_v2 and bicubic_interp_v2 — Paddle's op types, slots (X, OutSize, SizeTensor,
Scale -> Out), attrs and defaults, plus halfway attrs that express ONNX Resize exactly.

The output size, by priority (Paddle's): SizeTensor (one scalar per resized axis), OutSize (a 1-D
tensor), the Scale tensor or ``scale`` attr (out = floor(in * scale), the product in float32 as ONNX
Runtime and Paddle take it), else ``out_d``/``out_h``/``out_w`` (the last ones, one per resized
axis). The resized axes are ``axes`` when given, else the spatial dims of ``data_layout``.

Source coordinates: with ``coordinate_transformation_mode`` empty, Paddle's rule from
``align_corners`` and ``align_mode``; else ONNX Resize's mode of that name, where the scale of an
axis is the given one, or out / in when only sizes are given (``resize_plan`` resolves both).
``nearest_mode`` empty is Paddle's rounding: half up with ``align_corners``, else floor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from attrs import frozen

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op

__all__ = ["INTERP_OPS", "ResizeAxis", "resize_plan", "resized_axes"]

INTERP_OPS = {"nearest_interp_v2": "nearest", "linear_interp_v2": "linear", "bilinear_interp_v2": "linear",
              "trilinear_interp_v2": "linear", "bicubic_interp_v2": "cubic"}
"""Op type -> its interpolation (linear for the 1-, 2- and 3-D names alike)."""

COORDINATE_MODES = ("", "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")
NEAREST_MODES = ("", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")


@frozen
class ResizeAxis:
    """How one axis is resized: its input and output lengths, the scale its source coordinates
    divide by, the ONNX coordinate mode, and the crop box [start, end] (tf_crop_and_resize)."""

    axis: int
    size_in: int
    size_out: int
    scale: float
    mode: str
    roi: tuple[float, float] = (0.0, 1.0)

    @property
    def identity(self) -> bool:
        return (self.size_out == self.size_in and self.scale == 1.0 and self.mode != "tf_crop_and_resize")


def resized_axes(attrs: Mapping[str, Any], rank: int) -> list[int]:
    """The axes the op resizes: ``axes`` (negative counted from the end), else the spatial dims."""
    if attrs["axes"]:
        return [a % rank for a in attrs["axes"]]
    return list(range(2, rank)) if attrs["data_layout"] == "NCHW" else list(range(1, rank - 1))


def _coordinate_mode(attrs: Mapping[str, Any], method: str) -> str:
    """The ONNX mode of the op's source coordinates ("" = from align_corners and align_mode)."""
    if attrs["coordinate_transformation_mode"]:
        return str(attrs["coordinate_transformation_mode"])
    if attrs["align_corners"]:
        return "align_corners"
    if method == "cubic" or method == "linear" and attrs["align_mode"] == 0:
        return "half_pixel"
    return "asymmetric"


def _scales(attrs: Mapping[str, Any], scale: np.ndarray | None, count: int) -> list[float] | None:
    values = [float(v) for v in np.asarray(scale, np.float32).reshape(-1)] if scale is not None else \
        [float(np.float32(v)) for v in attrs["scale"]]
    if not values or min(values) <= 0:
        return None
    return values * count if len(values) == 1 else values


def _sizes(attrs: Mapping[str, Any], sizes: Sequence[int] | None, count: int) -> list[int]:
    if sizes is not None:
        return [int(s) for s in sizes]
    return [attrs["out_d"], attrs["out_h"], attrs["out_w"]][-count:] if 0 < count <= 3 else []


def resize_plan(op_type: str, attrs: Mapping[str, Any], shape: Sequence[int], sizes: Sequence[int] | None,
                scale: np.ndarray | None) -> list[ResizeAxis]:
    """Per resized axis, how it is resized; ``sizes`` (from SizeTensor or OutSize) and ``scale``
    (the Scale tensor) are the run-time inputs' values, None when absent. A dim of -1 (unknown)
    gives an output length of -1.

    Raises:
        ValueError: the sizes or scales do not hold one value per resized axis, or are not positive.
    """
    axes = resized_axes(attrs, len(shape))
    method, dims = INTERP_OPS[op_type], [shape[a] for a in axes]
    mode = _coordinate_mode(attrs, method)
    scales, outs = _scales(attrs, scale, len(axes)), _sizes(attrs, sizes, len(axes))
    if sizes is None and scales is not None:
        _check_count("scales", scales, axes)
        outs = [math.floor(np.float32(d) * np.float32(s)) if d >= 0 else -1 for d, s in zip(dims, scales)]
    else:
        _check_count("output sizes", outs, axes)
        if min(outs, default=1) <= 0:
            raise ValueError(f"output sizes {outs} must be positive")
        if scales is None:
            scales, outs = _fitted(attrs["keep_aspect_ratio_policy"], dims, outs)
        else:  # Paddle's sizes over scales: the scales still place the source coordinates
            _check_count("scales", scales, axes)
    if not attrs["coordinate_transformation_mode"] and attrs["align_corners"]:
        scales = [o / d if d > 0 else 1.0 for d, o in zip(dims, outs)]  # Paddle's corners: (in - 1) / (out - 1)
    rois = _rois(attrs["roi"], len(axes))
    return [ResizeAxis(a, d, o, s, mode, r) for a, d, o, s, r in zip(axes, dims, outs, scales, rois)]


def _check_count(what: str, values: Sequence[Any], axes: Sequence[int]) -> None:
    if len(values) != len(axes):
        raise ValueError(f"{what} {list(values)} must hold one value per resized axis {list(axes)}")


def _fitted(policy: str, dims: Sequence[int], outs: Sequence[int]) -> tuple[list[float], list[int]]:
    """(scales, output lengths) for the wanted lengths ``outs``: out / in per axis, or under
    ONNX's keep_aspect_ratio_policy one scale for all axes (the smallest or largest ratio), the
    lengths rounded half up."""
    if any(d < 0 for d in dims):
        return [1.0] * len(dims), [o if policy == "stretch" else -1 for o in outs]
    ratios = [o / d for d, o in zip(dims, outs)]
    if policy == "stretch":
        return ratios, list(outs)
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    return [scale] * len(dims), [int(scale * d + 0.5) for d in dims]


def _rois(roi: Sequence[float], count: int) -> list[tuple[float, float]]:
    if not roi:
        return [(0.0, 1.0)] * count
    return [(float(np.float32(roi[i])), float(np.float32(roi[count + i]))) for i in range(count)]


def _run_time_sizes(ctx: InferContext) -> tuple[bool, list[int] | None]:
    """(whether the op takes sizes from a tensor, their values when known)."""
    if ctx.has_input("SizeTensor"):
        values = [ctx.input_value("SizeTensor", i) for i in range(len(ctx.inputs("SizeTensor")))]
        return True, None if any(v is None for v in values) else [int(np.asarray(v).reshape(-1)[0]) for v in values]
    if ctx.has_input("OutSize"):
        value = ctx.input_value("OutSize")
        return True, None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
    return False, None


def _infer_interp(ctx: InferContext) -> None:
    x = ctx.input("X")
    rank = len(x.shape)
    ctx.check(rank >= 1 and (ctx.attr("axes") or rank >= 3), f"X must have rank >= 3, has shape {list(x.shape)}")
    attrs = {spec.name: ctx.attr(spec.name) for spec in ctx.schema.attrs}
    ctx.check(all(-rank <= a < rank for a in attrs["axes"]), f"attr axes {attrs['axes']} are not dims of X {list(x.shape)}")
    axes = resized_axes(attrs, rank)
    ctx.check(len(set(axes)) == len(axes), f"attr axes {attrs['axes']} name a dim twice")
    ctx.check(not attrs["roi"] or len(attrs["roi"]) == 2 * len(axes),
              f"attr roi {attrs['roi']} must hold a start and an end per resized axis")
    for slot in ("OutSize", "SizeTensor"):
        for info in ctx.inputs(slot):
            ctx.check(info.dtype in (DType.int32, DType.int64), f"input {slot!r} must be int32 or int64")
    from_tensor, sizes = _run_time_sizes(ctx)
    scale = ctx.input_value("Scale") if ctx.has_input("Scale") else None
    out = list(x.shape)
    if from_tensor and sizes is None or ctx.has_input("Scale") and scale is None and not from_tensor:
        for a in axes:
            out[a] = -1
    else:
        try:
            plan = resize_plan(ctx.op_type, attrs, x.shape, sizes, scale)
        except ValueError as e:
            ctx.fail(str(e))
        for item in plan:
            out[item.axis] = item.size_out
    ctx.set_output("Out", out, x.dtype)


def _attrs(method: str) -> list[AttrSpec]:
    return [
        AttrSpec("data_layout", AttrType.STRING, "NCHW", choices=("NCHW", "NHWC")),
        AttrSpec("out_d", AttrType.INT, 0), AttrSpec("out_h", AttrType.INT, 0), AttrSpec("out_w", AttrType.INT, 0),
        AttrSpec("scale", AttrType.FLOATS, []), AttrSpec("interp_method", AttrType.STRING, method),
        AttrSpec("align_corners", AttrType.BOOLEAN, True), AttrSpec("align_mode", AttrType.INT, 1),
        AttrSpec("coordinate_transformation_mode", AttrType.STRING, "", choices=COORDINATE_MODES),
        AttrSpec("nearest_mode", AttrType.STRING, "", choices=NEAREST_MODES),
        AttrSpec("cubic_coeff_a", AttrType.FLOAT, -0.75), AttrSpec("exclude_outside", AttrType.BOOLEAN, False),
        AttrSpec("extrapolation_value", AttrType.FLOAT, 0.0), AttrSpec("antialias", AttrType.BOOLEAN, False),
        AttrSpec("roi", AttrType.FLOATS, []), AttrSpec("axes", AttrType.INTS, []),
        AttrSpec("keep_aspect_ratio_policy", AttrType.STRING, "stretch", choices=ASPECT_POLICIES),
    ]


_METHOD_NAMES = {"nearest_interp_v2": "nearest", "linear_interp_v2": "linear", "bilinear_interp_v2": "bilinear",
                 "trilinear_interp_v2": "trilinear", "bicubic_interp_v2": "bicubic"}

for _op_type, _method in _METHOD_NAMES.items():
    register_op(OpSchema(
        _op_type, inputs=[Slot("X"), Slot("OutSize", dispensable=True),
                          Slot("SizeTensor", duplicable=True, dispensable=True), Slot("Scale", dispensable=True),
                          Slot("RoiTensor", dispensable=True)],
        outputs=[Slot("Out")], attrs=_attrs(_method), infer=_infer_interp,
        keep_dtype_slots=("OutSize", "SizeTensor", "Scale", "RoiTensor"),
        doc=f"Out = X resized by {_method} interpolation along the spatial dims (or `axes`); sizes from "
            f"SizeTensor, OutSize, Scale / scale or out_d/out_h/out_w, source coordinates by align_corners and "
            f"align_mode or ONNX's coordinate_transformation_mode; RoiTensor (a halfway slot) is tf_crop_and_resize's "
            f"crop box computed at run time, in place of the roi attr.",
    ))
