"""A model's feeds as columns of rows: what one row of each feed must be, and the check that
turns a column of rows into the feed's array or names the first row that does not fit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from attrs import frozen

from ...ir.dtypes import DType
from ...ir.errors import FeedError
from ...ir.program import Program

__all__ = ["FeedSpec", "feed_specs", "row_label"]


@frozen
class FeedSpec:
    """One feed as a column: ``row_shape`` is the feed's shape without its leading batch dim (-1
    where the model leaves a dim open); ``batch`` is that leading dim (-1: any batch size)."""

    name: str
    row_shape: tuple[int, ...]
    dtype: np.dtype
    batch: int

    def describe(self) -> str:
        return f"{self.dtype} {list(self.row_shape)}"

    def fits(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.row_shape) and all(w < 0 or w == d for w, d in zip(self.row_shape, shape))

    def stack(self, values: np.ndarray, labels: Mapping[str, np.ndarray]) -> np.ndarray:
        """``values`` (one entry per row) as one array [rows, *row_shape] of the feed's dtype.
        Floating rows convert to the feed's floating dtype and integer rows to its integer dtype.

        Raises:
            FeedError: the first row of another shape or kind, named by its index in the batch and
                its ``labels`` (the values of the id columns on that row).
        """
        if values.dtype != object:  # every row has one shape and dtype: row 0 stands for all
            self._check(0, values.shape[1:], values.dtype, labels)
            return values.astype(self.dtype, copy=False)
        rows = [np.asarray(row) for row in values]
        for index, row in enumerate(rows):
            self._check(index, row.shape, row.dtype, labels)
        if len({row.shape for row in rows}) > 1:
            raise FeedError(f"column {self.name!r}: the rows of one batch differ along the dims the model leaves "
                            f"open ({self.describe()}); run with batch size 1")
        return np.stack(rows).astype(self.dtype, copy=False)

    def _check(self, index: int, shape: Sequence[int], dtype: np.dtype, labels: Mapping[str, np.ndarray]) -> None:
        kinds = {dtype.kind, self.dtype.kind}
        if not self.fits(shape):
            problem = f"a row of shape {list(shape)}"
        elif not (kinds <= {"f"} or kinds <= {"i", "u"} or kinds == {"b"}):
            problem = f"a row of dtype {dtype}"
        else:
            return
        raise FeedError(f"{row_label(index, labels)}, column {self.name!r}: {problem}; the model expects "
                        f"{self.describe()} per row")


def feed_specs(program: Program, feed_names: Sequence[str]) -> list[FeedSpec]:
    """The spec of each feed of ``program``; its leading dim is the batch dim.

    Raises:
        FeedError: a feed without a leading dim to batch along, or without a known dtype.
    """
    block = program.global_block()
    specs = []
    for name in feed_names:
        var = block.var(name)
        shape = tuple(var.shape or ())
        if not shape:
            raise FeedError(f"input {name!r} is a scalar: batch inference needs a leading batch dim on every input")
        dtype = var.dtype.numpy if isinstance(var.dtype, DType) else np.dtype(np.float32)
        specs.append(FeedSpec(name, shape[1:], dtype, shape[0]))
    return specs


def row_label(index: int, labels: Mapping[str, np.ndarray]) -> str:
    """``row 3 of the batch (id=17)``: a row named by its place in the batch and its id columns."""
    ids = ", ".join(f"{name}={_scalar(values[index])}" for name, values in labels.items())
    return f"row {index} of the batch" + (f" ({ids})" if ids else "")


def _scalar(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value
