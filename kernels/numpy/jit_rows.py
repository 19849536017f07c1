"""Compiled row loops (numba) that ``halfway.kernels.numpy.jit`` loads at first use: layer
normalisation with its residual add, and softmax, over the rows of 2-D float32 arrays. numpy
spends five passes or more over memory on each (mean, centring, variance, scaling, affine; max,
shift, exp, sum, division); these read a row once into cache and write it once.

The row statistics are float64 sums, vectorised: their loops alone may reassociate (``fastmath``
``reassoc``, nothing else), so LLVM keeps several partial sums in a register. exp is
``jit_math``'s float32 polynomial. numpy's error model, so that the divisions vectorise.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .jit_math import CONTRACT, exp32, float32_bits

__all__ = ["layer_norm", "rms_norm", "softmax"]

_ZERO = np.float32(0)


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _sum(values):  # pragma: no cover - compiled
    total = 0.0
    for i in range(values.size):
        total += values[i]
    return total


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _squares_about(values, mean):  # pragma: no cover - compiled
    total = 0.0
    for i in range(values.size):
        d = values[i] - mean
        total += d * d
    return total


@njit(cache=True, nogil=True, inline="always")
def _order(bits):  # pragma: no cover - compiled
    """A float32's bits as an int32 that orders as the floats do (negative ones' magnitude bits
    flipped); its own inverse. NaN orders above +inf, so a row holding one gets NaN throughout."""
    return bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))


@njit(cache=True, nogil=True)
def _largest(values):  # pragma: no cover - compiled
    """The row's maximum, found over ``_order``'s integers: LLVM vectorises an integer maximum,
    not a floating-point one without fast-math."""
    bits = values.view(np.int32)
    top = np.int32(-(1 << 31))
    for i in range(bits.size):
        top = max(top, _order(bits[i]))
    return float32_bits(_order(top))


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def layer_norm(out, x, residual, total, scale, bias, epsilon, means, variances):  # pragma: no cover - compiled
    """``out[r] = (s - mean) / sqrt(var + epsilon) * scale + bias`` for each row ``s`` of ``x``
    (plus ``residual``, added in float32 as the elementwise_add it replaces, the sum written to
    ``total`` when given; each row's mean and variance to ``means`` and ``variances`` when
    given); ``scale`` and ``bias`` may be None."""
    rows, width = x.shape
    row = np.empty(width, np.float32)
    for r in range(rows):
        for i in range(width):
            row[i] = x[r, i] + residual[r, i] if residual is not None else x[r, i]
        if total is not None:
            total[r] = row
        mean = _sum(row) / width
        variance = _squares_about(row, mean) / width
        if means is not None:
            means[r] = mean
        if variances is not None:
            variances[r] = variance
        inverse = np.float32(1.0 / math.sqrt(variance + epsilon))
        centre = np.float32(mean)
        for i in range(width):
            v = (row[i] - centre) * inverse
            if scale is not None:
                v = v * scale[i]
            if bias is not None:
                v = v + bias[i]
            out[r, i] = v


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def rms_norm(out, x, scale, epsilon):  # pragma: no cover - compiled
    """``out[r] = s / sqrt(mean(s^2) + epsilon) * scale`` for each row ``s`` of ``x`` (the mean in
    float64); ``scale`` may be None."""
    rows, width = x.shape
    for r in range(rows):
        inverse = np.float32(1.0 / math.sqrt(_squares_about(x[r], _ZERO) / width + epsilon))
        for i in range(width):
            v = x[r, i] * inverse
            if scale is not None:
                v = v * scale[i]
            out[r, i] = v


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def softmax(out, x):  # pragma: no cover - compiled
    """Softmax of each row of ``x`` into ``out`` (``x`` itself where None), max-subtracted; a row
    of -inf gives NaN (0 / 0), as numpy's passes do."""
    source = out if x is None else x
    for r in range(out.shape[0]):
        top = _largest(source[r])
        for i in range(out.shape[1]):
            out[r, i] = exp32(source[r, i] - top, _ZERO)
        inverse = np.float32(1.0 / _sum(out[r]))
        for i in range(out.shape[1]):
            out[r, i] = out[r, i] * inverse
