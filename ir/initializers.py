"""Parameter initializers: seeded random or constant values for a parameter's shape.

The builder records one initializer per parameter on the program (``Program.initializers``);
``init_scope`` calls them in name order with one seeded generator, so a seed fixes every value.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["Initializer", "Constant", "Normal", "Uniform", "KaimingNormal", "XavierUniform", "default_for"]


class Initializer:
    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError


@attrs.frozen
class Constant(Initializer):
    value: float = 0.0

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return np.full(shape, self.value, dtype=dtype)


@attrs.frozen
class Normal(Initializer):
    mean: float = 0.0
    std: float = 1.0

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(self.mean, self.std, size=shape).astype(dtype)


@attrs.frozen
class Uniform(Initializer):
    low: float = -1.0
    high: float = 1.0

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=shape).astype(dtype)


def _fan_in(shape: tuple[int, ...]) -> int:
    """Inputs feeding one output: in_channels * kernel area for conv filters [O, I, kh, kw],
    the first dim for matmul weights [in, out]."""
    if len(shape) >= 3:
        return max(1, math.prod(shape[1:]))
    return max(1, shape[0]) if shape else 1


@attrs.frozen
class KaimingNormal(Initializer):
    """He initialisation: keeps activations' variance through ReLU layers."""

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, math.sqrt(2.0 / _fan_in(shape)), size=shape).astype(dtype)


@attrs.frozen
class XavierUniform(Initializer):
    def __call__(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        fan_out = shape[0] * math.prod(shape[2:]) if len(shape) >= 3 else (shape[-1] if shape else 1)
        limit = math.sqrt(6.0 / (_fan_in(shape) + max(1, fan_out)))
        return rng.uniform(-limit, limit, size=shape).astype(dtype)


def default_for(shape: tuple[int, ...]) -> Initializer:
    """For parameters the program holds no initializer for (a loaded model): Kaiming-normal
    weights, and vectors in [0.5, 1.5] — positive, so they are safe as batch_norm variances."""
    return KaimingNormal() if len(shape) >= 2 else Uniform(0.5, 1.5)
