"""The numpy functions that the family rows' expressions (``halfway.ir.ops.expr``) call where a
primitive is more than a ufunc (``halfway.ir.ops.numpy_render``), and the integer math of the rows
whose int kernels differ from their float ones.

They overflow nowhere they need not: sigmoid goes through exp(-|x|), log1p_exp through
log1p(exp(-|x|)); functions that take ``out`` may write into it (``out=x`` too).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import HalfwayError

__all__ = ["sigmoid", "log1p_exp", "normal_cdf", "erfc", "erf", "ERF_P", "ERF_Q", "ERFC_COEFFS", "round_half_away",
           "divide_toward_zero", "power_via_double", "int_mod", "int_fmod", "int_floordiv"]

Out = np.ndarray | None


def _scratch(x: np.ndarray) -> bool:
    """Whether numpy's results on ``x`` are arrays (not scalars) that can be written in place."""
    return isinstance(x, np.ndarray) and x.ndim > 0


def sigmoid(x: np.ndarray, out: Out = None) -> np.ndarray:
    """1 / (1 + exp(-x)) from e = exp(-|x|), nothing overflowing and tiny results keeping their
    precision: max(e, x >= 0) / (1 + e), the numerator 1 where x >= 0 (e <= 1), else e (NaN
    kept; a maximum, not a ``where``, which is a pass 15x slower)."""
    positive = np.greater_equal(x, 0)
    if not _scratch(x):
        e = np.exp(-np.abs(x))
        return np.divide(np.maximum(e, positive), 1 + e, out=out)
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    top = np.maximum(e, positive, out=out)
    e += 1
    return np.divide(top, e, out=top)


def log1p_exp(x: np.ndarray, out: Out = None) -> np.ndarray:
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)) (numpy's logaddexp(0, x), a tenth of its
    time)."""
    if not _scratch(x):
        return np.add(np.maximum(x, 0), np.log1p(np.exp(-np.abs(x))), out=out)
    tail = np.abs(x)
    np.negative(tail, out=tail)
    np.exp(tail, out=tail)
    np.log1p(tail, out=tail)
    return np.add(np.maximum(x, 0, out=out), tail, out=out if out is not None else tail)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """The normal distribution's CDF, erfc(-x / sqrt 2) / 2, through ``erfc`` in float64."""
    wide = np.asarray(x, dtype=np.float64)
    return (0.5 * erfc(wide * -math.sqrt(0.5))).astype(np.result_type(x), copy=False)


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

