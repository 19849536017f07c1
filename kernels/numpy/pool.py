"""The general numpy window pool: any number of spatial dims, dilations, max / avg / lp, and no
padded copy of the input — pool3d's kernel, and pool2d's where its fast path does not fit
(dilations, lp, or a padding that would more than double the input).

Windows are separable: each spatial axis in turn is reduced over its taps, tap ``t`` of output
``o`` reading input ``o * stride - before + t * dilation``; a tap in the padding is left out
(max), or adds zero (avg, lp). avg divides by Paddle's count (the window
clipped to the input when ``exclusive``, else the kernel size); lp sums ``|x|^p`` and takes the
p-th root at the end. Memory: two arrays the size of the axis' output at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.nn import window_geometry
from ..registry import Kernel, KernelSpec, register_kernel

__all__ = ["general_pool", "spatial_axes"]


def spatial_axes(data_format: str, rank: int) -> tuple[int, ...]:
    """The spatial axes of a pool's input under ``data_format``."""
    return tuple(range(1, rank - 1)) if data_format in ("NHWC", "NDHWC") else tuple(range(2, rank))


def _reduce_axis(x: np.ndarray, axis: int, taps: np.ndarray, inside: np.ndarray, kind: str) -> np.ndarray:
    """``x`` reduced along ``axis`` over the (out, k) tap indices ``taps`` (``inside``: which read X)."""
    shape = [1] * x.ndim
    shape[axis] = -1
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    fill = lowest if kind == "max" else 0
    acc = None
    for t in range(taps.shape[1]):
        values = np.take(x, np.clip(taps[:, t], 0, x.shape[axis] - 1), axis)
        if not inside[:, t].all():
            values = np.where(inside[:, t].reshape(shape), values, x.dtype.type(fill))
        if acc is None:
            acc = values
        elif kind == "max":
            np.maximum(acc, values, out=acc)
        else:
            acc += values
    return acc


def general_pool(spec: KernelSpec) -> Kernel:
    """The kernel of a pool2d or pool3d op (see the module docstring)."""
    attrs = spec.attrs
    x_shape = spec.input("X").shape
    axes = spatial_axes(attrs["data_format"], len(x_shape))
    kind, p = attrs["pooling_type"], float(attrs["norm_type"])
    if attrs["global_pooling"]:
        sizes, ksize, strides, dilations, pads = [x_shape[a] for a in axes], [x_shape[a] for a in axes], \
            [1] * len(axes), [1] * len(axes), [(0, 0)] * len(axes)
        out = [1] * len(axes)
    else:
        sizes, ksize, strides = [x_shape[a] for a in axes], list(attrs["ksize"]), list(attrs["strides"])
        window = window_geometry(sizes, ksize, strides, list(attrs["dilations"]) or [1] * len(axes), attrs["paddings"],
                                 attrs["padding_algorithm"], attrs["ceil_mode"])
        dilations, pads, out = list(window.dilations), list(window.pads), list(window.out)
    tables = []
    for size, k, s, d, (before, _), o in zip(sizes, ksize, strides, dilations, pads, out):
        taps = (np.arange(o) * s - before)[:, None] + np.arange(k) * d
        tables.append((taps, (taps >= 0) & (taps < size)))
    scale = None
    if kind == "avg":
        counts = [inside.sum(axis=1) if attrs["exclusive"] else np.full(len(inside), taps.shape[1])
                  for taps, inside in tables]
        scale = _outer(counts, axes, len(x_shape))

    def run(x: np.ndarray) -> np.ndarray:
        y = np.abs(x) ** x.dtype.type(p) if kind == "lp" else x
        for axis, (taps, inside) in zip(axes, tables):
            y = _reduce_axis(y, axis, taps, inside, kind)
        if kind == "lp":
            return y ** x.dtype.type(1 / p)
        return y / scale.astype(x.dtype) if scale is not None else y

    return run


def _outer(counts: Sequence[np.ndarray], axes: Sequence[int], rank: int) -> np.ndarray:
    """The product of per-axis counts, shaped to broadcast over a pool's output."""
    total = np.ones([1] * rank)
    for axis, count in zip(axes, counts):
        shape = [1] * rank
        shape[axis] = -1
        total = total * count.reshape(shape)
    return total


register_kernel("pool3d", dtypes=(DType.float32, DType.float16, DType.float64))(general_pool)
