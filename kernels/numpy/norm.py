"""numpy kernels of the normalisations (``halfway.ir.ops.norm``): layer_norm, skip_layer_norm,
instance_norm, group_norm and prelu (log_softmax sits beside softmax in ``nn``). float16 runs widened to float32 (the registry's default);
statistics are float32 (float64 for float64 inputs). skip_layer_norm adds X and Y in their own
dtype, as the elementwise_add it replaces rounds the sum, and normalises that in float32. With
numba, float32 layer_norm and skip_layer_norm run as one compiled pass per row (``jit_rows``,
float64 statistics)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...ir.dtypes import DType
from ..registry import Kernel, KernelSpec, register_kernel
from .jit import compiled_layer_norm

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
