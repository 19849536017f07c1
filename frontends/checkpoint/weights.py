"""A decoder's weights in the one layout the builder takes, whatever the family's tensors are
called: products as [in, out] (transformers' ``Linear`` stores [out, in]), the query, key and value
projections as one product (``qkv``: queries, then keys, then values), a gated MLP's gate and up
projections as one (``up``: the gate's columns, then the up projection's)."""

from __future__ import annotations

import numpy as np
from attrs import define

from .files import CheckpointFiles

__all__ = ["LayerWeights", "DecoderWeights", "linear", "bias"]


@define
class LayerWeights:
    """One transformer block: its two norms (weight, and bias for a layer norm), attention and MLP."""

    norm1: np.ndarray
    qkv: np.ndarray
    out: np.ndarray
    norm2: np.ndarray
    up: np.ndarray
    down: np.ndarray
    norm1_bias: np.ndarray | None = None
    norm2_bias: np.ndarray | None = None
    qkv_bias: np.ndarray | None = None
    out_bias: np.ndarray | None = None
    up_bias: np.ndarray | None = None
    down_bias: np.ndarray | None = None


@define
class DecoderWeights:
    """The whole decoder: token (and learned position) embeddings, blocks, the final norm and the
    output projection ([hidden, vocab]; None: the token embeddings, tied)."""

    embed: np.ndarray
    layers: list[LayerWeights]
    norm: np.ndarray
    lm_head: np.ndarray | None
    positions: np.ndarray | None = None
    norm_bias: np.ndarray | None = None


def linear(files: CheckpointFiles, name: str, out: int, inputs: int) -> np.ndarray:
    """The weight of transformers' ``Linear`` ``name`` (stored [out, in]) as [in, out]."""
    return files.tensor(f"{name}.weight", (out, inputs)).T


def bias(files: CheckpointFiles, name: str, size: int) -> np.ndarray:
    return files.tensor(f"{name}.bias", (size,))
