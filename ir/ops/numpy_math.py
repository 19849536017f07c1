"""The math of the family rows (``halfway.ir.ops.families``) as numpy functions.

Each takes X (and Y) and the op's attrs as keyword arguments; unary functions that take ``out``
may write into it (the kernels pass ``out=x`` to compute in place). They overflow nowhere they
need not: sigmoid goes through exp(-|x|), softplus through logaddexp.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import HalfwayError

__all__ = ["relu", "relu6", "leaky_relu", "sigmoid", "hard_swish", "hard_sigmoid", "swish", "silu", "gelu",
           "softplus", "erfc", "erf", "ERF_P", "ERF_Q", "ERFC_COEFFS", "round_half_away", "elu", "celu",
           "thresholded_relu", "hard_shrink", "divide_toward_zero", "power_via_double", "int_mod", "int_fmod",
           "int_floordiv"]

Out = np.ndarray | None


def relu(x: np.ndarray, out: Out = None) -> np.ndarray:
    return np.maximum(x, 0, out=out)


def relu6(x: np.ndarray, threshold: np.generic, out: Out = None) -> np.ndarray:
    return np.clip(x, 0, threshold, out=out)


def leaky_relu(x: np.ndarray, alpha: np.generic, out: Out = None) -> np.ndarray:
    """x where x >= 0 (NaN and -0 kept), else alpha * x."""
    if out is None:
        out = x.copy()
    elif out is not x:
        np.copyto(out, x)
    return np.multiply(out, alpha, out=out, where=out < 0)


def sigmoid(x: np.ndarray, out: Out = None) -> np.ndarray:
    """1 / (1 + exp(-x)) from exp(-|x|): nothing overflows and tiny results keep their precision."""
    e = np.exp(-np.abs(x))
    return np.divide(np.where(x >= 0, 1, e), 1 + e, out=out)


def hard_swish(x: np.ndarray, threshold: np.generic, scale: np.generic, offset: np.generic,
               out: Out = None) -> np.ndarray:
    gate = np.add(x, offset)
    np.clip(gate, 0, threshold, out=gate)
    gate *= x
    return np.divide(gate, scale, out=out)


def hard_sigmoid(x: np.ndarray, slope: np.generic, offset: np.generic) -> np.ndarray:
    return np.clip(slope * x + offset, 0, 1)


def swish(x: np.ndarray, beta: np.generic, out: Out = None) -> np.ndarray:
    return np.multiply(x, sigmoid(beta * x), out=out)


def silu(x: np.ndarray, out: Out = None) -> np.ndarray:
    return np.multiply(x, sigmoid(x), out=out)


_TWO_SQRT_2_OVER_PI = 2 * math.sqrt(2 / math.pi)


def gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    """x * Phi(x): exact through ``erfc`` in float64, or Paddle's tanh approximation
    0.5 x (1 + tanh(u)), written x * sigmoid(2u) to avoid 1 + tanh's cancellation."""
    if approximate:
        return x * sigmoid(_TWO_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    wide = x.astype(np.float64)
    return (0.5 * wide * erfc(wide * -math.sqrt(0.5))).astype(x.dtype)


def softplus(x: np.ndarray, beta: np.generic, threshold: np.generic) -> np.ndarray:
    bx = beta * x
    return np.where(bx > threshold, x, np.logaddexp(0, bx) / beta)


# Numerical Recipes' erfcc (Chebyshev fit, W. H. Press et al., 2nd ed., section 6.2), highest power first.
ERFC_COEFFS = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
                0.37409196, 1.00002368, -1.26551223)


def erfc(x: np.ndarray) -> np.ndarray:
    """The complementary error function of a float64 array, with a relative error below 1.2e-7
    everywhere (so ``erfc(-x / sqrt(2)) / 2`` is the normal CDF to float32 precision even far
    into its lower tail)."""
    z = np.abs(x)
    t = 1 / (1 + 0.5 * z)
    poly = np.zeros_like(t)
    for c in ERFC_COEFFS:
        poly *= t
        poly += c
    tail = t * np.exp(poly - z * z)
    return np.where(x >= 0, tail, 2 - tail)


# Eigen's float erf (its generic_fast_erf_float, also XLA's): x * P(x^2) / Q(x^2) on x clamped to
# [-4, 4], where erf is +-1 in float32; highest power first.
ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
         -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
         -1.42647390514189e-02)


def _polynomial(x2: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    out = np.full_like(x2, coeffs[0])
    for c in coeffs[1:]:
        out *= x2
        out += x2.dtype.type(c)
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """erf: float32 (and float16) through Eigen's rational fit in float32 (a few ulp; erf's
    relative precision kept near 0), a pass per term over the array instead of float64's series;
    float64 through ``_erf_wide``."""
    if x.dtype == np.float64:
        return _erf_wide(x)
    clamped = np.clip(x, -4, 4, dtype=np.float32)
    x2 = np.square(clamped)
    p = _polynomial(x2, ERF_P)
    p *= clamped
    p /= _polynomial(x2, ERF_Q)
    return p.astype(x.dtype, copy=False)


def _erf_wide(x: np.ndarray) -> np.ndarray:
    """erf in float64: its Taylor series below 0.5 (where 1 - erfc cancels), 1 - erfc above."""
    wide = x.astype(np.float64)
    small = np.abs(wide) < 0.5
    x2, term = wide * wide, wide.copy()
    series = wide.copy()
    for n in range(1, 12):
        term *= -x2 / n
        series += term / (2 * n + 1)
    return np.where(small, series * (2 / math.sqrt(math.pi)), 1 - erfc(wide)).astype(x.dtype)


def round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x).astype(x.dtype)


def elu(x: np.ndarray, alpha: np.generic) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def celu(x: np.ndarray, alpha: np.generic) -> np.ndarray:
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


def thresholded_relu(x: np.ndarray, threshold: np.generic, value: np.generic) -> np.ndarray:
    return np.where(x > threshold, x, value).astype(x.dtype)


def hard_shrink(x: np.ndarray, threshold: np.generic) -> np.ndarray:
    return np.where(np.abs(x) > threshold, x, 0).astype(x.dtype)


def _nonzero(y: np.ndarray) -> None:
    if not np.all(y):
        raise HalfwayError("integer division by zero (Y holds a 0)")


def int_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Python's integer remainder (the sign of the divisor); a zero divisor is an error."""
    _nonzero(y)
    return np.mod(x, y)


def int_fmod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's integer remainder (the sign of the dividend); a zero divisor is an error."""
    _nonzero(y)
    return np.fmod(x, y)


def int_floordiv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    _nonzero(y)
    return np.floor_divide(x, y)


def divide_toward_zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C++ integer division: the quotient truncated toward zero; a zero divisor is an error."""
    _nonzero(y)
    return np.floor_divide(x - np.fmod(x, y), y)  # x - fmod(x, y) is an exact multiple of y


def power_via_double(x: np.ndarray, y: np.ndarray | np.generic) -> np.ndarray:
    """Paddle's integer power: ``std::pow`` in double, converted back to X's int dtype."""
    return np.power(x.astype(np.float64), y).astype(x.dtype)

