"""Tables held as columns: name -> numpy array, one entry per row along axis 0. A column whose
rows differ in shape is an object array holding one array per row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...ir.errors import FeedError

__all__ = ["Columns", "row_count", "slice_rows", "concat_columns", "object_column"]

Columns = dict[str, np.ndarray]


def row_count(columns: Mapping[str, np.ndarray]) -> int:
    """The number of rows, the same in every column (FeedError naming the columns otherwise)."""
    counts = {name: len(values) for name, values in columns.items()}
    if len(set(counts.values())) > 1:
        raise FeedError(f"the columns hold different numbers of rows: {counts}")
    return next(iter(counts.values()), 0)


def slice_rows(columns: Mapping[str, np.ndarray], start: int, stop: int) -> Columns:
    """Rows ``start`` to ``stop`` (exclusive) of every column."""
    return {name: values[start:stop] for name, values in columns.items()}


def concat_columns(parts: Sequence[Mapping[str, np.ndarray]]) -> Columns:
    """The rows of ``parts`` one after another (an object column where the rows' shapes differ)."""
    if not parts:
        return {}
    return {name: _concat([part[name] for part in parts]) for name in parts[0]}


def _concat(pieces: list[np.ndarray]) -> np.ndarray:
    if all(p.dtype != object for p in pieces) and len({p.shape[1:] for p in pieces}) == 1:
        return np.concatenate(pieces)
    rows = [row for piece in pieces for row in piece]
    return object_column(rows)


def object_column(rows: Sequence[object]) -> np.ndarray:
    """A 1-D object array holding ``rows`` as they are (numpy would stack equal shapes)."""
    column = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        column[i] = row
    return column
