"""numpy kernels of linear quantization (``halfway.ir.ops.quantize``). Quantizing computes
X / Scale in X's type (float16 widened to float32), rounds half to even and saturates in int32,
as ONNX's reference does; dequantizing subtracts in float32 and multiplies by Scale."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.quantize import QUANTIZED
from ..registry import Kernel, KernelSpec, register_kernel

__all__: list[str] = []

_FLOATS = (DType.float32, DType.float16, DType.float64)


def _params(spec: KernelSpec, shape: Sequence[int]):
    """A function giving Scale or ZeroPoint broadcastable against X: as it is (one value),
    along dim quant_axis (per axis), or repeated over each block (blocked)."""
    rank, block = len(shape), spec.attrs["block_size"]
    axis = spec.attrs["quant_axis"] % rank if rank else 0

    def shaped(value: np.ndarray) -> np.ndarray:
        if value.size == 1 and not block:
            return value.reshape(())
        if not block:
            return value.reshape([-1 if d == axis else 1 for d in range(rank)])
        return np.repeat(value, block, axis=axis).take(range(shape[axis]), axis=axis)

    return shaped


def _saturate(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


@register_kernel("quantize_linear", dtypes=_FLOATS)
def _quantize(spec: KernelSpec) -> Kernel:
    shaped = _params(spec, spec.input("X").shape)
    out = spec.output("Y").dtype.numpy

    def run(x: np.ndarray, scale: np.ndarray, zero: np.ndarray | None = None) -> np.ndarray:
        q = np.rint(x / shaped(scale)).astype(np.int32)
        if zero is not None:
            q += shaped(zero).astype(np.int32)
        return _saturate(q, out)

    return run


@register_kernel("dequantize_linear", dtypes=(*QUANTIZED, DType.int32))
def _dequantize(spec: KernelSpec) -> Kernel:
    shaped = _params(spec, spec.input("X").shape)
    out = spec.output("Y").dtype.numpy

    def run(x: np.ndarray, scale: np.ndarray, zero: np.ndarray | None = None) -> np.ndarray:
        wide = x.astype(np.float32)
        if zero is not None:
            wide -= shaped(zero).astype(np.float32)
        return (wide * shaped(scale)).astype(out)

    return run


@register_kernel("dynamic_quantize_linear", dtypes=_FLOATS)
def _dynamic_quantize(spec: KernelSpec) -> Kernel:
    def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        high, low = np.float32(max(0, x.max(initial=0))), np.float32(min(0, x.min(initial=0)))
        scale = np.float32(1.0 if high == low else high - low) / np.float32(255)
        zero = np.rint(np.clip(-low / scale, 0, 255))
        y = _saturate(np.rint(x / scale) + zero, np.dtype(np.uint8))
        return y, np.asarray(scale, x.dtype), np.asarray(zero, np.uint8)

    return run
