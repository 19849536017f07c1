"""The float32 math (numba) of the primitives the compiled loops compute without a call, so that
they vectorise (``jit_source`` renders the family rows' expressions with them): the sigmoid
(``logistic``; of a float64 argument ``logistic_wide``), the normal CDF (``normal_cdf_of``,
GELU's) and erf (``erf_of``); and ``log1p_exp_of``. numpy spends a pass over memory per
operation of their formulas (ten or more for GELU); the loops read and write each element once.

They compute in float32, 16 lanes of AVX-512 where float64 has 8, within 1e-6 of the float64
formulas over the whole float32 range (``tests/kernels/test_jit.py``): exp is a call-free polynomial
(``exp32``), and an argument that a float32 would not hold precisely enough (GELU's tanh form,
swish's beta x, the squares in erfc's exponent) reaches it as a pair of float32s (``_split``).
The normal CDF is ``numpy_math.erfc``'s fit of |x| / sqrt 2, taken so that nothing cancels.
numpy's error model (a division by zero gives inf, as numpy's, rather than raising): Python's
checks each division and keeps LLVM from vectorising the loops (5-15x slower).

Loaded through ``halfway.kernels.numpy.jit``, which is where they are used.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from ...ir.ops.numpy_math import ERF_P, ERF_Q, ERFC_COEFFS

__all__ = ["CONTRACT", "exp32", "exp_of", "expm1_of", "tanh_of", "float32_bits", "normal_cdf_of", "erf_of", "log1p_exp_of",
           "logistic", "logistic_wide"]

_LOG2_E, _LN2 = 1.4426950408889634, math.log(2)
_LN2_BITS9 = 0.693359375
"""ln 2's first 9 bits: k times it is exact in float32 for every k the loops reach."""
_LOG2_E32, _LN2_HIGH32, _LN2_LOW32 = (np.float32(c) for c in (_LOG2_E, _LN2_BITS9, _LN2 - _LN2_BITS9))
_EXP32_LOWEST = 104.0
_MINUS_EXP32_LOWEST = np.float32(-_EXP32_LOWEST)
_EXP32_DEGREE = 7
_INVERSE_FACTORIALS32 = tuple(np.float32(1.0 / math.factorial(n)) for n in range(_EXP32_DEGREE + 1))
_C32 = tuple(np.float32(c) for c in ERFC_COEFFS)
_P32, _Q32 = (tuple(np.float32(c) for c in coeffs) for coeffs in (ERF_P, ERF_Q))
_FOUR = np.float32(4)
_SQRT_HALF = np.float32(math.sqrt(0.5))
_VELTKAMP = np.float32(4097)
_ZERO, _HALF, _ONE, _TWO, _TWO_M64 = (np.float32(c) for c in (0, 0.5, 1, 2, 2.0 ** -64))
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


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def normal_cdf_of(v):  # pragma: no cover - compiled
    """The normal CDF ``erfc(-v / sqrt 2) / 2`` of one float32 through one erfc of ``|z|``
    (``numpy_math.erfc``'s fit): ``2 - erfc(|z|)`` for v >= 0, where there is no cancellation
    (erfc(|z|) <= 1), ``erfc(|z|)`` below. All float32: the fit's polynomial lies in [-1.3, 0];
    z^2 = v^2 / 2, which reaches 100 in the tail, is exact as a pair (``_square``), and their sum
    goes to exp as one (``_two_sum``)."""
    t = _ONE / (_ONE + _HALF * _SQRT_HALF * abs(v))
    square, below = _square(v)
    hi, lo = _two_sum(_erfc_over_t(t), -_HALF * square)
    tail = t * exp32(hi, lo - _HALF * below)
    return _HALF * (_TWO - tail if v >= _ZERO else tail)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def erf_of(v):  # pragma: no cover - compiled
    """erf of one float32 as ``numpy_math.erf``: Eigen's rational fit on v clamped to [-4, 4]."""
    c = -_FOUR if v < -_FOUR else (_FOUR if v > _FOUR else v)
    x2 = c * c
    p = _P32[0]
    for n in range(1, len(_P32)):
        p = p * x2 + _P32[n]
    q = _Q32[0]
    for n in range(1, len(_Q32)):
        q = q * x2 + _Q32[n]
    return c * p / q


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def log1p_exp_of(v):  # pragma: no cover - compiled
    """log(1 + exp(v)) of one float32 as ``numpy_math.log1p_exp``, max(v, 0) + log1p(exp(-|v|)),
    without a call (``exp32``, ``_log1p_unit``)."""
    top = v if (v > _ZERO or v != v) else _ZERO
    return top + _log1p_unit(exp32(-abs(v), _ZERO))


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


