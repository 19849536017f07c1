"""numpy kernels of the normalisations (``halfway.ir.ops.norm``): layer_norm, skip_layer_norm,
instance_norm, group_norm, rms_norm, skip_rms_norm, batch_norm, lrn, softmax, log_softmax and prelu. float16 runs
widened to float32 (the registry's default); statistics are float32 (float64 for float64 inputs).
skip_layer_norm adds X and Y in their own dtype, as the elementwise_add it replaces rounds the sum,
and normalises that in float32. With numba, float32 layer_norm, skip_layer_norm and rms_norm run
as one compiled pass per row (``jit_rows``, float64 statistics).

* batch_norm (inference): ``Y = X * a + b`` with ``a = Scale / sqrt(Variance + eps)`` and
  ``b = Bias - Mean * a`` per channel, computed once at prepare when the statistics are
  parameters, else per call.
  MeanOut and VarianceOut are the Mean and Variance inputs themselves, SavedMean is Mean and
  SavedVariance the inverse standard deviation ``1 / sqrt(Variance + eps)`` (what Paddle
  saves in training), ReserveSpace None.
* lrn: Paddle's ``MidOut = k + alpha * sum of X^2 over n channels``, ``Out = X * MidOut^-beta``.
* softmax: ``exp(X - max)`` normalised, along any axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...ir.dtypes import DType
from ..registry import Kernel, KernelSpec, register_kernel
from .jit import compiled_layer_norm, compiled_rms_norm, compiled_softmax
from .pool import axis_index, reduce_taps

__all__ = ["normalize"]

_FLOATS = (DType.float32, DType.float16, DType.float64)


def normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X standardised over ``axes``, mean, variance), the statistics kept as reduced dims."""
    mean = x.mean(axis=axes, keepdims=True)
    centred = x - mean
    variance = np.mean(np.square(centred), axis=axes, keepdims=True)
    return centred / np.sqrt(variance + x.dtype.type(epsilon)), mean, variance


def _affine(y: np.ndarray, scale: np.ndarray | None, bias: np.ndarray | None, shape: Sequence[int]) -> np.ndarray:
    if scale is not None:
        y *= scale.reshape(shape).astype(y.dtype)
    if bias is not None:
        y += bias.reshape(shape).astype(y.dtype)
    return y


def _present(spec: KernelSpec, run: Callable[..., tuple[np.ndarray, ...]]) -> Kernel:
    """``run`` returning every output, wrapped to return those the op has (a bare Y when alone)."""
    slots = [slot for slot in spec.outputs]
    if len(slots) == 1:
        return lambda *args: run(*args)[0]
    return run


def _scale_bias(spec: KernelSpec, args: Sequence[np.ndarray]) -> tuple[np.ndarray | None, np.ndarray | None]:
    rest = iter(args[1:])
    return tuple(next(rest) if spec.has_input(s) else None for s in ("Scale", "Bias"))  # type: ignore[return-value]


