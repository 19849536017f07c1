"""numpy kernels of the nn ops (``halfway.ir.ops.nn``). The convolutions and the fused epilogue
live in ``conv``; this module holds pooling, normalisation, padding, dropout, softmax and the
matrix products.

* pool2d: global pooling (or one unpadded window over the whole input) is one reduction;
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
  copy would be more than twice the input, run on ``pool.general_pool`` (no padded copy).
* batch_norm (inference): ``Y = X * a + b`` with ``a = Scale / sqrt(Variance + eps)`` and
  ``b = Bias - Mean * a`` per channel, computed once at prepare when the statistics are
  parameters, else per call.
  MeanOut and VarianceOut are the Mean and Variance inputs themselves, SavedMean is Mean and
  SavedVariance the inverse standard deviation ``1 / sqrt(Variance + eps)`` (what Paddle
  saves in training), ReserveSpace None.
* lrn: Paddle's ``MidOut = k + alpha * sum of X^2 over n channels``, ``Out = X * MidOut^-beta``.
* pad3d: numpy's pad (constant / reflect / edge / wrap for Paddle's circular); pad: numpy's
  constant pad of every dim.
* dropout (inference): ``X * (1 - p)`` (downgrade_in_infer) or X itself (upscale_in_train);
  Mask, when the op has one, is all ones (uint8).
* softmax: ``exp(X - max)`` normalised, along any axis.
* matmul_v2, mul, fc: one BLAS matmul; fc applies its bias and activation through the conv
  epilogue, in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.nn import window_geometry
from ..registry import Kernel, KernelSpec, Unsupported, register_kernel, widen_float16
from . import jit, products
from .conv import make_epilogue, slot_positions  # and registers the convolutions
from .jit import compiled_pool, compiled_softmax
from .pool import general_pool

__all__ = ["adaptive_bins", "pool_counts"]

Index = tuple[Any, ...]


# -- pool2d ---------------------------------------------------------------------------------------
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


def _at(axis: int, index: Any, ndim: int = 4) -> Index:
    """An index tuple selecting ``index`` along ``axis`` and everything elsewhere."""
    return tuple(index if d == axis else slice(None) for d in range(ndim))


def _reduce_taps(x: np.ndarray, taps: Sequence[Index], op: np.ufunc) -> np.ndarray:
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
        taps.append([_at(axis, np.minimum(starts + t, ends - 1)) for t in range(widest)])
    return lambda x: _reduce_taps(_reduce_taps(x, taps[1], np.maximum), taps[0], np.maximum)


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
    taps = [[_at(axis, slice(t, t + (o - 1) * s + 1, s)) for t in range(k)]
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
        out = _reduce_taps(_reduce_taps(x, taps[0], op), taps[1], op)
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


# -- normalisation --------------------------------------------------------------------------------
@register_kernel("batch_norm")
def batch_norm(spec: KernelSpec) -> Kernel:
    rank = len(spec.input("X").shape)
    channel_last = spec.attrs["data_layout"] == "NHWC"
    shape = (-1,) if channel_last or rank == 2 else (-1,) + (1,) * (rank - 2)
    dtype = spec.dtype.numpy
    eps = np.float32(spec.attrs["epsilon"])
    wanted = [slot for slot, _ in spec.output_keys]
    inplace = spec.inplace

    def affine(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
               variance: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inverse std, a, b), a and b shaped to broadcast against X."""
        inv_std = 1 / np.sqrt(variance + eps)
        a = scale * inv_std
        b = bias - mean * a
        return inv_std, a.astype(dtype, copy=False).reshape(shape), b.astype(dtype, copy=False).reshape(shape)

    stats = [spec.constant(slot) for slot in ("Scale", "Bias", "Mean", "Variance")]
    fixed = affine(*stats) if all(v is not None for v in stats) else None  # parameters: once, at prepare

    def run(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, variance: np.ndarray,
            *_: np.ndarray) -> tuple[np.ndarray | None, ...]:
        inv_std, a, b = fixed if fixed is not None else affine(scale, bias, mean, variance)
        y = np.multiply(x, a, out=x if inplace else None)
        y += b
        results = {"Y": y, "MeanOut": mean, "VarianceOut": variance, "SavedMean": mean,
                   "SavedVariance": inv_std.astype(variance.dtype, copy=False)}
        return tuple(results.get(slot) for slot in wanted)

    return run


