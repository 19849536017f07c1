"""The math of the family rows (``halfway.ir.ops.families``) as numpy functions.

Each takes X (and Y) and the op's attrs as keyword arguments; unary functions that take ``out``
may write into it (the kernels pass ``out=x`` to compute in place). They overflow nowhere they
need not: sigmoid goes through exp(-|x|), softplus through logaddexp.
"""

from __future__ import annotations

import math

import numpy as np

from halfway.ir.errors import HalfwayError

__all__ = ["relu", "relu6", "leaky_relu", "sigmoid", "hard_swish", "hard_sigmoid", "swish", "silu", "gelu",
           "softplus", "erfc", "divide_toward_zero", "power_via_double"]

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
_ERFC_COEFFS = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
                0.37409196, 1.00002368, -1.26551223)


def erfc(x: np.ndarray) -> np.ndarray:
    """The complementary error function of a float64 array, with a relative error below 1.2e-7
    everywhere (so ``erfc(-x / sqrt(2)) / 2`` is the normal CDF to float32 precision even far
    into its lower tail)."""
    z = np.abs(x)
    t = 1 / (1 + 0.5 * z)
    poly = np.zeros_like(t)
    for c in _ERFC_COEFFS:
        poly *= t
        poly += c
    tail = t * np.exp(poly - z * z)
    return np.where(x >= 0, tail, 2 - tail)


def divide_toward_zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C++ integer division: the quotient truncated toward zero; a zero divisor is an error."""
    if not np.all(y):
        raise HalfwayError("integer division by zero (Y holds a 0)")
    return np.floor_divide(x - np.fmod(x, y), y)  # x - fmod(x, y) is an exact multiple of y


def power_via_double(x: np.ndarray, y: np.ndarray | np.generic) -> np.ndarray:
    """Paddle's integer power: ``std::pow`` in double, converted back to X's int dtype."""
    return np.power(x.astype(np.float64), y).astype(x.dtype)

