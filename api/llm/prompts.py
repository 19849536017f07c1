"""Prompts as a user hands them — one sequence of token ids, a padded [batch, sequence] array
with its attention mask (left- or right-padded), or a list of sequences of different lengths —
checked and brought to one form: each sequence's own tokens.

The runtime feeds them right-padded: each sequence's tokens from position 0, its own length in
the caches (``past_lengths``), so no sequence attends to padding and a batch computes what each
prompt alone would. ``generate`` returns them as transformers does, left-padded where their
lengths differ, the new tokens in the columns after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from attrs import frozen

from ...ir.errors import FeedError

__all__ = ["Prompts", "read_prompts", "LengthError", "check_length", "check_tokens"]


class LengthError(FeedError):
    """Prompts, or prompts and the tokens to generate after them, longer than the caches hold."""


def check_length(tokens: int, max_length: int, what: str) -> None:
    """LengthError when ``tokens`` positions (``what`` they are) do not fit ``max_length``."""
    if tokens > max_length:
        raise LengthError(f"{what} make {tokens} tokens, beyond max_length {max_length} (the positions each "
                          f"sequence's cache holds: load the model with a larger max_length, or shorten them)")


@frozen
class Prompts:
    """The batch's sequences (int64 arrays) and the [batch, sequence] array ``generate`` starts
    its result with: the ids as given, or the sequences left-padded with ``pad``."""

    sequences: tuple[np.ndarray, ...]
    given: np.ndarray

    @property
    def batch(self) -> int:
        return len(self.sequences)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.sequences], np.int64)

    def right_padded(self, width: int, pad: int) -> np.ndarray:
        """[batch, width] int64: each sequence from column 0, ``pad`` after it."""
        ids = np.full((self.batch, width), pad, np.int64)
        for row, sequence in zip(ids, self.sequences):
            row[:len(sequence)] = sequence
        return ids


def read_prompts(input_ids: Any, attention_mask: Any, vocab_size: int, pad: int) -> Prompts:
    """``input_ids`` (and ``attention_mask``) as ``Prompts`` (see the module docstring).

    Raises:
        FeedError: ids that are not integers, an empty sequence, a mask not of the ids' shape, or
            a token id outside the vocabulary (naming the id, where it is and the vocabulary size).
    """
    if _ragged(input_ids):
        if attention_mask is not None:
            raise FeedError("attention_mask goes with a padded [batch, sequence] array of ids, not a list of "
                            "sequences of different lengths")
        sequences = tuple(_ints(row, f"input_ids[{i}]") for i, row in enumerate(input_ids))
        given = _left_padded(sequences, pad)
    else:
        given = _ints(input_ids, "input_ids")
        given = given[None] if given.ndim == 1 else given
        if given.ndim != 2:
            raise FeedError(f"input_ids must be [batch, sequence] (or one sequence), has shape {list(given.shape)}")
        sequences = _masked(given, attention_mask)
    for i, sequence in enumerate(sequences):
        if not len(sequence):
            raise FeedError(f"prompt {i} has no tokens")
        check_tokens(sequence, vocab_size, f"prompt {i}, token")
    return Prompts(sequences, given)


def check_tokens(ids: np.ndarray, vocab_size: int, where: str) -> None:
    """FeedError naming the first id of ``ids`` outside the vocabulary (``where``: what its index
    counts, as "prompt 0, token")."""
    bad = np.flatnonzero((ids < 0) | (ids >= vocab_size))
    if bad.size:
        raise FeedError(f"token id {int(ids[bad[0]])} ({where} {int(bad[0])}) is outside the vocabulary of "
                        f"{vocab_size} ids")


def _ragged(input_ids: Any) -> bool:
    """Whether ``input_ids`` is a list of sequences of different lengths."""
    if isinstance(input_ids, np.ndarray) or not isinstance(input_ids, Sequence) or not input_ids:
        return False
    rows = [r for r in input_ids if isinstance(r, (Sequence, np.ndarray)) and not isinstance(r, (str, bytes))]
    return len(rows) == len(input_ids) and len({len(r) for r in rows}) > 1


def _ints(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.size and array.dtype.kind not in "iu":
        raise FeedError(f"{what} must hold integer token ids, holds {array.dtype}")
    return array.astype(np.int64)


def _masked(ids: np.ndarray, attention_mask: Any) -> tuple[np.ndarray, ...]:
    """Each row's tokens where ``attention_mask`` is set (all of them without a mask)."""
    if attention_mask is None:
        return tuple(ids)
    mask = np.asarray(attention_mask)
    mask = mask[None] if mask.ndim == 1 else mask
    if mask.shape != ids.shape:
        raise FeedError(f"attention_mask has shape {list(mask.shape)}, input_ids {list(ids.shape)}")
    return tuple(row[keep.astype(bool)] for row, keep in zip(ids, mask))


def _left_padded(sequences: Sequence[np.ndarray], pad: int) -> np.ndarray:
    width = max(len(s) for s in sequences)
    given = np.full((len(sequences), width), pad, np.int64)
    for row, sequence in zip(given, sequences):
        row[width - len(sequence):] = sequence
    return given
