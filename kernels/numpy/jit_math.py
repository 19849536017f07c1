"""Compiled single-pass loops (numba) for the numpy backend's transcendental activations: GELU
(exact and tanh), sigmoid and SiLU over flat float32 arrays. numpy spends a pass over memory per
operation of their formulas (ten or more for GELU); these read and write each element once.

Each element is computed in float64 and rounded once, so the loops are as precise as the family
rows' numpy math (``halfway.ir.ops.numpy_math``) in the tails: exact GELU takes erf from Eigen's
rational fit where ``1 + erf`` does not cancel (x >= -2) and ``numpy_math.erfc``'s fit below;
sigmoid goes through exp(-|x|), a call-free polynomial (``_exp_negative``) so that the loops
vectorise. numpy's error model (a division by zero gives inf, as numpy's, rather than raising):
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

from halfway.ir.ops.numpy_math import ERF_P, ERF_Q, ERFC_COEFFS

__all__ = ["gelu_erf", "gelu_tanh", "logistic", "sigmoid", "silu"]

_P, _Q, _C = ERF_P, ERF_Q, ERFC_COEFFS
_CHUNK = 1024
_LOG2_E, _LN2_HIGH, _LN2_LOW = 1.4426950408889634, 0.6931471803691238, 1.9082149292705877e-10
_EXP_LOWEST = 150.0
_EXP_DEGREE = 8
_INVERSE_FACTORIALS = tuple(1.0 / math.factorial(n) for n in range(_EXP_DEGREE + 1))
_SQRT_HALF = math.sqrt(0.5)
_TWO_SQRT_2_OVER_PI = 2 * math.sqrt(2 / math.pi)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _erf(z):  # pragma: no cover - compiled
    """Eigen's erf fit (``numpy_math.erf``) on z in [-4, 4]; +-1 beyond."""
    z = 4.0 if z > 4.0 else (-4.0 if z < -4.0 else z)
    z2 = z * z
    p = (((((_P[0] * z2 + _P[1]) * z2 + _P[2]) * z2 + _P[3]) * z2 + _P[4]) * z2 + _P[5]) * z2 + _P[6]
    q = (((_Q[0] * z2 + _Q[1]) * z2 + _Q[2]) * z2 + _Q[3]) * z2 + _Q[4]
    return z * p / q


@njit(cache=True, nogil=True, error_model="numpy")
def gelu_erf(out, x):  # pragma: no cover - compiled
    """A loop without calls, so that it vectorises, over all but the tail: it keeps x where
    x < -2 (and NaN); then ``_gelu_tail`` finds those as the values below -2 (GELU's are above
    -0.17). ``x`` None: in place."""
    source = out if x is None else x
    for i in range(out.size):
        v = float(source[i])
        fast = 0.5 * v * (1.0 + _erf(v * _SQRT_HALF))
        out[i] = fast if v >= -2.0 else v
    _gelu_tail(out)


@intrinsic
def _float64_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float64 whose IEEE bits are the int64 ``bits`` (a register move, which vectorises)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _exp_negative(y):  # pragma: no cover - compiled
    """exp(y) for y <= 0 without a call or a table, so that loops of it vectorise: 2^k e^r with
    r = y - k ln 2 in [-ln 2 / 2, ln 2 / 2] (ln 2 in two parts), e^r by its Taylor series to
    r^8 (relative error below 3e-10, far below float32's rounding) and 2^k made from its
    exponent bits; y below -_EXP_LOWEST gives 0 (as exp(-inf): silu(-inf) is NaN, as numpy's
    -inf * 0), NaN gives NaN."""
    low = y < -_EXP_LOWEST
    y = -_EXP_LOWEST if low else (0.0 if y > 0.0 else y)  # NaN kept
    k = math.floor(y * _LOG2_E + 0.5)
    r = (y - k * _LN2_HIGH) - k * _LN2_LOW
    p = _INVERSE_FACTORIALS[_EXP_DEGREE]
    for n in range(_EXP_DEGREE - 1, -1, -1):
        p = p * r + _INVERSE_FACTORIALS[n]
    return 0.0 if low else p * _float64_bits((np.int64(k) + 1023) << 52)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _erfc(z):  # pragma: no cover - compiled
    """erfc(z) for z > sqrt 2 through ``numpy_math.erfc``'s fit (relative error below 1.2e-7)."""
    t = 1.0 / (1.0 + 0.5 * z)
    p = _C[0]
    for c in _C[1:]:
        p = p * t + c
    return t * _exp_negative(p - z * z)


@njit(cache=True, nogil=True, error_model="numpy")
def _gelu_tail(out):  # pragma: no cover - compiled
    """GELU of the values below -2 through ``_erfc``, gathered chunk by chunk into a contiguous
    block first (which vectorises), then put back: in one loop over every value under a
    condition, LLVM would compute the tail's formula for each."""
    where = np.empty(_CHUNK, np.int64)
    values = np.empty(_CHUNK, np.float64)
    for start in range(0, out.size, _CHUNK):
        count = 0
        for i in range(start, min(start + _CHUNK, out.size)):
            where[count] = i
            values[count] = out[i]
            count += out[i] < -2.0
        for j in range(count):
            v = values[j]
            values[j] = 0.5 * v * _erfc(-v * _SQRT_HALF)
        for j in range(count):
            out[where[j]] = values[j]


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def logistic(v):  # pragma: no cover - compiled
    """The sigmoid of one float64, for the loops here and ``jit_epilogue``'s."""
    e = _exp_negative(-abs(v))
    return 1.0 / (1.0 + e) if v >= 0 else e / (1.0 + e)


@njit(cache=True, nogil=True, error_model="numpy")
def gelu_tanh(out, x):  # pragma: no cover - compiled
    """0.5 x (1 + tanh(u)) written x * sigmoid(2u), as ``numpy_math.gelu``."""
    source = out if x is None else x
    for i in range(out.size):
        v = float(source[i])
        out[i] = v * logistic(_TWO_SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))


@njit(cache=True, nogil=True, error_model="numpy")
def sigmoid(out, x):  # pragma: no cover - compiled
    source = out if x is None else x
    for i in range(out.size):
        out[i] = logistic(float(source[i]))


@njit(cache=True, nogil=True, error_model="numpy")
def silu(out, x):  # pragma: no cover - compiled
    source = out if x is None else x
    for i in range(out.size):
        v = float(source[i])
        out[i] = v * logistic(v)
