"""numpy kernels of the poolings (``halfway.ir.ops.pool``): pool2d and pool3d.

pool2d: global pooling (or one unpadded window over the whole input) is one reduction;
windows are separable, so a window reduces its ``kh`` row taps, then its ``kw`` column taps
(``kh + kw`` vectorised passes over shifted views of the padded input; rows first, as whole
rows are contiguous runs and the strided column taps then read the fewer rows a strided pool
keeps: 1.3x faster at stride 2); avg scales by a precomputed ``[OH, OW]`` reciprocal count
(Paddle's: the window clipped to the input when ``exclusive``, ``kh * kw`` otherwise).
Adaptive bins (Paddle's ``floor(i * H / oh)`` to ``ceil((i + 1) * H / oh)``) are separable
too: avg is ``A_h @ X @ A_w.T`` with averaging matrices, max a running maximum over the
bins' clamped row then column indices. float16 max pools run on float16 (exact); avg widens.
With numba (``halfway[jit]``), float32 NCHW 3x3 pools run as one compiled loop instead,
channel by channel in cache (``jit_windows``). Dilated and lp pools, and pools whose padded
copy would be more than twice the input, run on ``general_pool`` (no padded copy).

``general_pool``: any number of spatial dims, dilations, max / avg / lp, and no padded copy of
the input — pool3d's kernel, and pool2d's where its fast path does not fit (dilations, lp, or a
padding that would more than double the input). Windows are separable: each spatial axis in turn is reduced over its taps, tap ``t`` of output
``o`` reading input ``o * stride - before + t * dilation``; a tap in the padding is left out
(max), or adds zero (avg, lp). avg divides by Paddle's count (the window
clipped to the input when ``exclusive``, else the kernel size); lp sums ``|x|^p`` and takes the
p-th root at the end. Memory: two arrays the size of the axis' output at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.ops.pool import unpooled_shape
from ...ir.ops.window import window_geometry
from ..registry import Kernel, KernelSpec, Unsupported, register_kernel, widen_float16
from . import jit
from .jit import compiled_pool

__all__ = ["general_pool", "spatial_axes", "adaptive_bins", "pool_counts", "axis_index", "reduce_taps",
           "max_pool_with_index"]


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


def adaptive_bins(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """Paddle's adaptive pooling bins over ``size`` positions: (starts, ends)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def pool_counts(size: int, kernel: int, stride: int, before: int, out: int, exclusive: bool) -> np.ndarray:
    """Per output position along one axis, how many input positions its window averages:
    the window clipped to the input when ``exclusive``, else the kernel size."""
    if not exclusive:
        return np.full(out, kernel)
    starts = np.arange(out) * stride - before
    return np.minimum(starts + kernel, size) - np.maximum(starts, 0)


Index = tuple[Any, ...]


def axis_index(axis: int, index: Any, ndim: int = 4) -> Index:
    """An index tuple selecting ``index`` along ``axis`` and everything elsewhere."""
    return tuple(index if d == axis else slice(None) for d in range(ndim))


def reduce_taps(x: np.ndarray, taps: Sequence[Index], op: np.ufunc) -> np.ndarray:
    """``op`` over the views ``x[tap]``, into a new array."""
    if len(taps) == 1:
        return x[taps[0]].copy()
    acc = op(x[taps[0]], x[taps[1]])
    for tap in taps[2:]:
        op(acc, x[tap], out=acc)
    return acc


def _global_pool(spec: KernelSpec, axes: tuple[int, int]) -> Kernel:
    if spec.attrs["pooling_type"] == "max":
        return lambda x: np.max(x, axis=axes, keepdims=True)
    return lambda x: np.mean(x, axis=axes, keepdims=True)


def _adaptive_pool(spec: KernelSpec, axes: tuple[int, int], sizes: tuple[int, int],
                   out: tuple[int, int]) -> Kernel:
    bins = [adaptive_bins(size, o) for size, o in zip(sizes, out)]
    if spec.attrs["pooling_type"] == "avg":
        dtype = spec.dtype.numpy
        a_h, a_w = [((np.arange(size) >= s[:, None]) & (np.arange(size) < e[:, None])) / (e - s)[:, None]
                    for size, (s, e) in zip(sizes, bins)]
        a_h, a_w = a_h.astype(dtype), a_w.astype(dtype)
        if axes == (2, 3):
            return lambda x: np.matmul(a_h, np.matmul(x, a_w.T))
        return lambda x: np.matmul(a_w, np.matmul(a_h, x.reshape(x.shape[0], sizes[0], -1)).reshape(
            x.shape[0], out[0], sizes[1], -1))
    taps = []
    for axis, (starts, ends) in zip(axes, bins):
        widest = int((ends - starts).max())
        taps.append([axis_index(axis, np.minimum(starts + t, ends - 1)) for t in range(widest)])
    return lambda x: reduce_taps(reduce_taps(x, taps[1], np.maximum), taps[0], np.maximum)


