"""Compiled single-pass loops (numba) for the numpy backend's transcendental activations: GELU
(exact and tanh), sigmoid and SiLU over flat float32 arrays. numpy spends a pass over memory per
operation of their formulas (ten or more for GELU); these read and write each element once.

The loops compute in float32, 16 lanes of AVX-512 where float64 has 8, within 1e-6 of the
float64 formulas over the whole float32 range (``tests/test_jit.py``): exp is a call-free
polynomial (``exp32``) so that the loops vectorise, and an argument that a float32 would not
hold precisely enough (GELU's tanh form, swish's beta x, the squares in erfc's exponent) reaches
it as a pair of float32s (``_split``). Exact GELU is ``numpy_math.erfc``'s fit
of |x| / sqrt 2, taken so that nothing cancels. numpy's error model (a division by zero gives inf, as numpy's, rather than raising):
Python's checks each division and keeps LLVM from vectorising the loops (5-15x slower).

Each loop is ``loop(out, x)``, and ``loop(out, None)`` works in place: given ``out`` twice, LLVM's
run-time overlap check would send the loop down its scalar path (6x slower on [128, 2048]).
Loaded through ``halfway.kernels.numpy.jit``, which is where they are used.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from ...ir.ops.numpy_math import ERFC_COEFFS

__all__ = ["CONTRACT", "exp32", "float32_bits", "gelu_erf", "gelu_erf_of", "gelu_tanh", "gelu_tanh_of", "logistic", "logistic_wide", "sigmoid", "silu"]

_LOG2_E, _LN2 = 1.4426950408889634, math.log(2)
_LN2_BITS9 = 0.693359375
"""ln 2's first 9 bits: k times it is exact in float32 for every k the loops reach."""
_LOG2_E32, _LN2_HIGH32, _LN2_LOW32 = (np.float32(c) for c in (_LOG2_E, _LN2_BITS9, _LN2 - _LN2_BITS9))
_EXP32_LOWEST = 104.0
_MINUS_EXP32_LOWEST = np.float32(-_EXP32_LOWEST)
_EXP32_DEGREE = 7
_INVERSE_FACTORIALS32 = tuple(np.float32(1.0 / math.factorial(n)) for n in range(_EXP32_DEGREE + 1))
_C32 = tuple(np.float32(c) for c in ERFC_COEFFS)
_SQRT_HALF = np.float32(math.sqrt(0.5))
_VELTKAMP = np.float32(4097)
_ZERO, _HALF, _ONE, _TWO, _TWO_M64 = (np.float32(c) for c in (0, 0.5, 1, 2, 2.0 ** -64))
_TWO_SQRT_2_OVER_PI = 2 * math.sqrt(2 / math.pi)
CONTRACT = {"contract"}
"""The one fast-math flag the loops take: a multiply and an add may become one FMA instruction
(rounded once, so no less precise; exp and erfc's polynomials 1.5x faster). Nothing is
reassociated. ``_square``, ``_two_sum`` and ``_split`` are compiled without it: their error terms
are exact only as written."""


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def _erfc_over_t(t):  # pragma: no cover - compiled
    """The exponent of ``numpy_math.erfc``'s fit less -z^2 (``erfc(z) = t exp(poly(t) - z^2)``,
    ``t = 1 / (1 + z / 2)``), in float32: it lies in [-1.3, 0] for z >= 0."""
    p = _C32[0]
    for n in range(1, len(_C32)):
        p = p * t + _C32[n]
    return p


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def gelu_erf(out, x):  # pragma: no cover - compiled
    """``0.5 x erfc(-x / sqrt 2)`` through one erfc of ``|z|`` (``numpy_math.erfc``'s fit):
    ``2 - erfc(|z|)`` for x >= 0, where there is no cancellation (erfc(|z|) <= 1), ``erfc(|z|)``
    below. All float32: the fit's polynomial lies in [-1.3, 0]; z^2 = x^2 / 2, which reaches 100
    in the tail, is exact as a pair (``_square``), and their sum goes to exp as one
    (``_two_sum``)."""
    source = out if x is None else x
    for i in range(out.size):
        out[i] = gelu_erf_of(source[i])


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def gelu_erf_of(v):  # pragma: no cover - compiled
    """``gelu_erf`` of one float32, for its loop and ``jit_epilogue``'s."""
    t = _ONE / (_ONE + _HALF * _SQRT_HALF * abs(v))
    square, below = _square(v)
    hi, lo = _two_sum(_erfc_over_t(t), -_HALF * square)
    tail = t * exp32(hi, lo - _HALF * below)
    return _HALF * v * (_TWO - tail if v >= _ZERO else tail)