@register_kernel("layer_norm", dtypes=_FLOATS)
def _layer_norm(spec: KernelSpec) -> Kernel:
    shape = spec.input("X").shape
    begin = spec.attrs["begin_norm_axis"]
    axes, epsilon = tuple(range(begin, len(shape))), spec.attrs["epsilon"]

    def run(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = args[0]
        y, mean, variance = normalize(x, axes, epsilon)
        scale, bias = _scale_bias(spec, args)
        lead = x.shape[:begin]
        return _affine(y, scale, bias, x.shape[begin:]), mean.reshape(lead), variance.reshape(lead)

    def compiled(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = args[0]
        if x.dtype == np.float32:  # a transposed view (ConvNeXt's channels-last blocks) copied first
            lead = x.shape[:begin]
            out, mean, variance = np.empty(x.shape, x.dtype), np.empty(lead, x.dtype), np.empty(lead, x.dtype)
            if compiled_layer_norm(out, np.ascontiguousarray(x), None, None, *_scale_bias(spec, args), epsilon,
                                   math.prod(x.shape[begin:]), mean, variance):
                return out, mean, variance
        return run(*args)

    return _present(spec, compiled)


@register_kernel("skip_layer_norm", dtypes=(DType.float16,))
@register_kernel("skip_layer_norm", dtypes=(DType.float32, DType.float64))
def _skip_layer_norm(spec: KernelSpec) -> Kernel:
    begin = spec.attrs["begin_norm_axis"]
    axes, epsilon = tuple(range(begin, len(spec.input("X").shape))), spec.attrs["epsilon"]
    keeps_sum = bool(spec.outputs.get("Sum"))

    def run(x: np.ndarray, y: np.ndarray, *params: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        if x.dtype == np.float32 and x.shape == y.shape:
            out, total = np.empty(x.shape, x.dtype), (np.empty(x.shape, x.dtype) if keeps_sum else None)
            x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
            if compiled_layer_norm(out, x, y, total, *_scale_bias(spec, (x, *params)), epsilon, math.prod(x.shape[begin:])):
                return (out, total) if keeps_sum else out  # type: ignore[return-value]
        total = x + y
        wide = total.astype(np.float32) if total.dtype == np.float16 else total
        normed, _, _ = normalize(wide, axes, epsilon)
        scale, bias = _scale_bias(spec, (wide, *params))
        out = _affine(normed, scale, bias, wide.shape[begin:]).astype(x.dtype, copy=False)
        return (out, total) if keeps_sum else out

    return run


@register_kernel("instance_norm", dtypes=_FLOATS)
def _instance_norm(spec: KernelSpec) -> Kernel:
    rank, epsilon = len(spec.input("X").shape), spec.attrs["epsilon"]

    def run(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = args[0]
        y, mean, variance = normalize(x, tuple(range(2, rank)), epsilon)
        scale, bias = _scale_bias(spec, args)
        inverse_std = 1 / np.sqrt(variance + x.dtype.type(epsilon))
        return _affine(y, scale, bias, (-1,) + (1,) * (rank - 2)), mean.reshape(-1), inverse_std.reshape(-1)

    return _present(spec, run)


@register_kernel("group_norm", dtypes=_FLOATS)
def _group_norm(spec: KernelSpec) -> Kernel:
    rank, epsilon, groups = len(spec.input("X").shape), spec.attrs["epsilon"], spec.attrs["groups"]

    def run(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = args[0]
        grouped = x.reshape(x.shape[0], groups, -1)
        y, mean, variance = normalize(grouped, (2,), epsilon)
        scale, bias = _scale_bias(spec, args)
        y = _affine(y.reshape(x.shape), scale, bias, (-1,) + (1,) * (rank - 2))
        return y, mean.reshape(x.shape[0], groups), variance.reshape(x.shape[0], groups)

    return _present(spec, run)


@register_kernel("prelu", dtypes=_FLOATS)
def _prelu(spec: KernelSpec) -> Kernel:
    shape, mode = spec.input("X").shape, spec.attrs["mode"]
    alpha_shape = {"all": (), "channel": (-1,) + (1,) * (len(shape) - 2), "element": tuple(shape[1:])}[mode]

    def run(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        slope = alpha.reshape(alpha_shape) if mode != "all" else alpha.reshape(())
        return np.where(x > 0, x, x * slope).astype(x.dtype)

    return run


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
    inner = axis_index(axis, slice(pre, pre + channels))
    taps = [axis_index(axis, slice(t, t + channels)) for t in range(n)]
    k, alpha = (np.float32(attrs[name]) for name in ("k", "alpha"))
    scale = _inverse_power(float(attrs["beta"]))

    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        squares = np.zeros(padded_shape, x.dtype)
        np.square(x, out=squares[inner])
        mid = reduce_taps(squares, taps, np.add)
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


@register_kernel("rms_norm", dtypes=_FLOATS)
def _rms_norm(spec: KernelSpec) -> Kernel:
    rank, begin = len(spec.input("X").shape), spec.attrs["begin_norm_axis"]
    axes, epsilon = tuple(range(begin, rank)), spec.attrs["epsilon"]

    width = math.prod(spec.input("X").shape[begin:])

    def run(x: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
        out = np.empty(x.shape, x.dtype)
        if compiled_rms_norm(out, np.ascontiguousarray(x), scale, epsilon, width):
            return out
        rms = np.mean(np.square(x), axis=axes, keepdims=True)
        rms += x.dtype.type(epsilon)
        np.sqrt(rms, out=rms)
        y = x / rms
        if scale is not None:
            y *= scale.astype(y.dtype, copy=False)
        return y

    return run


@register_kernel("skip_rms_norm", dtypes=(DType.float16,))
@register_kernel("skip_rms_norm", dtypes=(DType.float32, DType.float64))
def _skip_rms_norm(spec: KernelSpec) -> Kernel:
    """rms_norm's kernel over X + Y, the sum added in its own dtype (as the elementwise_add it
    replaces rounds it) and normalised in float32 where it is float16."""
    norm, keeps_sum = _rms_norm(spec), bool(spec.outputs.get("Sum"))

    def run(x: np.ndarray, y: np.ndarray, *scale: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        total = x + y
        out = norm(total.astype(np.float32) if total.dtype == np.float16 else total, *scale).astype(x.dtype, copy=False)
        return (out, total) if keeps_sum else out

    return run