def _window_pool(spec: KernelSpec, axes: tuple[int, int], sizes: tuple[int, int]) -> Kernel:
    attrs = spec.attrs
    ksize, strides = attrs["ksize"], attrs["strides"]
    window = window_geometry(sizes, ksize, strides, (1, 1), attrs["paddings"], attrs["padding_algorithm"],
                             attrs["ceil_mode"])
    is_max = attrs["pooling_type"] == "max"
    # the padded extent every window fits in (ceil_mode windows may overhang the padding)
    extents = [max(size + before + after, (o - 1) * s + k)
               for size, (before, after), o, s, k in zip(sizes, window.pads, window.out, strides, ksize)]
    x_shape = spec.input("X").shape
    padded_shape = tuple(extents[axes.index(d)] if d in axes else n for d, n in enumerate(x_shape))
    inner = tuple(slice(window.pads[axes.index(d)][0], window.pads[axes.index(d)][0] + n) if d in axes
                  else slice(None) for d, n in enumerate(x_shape))
    needs_pad = padded_shape != tuple(x_shape)
    if math.prod(padded_shape) > 2 * math.prod(x_shape):  # a small map widely padded: pad nothing
        return general_pool(spec)
    fill = (-np.inf if spec.dtype.is_floating else np.iinfo(spec.dtype.numpy).min) if is_max else 0
    taps = [[axis_index(axis, slice(t, t + (o - 1) * s + 1, s)) for t in range(k)]
            for axis, o, s, k in zip(axes, window.out, strides, ksize)]
    op = np.maximum if is_max else np.add
    scale = None
    if not is_max:
        counts = [pool_counts(size, k, s, before, o, attrs["exclusive"])
                  for size, k, s, (before, _), o in zip(sizes, ksize, strides, window.pads, window.out)]
        with np.errstate(divide="ignore"):
            scale = (1 / np.outer(*counts)).astype(spec.dtype.numpy)
        scale = scale[:, :, None] if axes == (1, 2) else scale

    compiled = axes == (2, 3) and tuple(ksize) == (3, 3) and spec.dtype.is_floating and jit.JIT  # read at prepare, as the epilogues'
    pads = (window.pads[0][0], window.pads[1][0])

    def run(x: np.ndarray) -> np.ndarray:
        if compiled:
            out = np.empty((*x.shape[:2], *window.out), x.dtype)
            if compiled_pool(tuple(ksize), pads, tuple(strides), scale, out, x):
                return out
        if needs_pad:
            padded = np.full(padded_shape, fill, x.dtype)
            padded[inner] = x
            x = padded
        out = reduce_taps(reduce_taps(x, taps[0], op), taps[1], op)
        if scale is not None:
            out *= scale
        return out

    return run


def _whole_window(attrs: Any, sizes: tuple[int, int], out: tuple[int, int]) -> bool:
    """One unpadded window over the whole input (a classifier's final 7x7 pool): a global pool.
    An adaptive pool's ksize is its output size, no window."""
    if attrs["adaptive"] or out != (1, 1):
        return False
    window = window_geometry(sizes, attrs["ksize"], attrs["strides"], (1, 1), attrs["paddings"],
                             attrs["padding_algorithm"], attrs["ceil_mode"])
    return out == (1, 1) and tuple(attrs["ksize"]) == sizes and not any(p for pair in window.pads for p in pair)