@intrinsic
def float32_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float32 whose IEEE bits are the int32 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return types.float32(types.int32), codegen


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def _exp32_scaled(k, r, low):  # pragma: no cover - compiled
    """2^k e^r in float32 (0 where ``low``): e^r by its Taylor series to r^7 (relative error below
    1e-8 for |r| <= ln 2 / 2, before rounding), 2^k as 2^(k + 64) from its exponent bits times
    2^-64, which rounds results below float32's normal range into its subnormals."""
    p = _INVERSE_FACTORIALS32[_EXP32_DEGREE]
    for n in range(_EXP32_DEGREE - 1, -1, -1):
        p = p * r + _INVERSE_FACTORIALS32[n]
    return _ZERO if low else p * float32_bits((np.int32(k) + np.int32(127 + 64)) << np.int32(23)) * _TWO_M64


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def exp32(hi, lo):  # pragma: no cover - compiled
    """exp(hi + lo) for float32 hi <= 0 and a correction lo below hi's last bit, in float32
    arithmetic (16 lanes where float64 has 8): r = hi - k ln 2 + lo with ln 2 in two parts, the
    first of 9 bits so that k times it is exact. An argument a float32 cannot hold to 1e-7 at
    large |y| comes as a pair: GELU's tanh form as ``_split`` of its float64 value, erfc's
    exponent as exact squares and sums. hi below -104 gives 0, NaN gives NaN."""
    low = hi < _MINUS_EXP32_LOWEST
    hi = _MINUS_EXP32_LOWEST if low else (_ZERO if hi > _ZERO else hi)  # NaN kept
    k = np.floor(hi * _LOG2_E32 + _HALF)
    return _exp32_scaled(k, ((hi - k * _LN2_HIGH32) - k * _LN2_LOW32) + lo, low)


@njit(cache=True, nogil=True, error_model="numpy")
def _square(v):  # pragma: no cover - compiled
    """v^2 of a float32 as a float32 pair (hi, lo), exactly (Dekker: v cut into halves of 12 bits
    by Veltkamp's split, whose products are exact)."""
    c = _VELTKAMP * v
    high = c - (c - v)
    low = v - high
    square = v * v
    return square, ((high * high - square) + _TWO * high * low) + low * low


@njit(cache=True, nogil=True, error_model="numpy")
def _two_sum(a, b):  # pragma: no cover - compiled
    """a + b of float32s as a pair (sum, error), exactly (Knuth)."""
    total = a + b
    virtual = total - a
    return total, (a - (total - virtual)) + (b - virtual)


@njit(cache=True, nogil=True, error_model="numpy")
def _split(y):  # pragma: no cover - compiled
    """A float64 as float32 (hi, lo) with hi + lo = y to about 2^-48 relative."""
    hi = np.float32(y)
    return hi, np.float32(y - float(hi))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def logistic(v):  # pragma: no cover - compiled
    """The sigmoid of one float32 as float32, for the loops here and ``jit_epilogue``'s: one
    division, ``1 / (1 + e)`` or ``e / (1 + e)`` with ``e = exp(-|v|)``."""
    return _logistic_of(v, exp32(-abs(v), _ZERO))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def logistic_wide(v):  # pragma: no cover - compiled
    """``logistic`` of a float64 argument, which keeps its precision (``_split``)."""
    hi, lo = _split(-abs(v))
    return _logistic_of(v, exp32(hi, lo))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def _logistic_of(v, e):  # pragma: no cover - compiled
    r = _ONE / (_ONE + e)
    return r if v >= 0 else e * r


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def gelu_tanh(out, x):  # pragma: no cover - compiled
    """0.5 x (1 + tanh(u)) written x * sigmoid(2u), as ``numpy_math.gelu``."""
    source = out if x is None else x
    for i in range(out.size):
        out[i] = gelu_tanh_of(source[i])


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def gelu_tanh_of(v):  # pragma: no cover - compiled
    """``gelu_tanh`` of one float32, for its loop and ``jit_epilogue``'s."""
    wide = float(v)
    return v * logistic_wide(_TWO_SQRT_2_OVER_PI * (wide + 0.044715 * wide * wide * wide))


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def sigmoid(out, x):  # pragma: no cover - compiled
    source = out if x is None else x
    for i in range(out.size):
        out[i] = logistic(source[i])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def silu(out, x):  # pragma: no cover - compiled
    source = out if x is None else x
    for i in range(out.size):
        out[i] = source[i] * logistic(source[i])