@register_kernel("lrn")
def lrn(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    n = attrs["n"]
    axis = 3 if attrs["data_format"] == "NHWC" else 1
    x_shape = spec.input("X").shape
    channels = x_shape[axis]
    padded_shape = tuple(s + n - 1 if d == axis else s for d, s in enumerate(x_shape))
    pre = (n - 1) // 2
    inner = _at(axis, slice(pre, pre + channels))
    taps = [_at(axis, slice(t, t + channels)) for t in range(n)]
    k, alpha = (np.float32(attrs[name]) for name in ("k", "alpha"))
    scale = _inverse_power(float(attrs["beta"]))

    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        squares = np.zeros(padded_shape, x.dtype)
        np.square(x, out=squares[inner])
        mid = _reduce_taps(squares, taps, np.add)
        mid *= alpha
        mid += k
        out = scale(mid)
        out *= x
        return out, mid

    return run


def _inverse_power(beta: float) -> Callable[[np.ndarray], np.ndarray]:
    """``m ** -beta`` as a new array: through square roots for 0.5 and 0.75 (the beta of every LRN
    in AlexNet, GoogLeNet and ZFNet), ten times faster than ``np.power``, within 3 ulp."""
    if beta == 0.75:
        def three_quarters(m: np.ndarray) -> np.ndarray:
            root = np.sqrt(m)
            root *= np.sqrt(root)
            return np.reciprocal(root, out=root)

        return three_quarters
    if beta == 0.5:
        return lambda m: np.reciprocal(np.sqrt(m))
    power = np.float32(-beta)
    return lambda m: np.power(m, power)


# -- padding, dropout, softmax --------------------------------------------------------------------
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad3d(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    spatial = (1, 2, 3) if attrs["data_format"] == "NDHWC" else (2, 3, 4)
    mode = _PAD_MODES[attrs["mode"]]
    options = {"constant_values": attrs["value"]} if mode == "constant" else {}

    def widths(paddings: Sequence[int]) -> list[tuple[int, int]]:
        """Paddle's [left, right, top, bottom, front, back] as numpy's per-axis pairs."""
        p = [int(v) for v in paddings]
        pairs = dict(zip(spatial, ((p[4], p[5]), (p[2], p[3]), (p[0], p[1]))))
        return [pairs.get(d, (0, 0)) for d in range(5)]

    if spec.has_input("Paddings"):
        return lambda x, paddings: np.pad(x, widths(paddings.reshape(-1)), mode, **options)
    fixed = widths(attrs["paddings"])
    return lambda x: np.pad(x, fixed, mode, **options)


register_kernel("pad3d", dtypes=(DType.float32, DType.int32, DType.int64))(_pad3d)
register_kernel("pad3d", dtypes=(DType.float16,))(_pad3d)  # data movement: float16 as is


def _pad(spec: KernelSpec) -> Kernel:
    value = spec.attrs["pad_value"]

    def widths(paddings: Sequence[int]) -> list[tuple[int, int]]:
        p = [int(v) for v in paddings]
        return [(p[2 * i], p[2 * i + 1]) for i in range(len(p) // 2)]

    if spec.has_input("Paddings"):
        return lambda x, paddings: np.pad(x, widths(paddings.reshape(-1)), "constant", constant_values=value)
    fixed = widths(spec.attrs["paddings"])
    return lambda x: np.pad(x, fixed, "constant", constant_values=value)


register_kernel("pad", dtypes=(DType.float32, DType.int32, DType.int64))(_pad)
register_kernel("pad", dtypes=(DType.float16,))(_pad)  # data movement: float16 as is


@register_kernel("dropout")
def dropout(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    keep = np.float32(1 - attrs["dropout_prob"])
    identity = attrs["dropout_implementation"] == "upscale_in_train"
    with_mask = "Mask" in spec.outputs

    def run(x: np.ndarray, *_: np.ndarray) -> Any:
        out = x if identity else x * keep
        return (out, np.ones(x.shape, np.uint8)) if with_mask else out

    return run


def _over_axis(spec: KernelSpec, zero_d: Callable[[np.ndarray], np.ndarray],
               fn: Callable[[np.ndarray, int], np.ndarray]) -> Kernel:
    """``fn(x, axis)`` with attr ``axis`` resolved; ``zero_d`` for a 0-d X."""
    rank = len(spec.input("X").shape)
    if rank == 0:
        return zero_d
    axis = spec.attrs["axis"] % rank
    return lambda x: fn(x, axis)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    if axis == x.ndim - 1:
        out = np.empty_like(x)
        if compiled_softmax(out, x):
            return out
    e = x - x.max(axis=axis, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@register_kernel("softmax", dtypes=(DType.float32, DType.float16, DType.float64))
def softmax(spec: KernelSpec) -> Kernel:
    return _over_axis(spec, np.ones_like, _softmax)


@register_kernel("log_softmax", dtypes=(DType.float32, DType.float16, DType.float64))
def log_softmax(spec: KernelSpec) -> Kernel:
    return _over_axis(spec, np.zeros_like, _log_softmax)


# -- matrix products ------------------------------------------------------------------------------
@register_kernel("matmul_v2", dtypes=(DType.float32, DType.float16, DType.float64, DType.int32, DType.int64))
def matmul_v2(spec: KernelSpec) -> Kernel:
    flip_x = spec.attrs["trans_x"] and len(spec.input("X").shape) > 1
    flip_y = spec.attrs["trans_y"] and len(spec.input("Y").shape) > 1
    weight = spec.constant("Y")
    packed = products.pack(weight) if weight is not None and not (flip_x or flip_y) else None

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not (flip_x or flip_y) and x.ndim >= 2 and y.ndim == 2 and x.dtype.kind == "f":  # a linear layer's
            return products.matmul(x.reshape(-1, x.shape[-1]), y, packed).reshape(*x.shape[:-1], y.shape[-1])
        return np.asarray(np.matmul(np.swapaxes(x, -1, -2) if flip_x else x,
                                    np.swapaxes(y, -1, -2) if flip_y else y))

    return run


def _rows(shape: Sequence[int], cols: int) -> tuple[int, int]:
    """A shape flattened to 2-D at ``cols``."""
    return math.prod(shape[:cols]), math.prod(shape[cols:])


@register_kernel("mul")
def mul(spec: KernelSpec) -> Kernel:
    x2 = _rows(spec.input("X").shape, spec.attrs["x_num_col_dims"])
    y2 = _rows(spec.input("Y").shape, spec.attrs["y_num_col_dims"])
    out_shape = spec.output("Out").shape
    weight = spec.constant("Y")
    packed = None if weight is None else products.pack(weight.reshape(y2))
    return lambda x, y: products.matmul(x.reshape(x2), y.reshape(y2), packed).reshape(out_shape)


@register_kernel("fc")
def fc(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    x2 = _rows(spec.input("Input").shape, attrs["in_num_col_dims"])
    out_shape = spec.output("Out").shape
    width = out_shape[-1]
    used = (slice(0, x2[1]), slice(0, width)) if attrs["padding_weights"] else (slice(None), slice(None))
    epilogue = make_epilogue((width,), attrs["activation_type"])
    bias_at = slot_positions(spec).get("Bias")
    weight = spec.constant("W")
    packed = None if weight is None else products.pack(weight[used])

    def run(*args: np.ndarray) -> np.ndarray:
        out = products.matmul(args[0].reshape(x2), args[1][used], packed)
        return epilogue(out, None if bias_at is None else args[bias_at]).reshape(out_shape)

    return run

