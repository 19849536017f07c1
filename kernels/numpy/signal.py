"""numpy kernel of the signal op: dft (``numpy.fft``; float32 arrays transformed in float64)."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
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
