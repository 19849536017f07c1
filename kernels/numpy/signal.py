"""numpy kernels of the signal ops: dft (``numpy.fft``; float32 arrays transformed in float64) and
mel_weight_matrix (ONNX's arithmetic, in the inputs' types)."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.ops.signal import dft_length
from ..registry import Kernel, KernelSpec, register_kernel
from .tensor import int_source

__all__: list[str] = []


@register_kernel("dft", dtypes=(DType.float32, DType.float16, DType.float64))
def _dft(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    axis_of = int_source(spec, ["AxisTensor"], [attrs["axis"]])
    inverse, onesided = attrs["inverse"], attrs["onesided"]

    def run(*args: np.ndarray) -> np.ndarray:
        x = args[0]
        axis = axis_of(args)[0] % x.ndim
        signal = x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)
        n = dft_length(x.shape[axis], attrs["dft_length"], inverse, onesided)
        if inverse and onesided:
            return np.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
        out = np.fft.ifft(signal, n=n, axis=axis) if inverse else np.fft.fft(signal, n=n, axis=axis)
        if onesided and not inverse:
            out = np.take(out, np.arange(n // 2 + 1), axis=axis)
        return np.stack([out.real, out.imag], axis=-1).astype(x.dtype)

    return run


@register_kernel("mel_weight_matrix", dtypes=(DType.float32, DType.float16, DType.float64))
def _mel_weight_matrix(spec: KernelSpec) -> Kernel:
    out_dtype = DType(spec.attrs["out_dtype"]).numpy

    def run(bins: np.ndarray, length: np.ndarray, rate: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        count, size = int(bins.reshape(-1)[0]), int(length.reshape(-1)[0])
        if count < 1 or size < 1 or rate.reshape(-1)[0] <= 0:
            raise HalfwayError(f"mel_weight_matrix: num_mel_bins {count}, dft_length {size} and sample_rate "
                               f"{rate.reshape(-1)[0]} must be positive")
        low_mel, high_mel = (2595 * np.log10(1 + edge.reshape(()) / 700) for edge in (low, high))
        points = np.arange(count + 2) * ((high_mel - low_mel) / (count + 2)) + low_mel
        edges = (((length.reshape(()) + 1) * (700 * (np.power(10, points / 2595) - 1))) // rate.reshape(())).astype(int)
        if edges.min() < 0 or edges.max() > size // 2:
            raise HalfwayError(f"mel_weight_matrix: the edges {low.reshape(-1)[0]} and {high.reshape(-1)[0]} Hz must "
                               f"lie within [0, sample_rate / 2]")
        out = np.zeros((size // 2 + 1, count))
        steps = np.arange(size // 2 + 1)[:, None]
        left, centre, right = edges[:-2], edges[1:-1], edges[2:]
        rising = (steps - left) / np.maximum(centre - left, 1)
        falling = (right - steps) / np.maximum(right - centre, 1)
        out = np.where((steps >= left) & (steps <= centre), np.where(centre == left, 1.0, rising), out)
        out = np.where((steps >= centre) & (steps < right), falling, out)
        return out.astype(out_dtype)

    return run
