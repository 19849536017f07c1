"""Seeded token batches for text models: what a tokenizer hands a BERT-style encoder.

A model is a text model when it has an integer ``input_ids`` feed of rank 2 ([batch, sequence]).
Its batch holds ``batch`` rows of ``sequence`` tokens (for dims the model leaves open; a model
reads no more tokens than it has positions, which the caller knows), each row a
seeded length between a quarter of the sequence and all of it: token ids drawn from the model's
vocabulary up to that length, the padding id 0 after. Other integer feeds of the same shape
follow the rows' lengths: an ``attention_mask`` (any feed named ``*mask*``) is 1 on the tokens and
0 on the padding, ``position_ids`` count from 0, the rest (``token_type_ids``) are 0. Other feeds
get ``random_inputs``' values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir.dtypes import DType
from ..ir.program import Program
from ..ir.variable import Variable
from .feeds import random_inputs

__all__ = ["is_text_model", "token_inputs", "vocabulary_size"]

IDS = "input_ids"
BATCH = 2
SEQUENCE = 16
"""The default tokens per row: within the positions of the tiniest exports (32)."""
_RESHAPES = frozenset({"unsqueeze2", "squeeze2", "reshape2", "cast", "flatten_contiguous_range"})
"""Ops that pass token ids on unchanged to the embedding lookup (the importer's reshapes)."""
_LOOKUPS = {"gather": ("X", "Index"), "gather_nd": ("X", "Index"), "lookup_table_v2": ("W", "Ids")}
"""Embedding lookups: op type -> (table slot, ids slot)."""


def is_text_model(program: Program, feed_names: Sequence[str]) -> bool:
    """Whether ``program`` takes an integer [batch, sequence] ``input_ids`` feed."""
    if IDS not in feed_names:
        return False
    return _token_shaped(program.global_block().var(IDS))


def _token_shaped(var: Variable) -> bool:
    """Whether ``var`` is an integer matrix ([batch, sequence])."""
    return isinstance(var.dtype, DType) and var.dtype.numpy.kind in "iu" and len(var.shape or ()) == 2


def vocabulary_size(program: Program, default: int = 10) -> int:
    """The rows of the embedding table that ``input_ids`` indexes (through reshapes and casts);
    ``default`` when no persistable table is found (the ids then stay below it)."""
    block = program.global_block()
    pending, seen = [IDS], set()
    while pending:
        name = pending.pop()
        seen.add(name)
        for op, slot, _ in block.var(name).uses():
            table_slot, ids_slot = _LOOKUPS.get(op.type, ("", ""))
            if slot == ids_slot and op.input(table_slot):
                table = block.var(op.input(table_slot)[0])
                if table.persistable and table.shape:
                    return int(table.shape[0])
            if op.type in _RESHAPES:
                pending.extend(out for out in op.output_names() if out not in seen)
    return default


def token_inputs(program: Program, feed_names: Sequence[str], seed: int = 0, batch: int = BATCH,
                 sequence: int = SEQUENCE) -> dict[str, np.ndarray]:
    """A seeded padded batch for a text model (see the module docstring); dims the model fixes
    override ``batch`` and ``sequence``."""
    block = program.global_block()
    dims = tuple(d if d > 0 else default for d, default in zip(block.var(IDS).shape or (), (batch, sequence)))
    rng = np.random.default_rng(seed)
    lengths = rng.integers(max(1, dims[1] // 4), dims[1] + 1, dims[0])
    tokens = np.arange(dims[1])[None, :] < lengths[:, None]
    ids = np.where(tokens, rng.integers(1, vocabulary_size(program), dims), 0)
    feeds = random_inputs(program, feed_names, seed)
    for name in feed_names:
        var = block.var(name)
        if not _token_shaped(var):
            continue
        if name == IDS:
            value = ids
        elif "mask" in name:
            value = tokens
        elif name == "position_ids":
            value = np.broadcast_to(np.arange(dims[1]), dims)
        else:
            value = np.zeros(dims)
        feeds[name] = np.ascontiguousarray(value, dtype=feeds[name].dtype)  # random_inputs': the feed's dtype
    return feeds
