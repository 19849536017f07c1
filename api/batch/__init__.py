"""Batch inference over tables of rows: a model prepared once runs batch after batch, in this
process (``halfway batch``) or in the actors of a Ray cluster (``halfway.api.ray``).

A batch is a table held as columns, name -> numpy array with one entry per row along axis 0. The
model's feeds are columns; its fetches become new columns; every other column (ids, file names)
passes through unchanged.
"""

from .columns import Columns, concat_columns, row_count, slice_rows
from .predictor import Predictor
from .rows import FeedSpec

__all__ = ["Columns", "FeedSpec", "Predictor", "concat_columns", "row_count", "slice_rows"]
