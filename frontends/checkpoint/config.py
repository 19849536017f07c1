"""A decoder's shape and quirks read from a transformers ``config.json``: one record every family's
builder takes, whatever the family calls its keys.

Keys are read as transformers writes them, both its v4 spelling (``rope_theta`` and
``rope_scaling`` at the top) and its v5 one (``rope_parameters``); a key a family needs and the
config lacks is a ``CheckpointError`` naming the key and the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import frozen

from .files import CONFIG, CheckpointError

__all__ = ["DecoderConfig", "Rope", "ACTIVATIONS", "read_int", "token_ids"]

ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu_python_tanh": "gelu_tanh"}
"""transformers' activation names -> the activations the builder makes (gelu_tanh: gelu's tanh form)."""


@frozen
class Rope:
    """Rotary position embedding: ``theta``, the rotated entries of a head (``dim``, even) and the
    scaling (transformers' ``rope_type`` and its parameters; "default": none)."""

    theta: float
    dim: int
    scaling: Mapping[str, Any]

    @property
    def type(self) -> str:
        return str(self.scaling.get("rope_type", self.scaling.get("type", "default")))


@frozen
class DecoderConfig:
    """What the builder needs to know of a decoder-only transformer.

    ``windows`` holds each layer's sliding window (0: the layer attends to every earlier token);
    ``rope`` None means learned absolute positions (GPT-2); ``norm_offset`` is added to the norm
    weights (Gemma's ``1 + weight``); ``embed_scale`` multiplies the embeddings (Gemma's square
    root of the hidden size).
    """

    architecture: str
    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    norm: str
    norm_eps: float
    activation: str
    gated: bool
    rope: Rope | None
    max_positions: int
    tie_embeddings: bool
    windows: tuple[int, ...]
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None = None
    pad_token_id: int | None = None
    norm_offset: float = 0.0
    embed_scale: float = 1.0

    @property
    def q_size(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.kv_heads * self.head_dim


def read_int(config: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    """The first of ``keys`` ``config`` holds, as an int (CheckpointError when none, and no default)."""
    for key in keys:
        if config.get(key) is not None:
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise CheckpointError(f"{CONFIG}: {key} = {value!r} must be an integer")
            return value
    if default is None:
        raise CheckpointError(f"{CONFIG}: no {' or '.join(keys)} (the {config.get('model_type', '?')} builder "
                              f"needs it)")
    return default


def token_ids(*values: Any) -> tuple[int, ...]:
    """Token ids from the first of ``values`` that is set: an int or a list of them."""
    for value in values:
        if value is None:
            continue
        ids = value if isinstance(value, list) else [value]
        return tuple(int(i) for i in ids)
    return ()