def _pool(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    axes = (1, 2) if attrs["data_format"] == "NHWC" else (2, 3)
    x_shape = spec.input("X").shape
    sizes = (x_shape[axes[0]], x_shape[axes[1]])
    out_shape = spec.output("Out").shape
    out = (out_shape[axes[0]], out_shape[axes[1]])
    dilated = any(d != 1 for d in attrs["dilations"]) and not (attrs["global_pooling"] or attrs["adaptive"])
    if attrs["pooling_type"] == "lp" or dilated:
        return general_pool(spec)
    if attrs["global_pooling"] or (attrs["adaptive"] and out == (1, 1)) or _whole_window(attrs, sizes, out):
        return _global_pool(spec, axes)
    if attrs["adaptive"]:
        return _adaptive_pool(spec, axes, sizes, out)
    return _window_pool(spec, axes, sizes)


@register_kernel("pool2d", dtypes=(DType.float32,))
def pool2d(spec: KernelSpec) -> Kernel:
    return _pool(spec)


@register_kernel("pool2d", dtypes=(DType.float16,))
def pool2d_float16(spec: KernelSpec) -> Kernel:
    """Max pooling selects values, so it runs on float16 as is; avg accumulates in float32."""
    return _pool(spec) if spec.attrs["pooling_type"] == "max" else widen_float16(pool2d)(spec)


@register_kernel("pool2d", dtypes=(DType.int8, DType.uint8))
def pool2d_bytes(spec: KernelSpec) -> Kernel:
    """Max pooling of int8 / uint8 maps (ONNX's MaxPool takes them); an average is refused."""
    if spec.attrs["pooling_type"] != "max":
        raise Unsupported(f"pool2d: {spec.attrs['pooling_type']} pooling of {spec.dtype.name}; max pooling only")
    return _pool(spec)


def max_pool_with_index(spec: KernelSpec) -> Kernel:
    """max_pool2d_with_index: every window of the input padded with -inf, its flattened taps'
    argmax (the first of equals) giving the maximum and, from the tap, its row and column."""
    attrs = spec.attrs
    n, c, h, w = spec.input("X").shape
    if attrs["adaptive"]:
        raise Unsupported("max_pool2d_with_index: adaptive pooling has no kernel")
    pads: tuple[tuple[int, int], ...] = ((0, 0), (0, 0))
    if attrs["global_pooling"]:
        (kh, kw), (sh, sw), (oh, ow) = (h, w), (1, 1), (1, 1)
    else:
        (kh, kw), (sh, sw) = attrs["ksize"], attrs["strides"]
        window = window_geometry((h, w), (kh, kw), (sh, sw), (1, 1), attrs["paddings"])
        pads, (oh, ow) = window.pads, window.out
    (top, _), (left, _) = pads
    padded_shape = (n, c, max(h + sum(pads[0]), (oh - 1) * sh + kh), max(w + sum(pads[1]), (ow - 1) * sw + kw))
    rows, cols = np.arange(oh)[:, None] * sh - top, np.arange(ow) * sw - left

    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        padded = np.full(padded_shape, -np.inf, x.dtype)
        padded[:, :, top:top + h, left:left + w] = x
        windows = sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw][:, :, :oh, :ow]
        taps = windows.reshape(n, c, oh, ow, kh * kw)
        best = taps.argmax(axis=-1)
        i, j = np.divmod(best, kw)
        mask = ((rows + i) * w + cols + j).astype(np.int32)
        return np.take_along_axis(taps, best[..., None], axis=-1)[..., 0], mask

    return run


register_kernel("max_pool2d_with_index", dtypes=(DType.float32, DType.float64))(max_pool_with_index)
register_kernel("max_pool2d_with_index", dtypes=(DType.float16,))(max_pool_with_index)  # selects: exact in float16


@register_kernel("max_unpool", dtypes=(DType.float32, DType.float16, DType.float64))
def _max_unpool(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    inverse = unpooled_shape(spec.input("X").shape, attrs["ksize"], attrs["strides"], attrs["paddings"])

    def run(x: np.ndarray, index: np.ndarray, *shape: np.ndarray) -> np.ndarray:
        unpooled = np.zeros(math.prod(inverse), x.dtype)
        flat = index.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= unpooled.size):
            raise HalfwayError(f"max_unpool: an index is outside the {unpooled.size} elements of {inverse}")
        unpooled[flat] = x.reshape(-1)
        if not shape:
            return unpooled.reshape(inverse)
        out = np.zeros(tuple(int(d) for d in shape[0].reshape(-1)), x.dtype)
        out[tuple(slice(0, d) for d in inverse)] = unpooled.reshape(inverse)
        return out

    return run
