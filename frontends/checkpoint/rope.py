"""Rotary position tables: cos and sin [positions, rotary dim / 2] for ``rotary_embedding``, in
float32 as transformers computes them (inverse frequencies, their products with the positions,
then cos and sin), for the scalings a checkpoint may name: none ("default"), "linear" and
"llama3" (Llama 3.1's frequency bands)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .config import Rope
from .files import CONFIG, CheckpointError

__all__ = ["rope_tables", "ROPE_TYPES"]

ROPE_TYPES = ("default", "linear", "llama3")


def _inverse_frequencies(rope: Rope) -> np.ndarray:
    exponents = np.arange(0, rope.dim, 2).astype(np.float32) / np.float32(rope.dim)
    inverse = (np.float32(1.0) / np.float32(rope.theta) ** exponents).astype(np.float32)
    scaling = rope.scaling
    if rope.type == "linear":
        return (inverse / np.float32(scaling["factor"])).astype(np.float32)
    if rope.type == "llama3":
        return _llama3(inverse, scaling)
    return inverse


def _llama3(inverse: np.ndarray, scaling: Mapping[str, Any]) -> np.ndarray:
    """Llama 3.1's bands: long wavelengths divided by ``factor``, short ones kept, the middle
    interpolated."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inverse
    scaled = np.where(wavelength > context / low, inverse / factor, inverse)
    smooth = (context / wavelength - low) / (high - low)
    middle = ~(wavelength < context / high) & ~(wavelength > context / low)
    return np.where(middle, (1 - smooth) * scaled / factor + smooth * scaled, scaled).astype(np.float32)


def rope_tables(rope: Rope, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of every position below ``positions`` (CheckpointError for a scaling not built)."""
    if rope.type not in ROPE_TYPES:
        raise CheckpointError(f"{CONFIG}: rope scaling {rope.type!r} is not built (known: {', '.join(ROPE_TYPES)})")
    angles = np.arange(positions, dtype=np.float32)[:, None] * _inverse_frequencies(rope)[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