_EXP32_HIGHEST = np.float32(89.0)
_MINUS_HALF_LN2 = np.float32(-_LN2 / 2)
_HALF_LN2 = np.float32(_LN2 / 2)
_EXPM1_DEGREE = 8
_EXPM1_TAYLOR32 = tuple(np.float32(1.0 / math.factorial(n + 1)) for n in range(_EXPM1_DEGREE))
_ATANH_SERIES32 = tuple(np.float32(2.0 / (2 * n + 1)) for n in range(8))
_TANH_ONE = np.float32(9.0)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def _pow2(j):  # pragma: no cover - compiled
    """2^j for an int32 j in [-126, 127], from its exponent bits."""
    return float32_bits((j + np.int32(127)) << np.int32(23))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def exp_of(v):  # pragma: no cover - compiled
    """exp of any float32, without a call: ``exp32``'s reduction and polynomial on v clamped to
    [-104, 89], 2^k as two powers of two (k reaches 129 at the top, where it overflows to inf, and
    -150 at the bottom, where the second product rounds into the subnormals). NaN gives NaN."""
    v = _MINUS_EXP32_LOWEST if v < _MINUS_EXP32_LOWEST else (_EXP32_HIGHEST if v > _EXP32_HIGHEST else v)
    k = np.floor(v * _LOG2_E32 + _HALF)
    r = (v - k * _LN2_HIGH32) - k * _LN2_LOW32
    p = _INVERSE_FACTORIALS32[_EXP32_DEGREE]
    for n in range(_EXP32_DEGREE - 1, -1, -1):
        p = p * r + _INVERSE_FACTORIALS32[n]
    half = np.int32(k) >> np.int32(1)
    return p * _pow2(half) * _pow2(np.int32(k) - half)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def expm1_of(v):  # pragma: no cover - compiled
    """exp(v) - 1 of a float32 without a call: its Taylor series less the 1 (to v^8) where
    |v| <= ln 2 / 2, where exp(v) - 1 would cancel, else ``exp_of(v) - 1``."""
    p = _EXPM1_TAYLOR32[_EXPM1_DEGREE - 1]
    for n in range(_EXPM1_DEGREE - 2, -1, -1):
        p = p * v + _EXPM1_TAYLOR32[n]
    small = v * p
    return small if (v > _MINUS_HALF_LN2 and v < _HALF_LN2) else exp_of(v) - _ONE


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def tanh_of(v):  # pragma: no cover - compiled
    """tanh of a float32 without a call: -m / (2 + m) for m = expm1(-2|v|), the sign of v (nothing
    cancels near 0, where it is v); +-1 from |v| = 9; NaN kept."""
    a = abs(v)
    m = expm1_of(-(a + a))
    t = _ONE if a > _TANH_ONE else -m / (_TWO + m)
    return np.copysign(t, v)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=CONTRACT)
def _log1p_unit(e):  # pragma: no cover - compiled
    """log(1 + e) for e in [0, 1]: 2 atanh(s) for s = e / (2 + e) <= 1/3, its odd series to s^15."""
    s = e / (_TWO + e)
    s2 = s * s
    p = _ATANH_SERIES32[len(_ATANH_SERIES32) - 1]
    for n in range(len(_ATANH_SERIES32) - 2, -1, -1):
        p = p * s2 + _ATANH_SERIES32[n]
    return s * p


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
    """The sigmoid of one float32 as float32: one division, ``1 / (1 + e)`` or ``e / (1 + e)`` with ``e = exp(-|v|)``."""
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
