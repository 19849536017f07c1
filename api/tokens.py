"""Seeded token batches for text models: what a tokenizer hands a BERT-style encoder.

A model is a text model when it has an integer ``input_ids`` feed of rank 2 ([batch, sequence]).
Its batch holds ``batch`` rows of ``sequence`` tokens (for dims the model leaves open; a model
reads no more tokens than it has positions, which the caller knows), each row a
seeded length between a quarter of the sequence and all of it: token ids drawn from the model's
vocabulary up to that length, the padding id 0 after. A mask of the same shape
(``halfway.api.feed_roles``: an ``attention_mask``) follows the rows' lengths, 1 on the tokens and
0 on the padding; the other feeds get ``random_inputs``' values (``position_ids`` count from 0,
``token_type_ids`` are 0), their free dims sized as ``input_ids``' where they share a name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..ir.dtypes import DType
from ..ir.program import Program
from ..ir.variable import Variable
from .feed_roles import MASK, feed_roles, input_role
from .feeds import random_inputs
from .input_shapes import feed_shapes

__all__ = ["is_text_model", "token_inputs", "vocabulary_size"]

IDS = "input_ids"
BATCH = 2
SEQUENCE = 16
"""The default tokens per row: within the positions of the tiniest exports (32)."""


def is_text_model(program: Program, feed_names: Sequence[str]) -> bool:
    """Whether ``program`` takes an integer [batch, sequence] ``input_ids`` feed."""
    if IDS not in feed_names:
        return False
    return _token_shaped(program.global_block().var(IDS))


def _token_shaped(var: Variable) -> bool:
    """Whether ``var`` is an integer matrix ([batch, sequence])."""
    return isinstance(var.dtype, DType) and var.dtype.numpy.kind in "iu" and len(var.shape or ()) == 2


def vocabulary_size(program: Program, default: int = 10) -> int:
    """The rows of the embedding table that ``input_ids`` indexes (``halfway.api.feed_roles``);
    ``default`` when no persistable table is found (the ids then stay below it)."""
    return input_role(program, IDS).rows or default


def token_inputs(program: Program, feed_names: Sequence[str], seed: int = 0, batch: int = BATCH,
                 sequence: int = SEQUENCE, shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, np.ndarray]:
    """A seeded padded batch for a text model (see the module docstring); ``shapes``
    (``--input-shapes``) and dims the model fixes override ``batch`` and ``sequence``."""
    given = dict(shapes or {})
    free = feed_shapes(program, feed_names, given, default=-1)[IDS]
    given[IDS] = tuple(d if d > 0 else default for d, default in zip(free, (batch, sequence)))
    dims = given[IDS]
    rng = np.random.default_rng(seed)
    lengths = rng.integers(max(1, dims[1] // 4), dims[1] + 1, dims[0])
    tokens = np.arange(dims[1])[None, :] < lengths[:, None]
    ids = np.where(tokens, rng.integers(1, vocabulary_size(program), dims), 0)
    feeds = random_inputs(program, feed_names, seed, feed_shapes(program, feed_names, given))
    for name, role in feed_roles(program, feed_names).items():
        if feeds[name].shape != dims or not _token_shaped(program.global_block().var(name)):
            continue
        if name == IDS:
            feeds[name] = ids.astype(feeds[name].dtype)
        elif role.kind == MASK:
            feeds[name] = tokens.astype(feeds[name].dtype)
    return feeds
