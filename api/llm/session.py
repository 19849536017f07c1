"""A decoder's key/value caches for one batch size and its program prepared for them.

The caches are persistable vars of the program, their values zeros made here in a scope over the
weights': the program's ``cached_attention`` ops write them in place, on the place's device, and
they outlive each run. The program is prepared once per shape of its feeds — each prompt length
bucket (``prefill_width``: powers of two, so a handful of prepares serve every prompt) and the
decode step's one token per sequence — every preparation sharing the first one's weights and
caches (``Executor.prepare``'s ``share``), so a step uploads nothing but its small feeds.
"""

from __future__ import annotations

import time

import numpy as np

from ...executor import Executor, PreparedProgram
from ...executor.place import Place
from ...frontends.checkpoint import FEEDS, LOGITS, DecoderProgram

__all__ = ["Session", "prefill_width", "MIN_WIDTH"]

MIN_WIDTH = 8
"""The narrowest prefill: prompts shorter than this share one preparation."""


def prefill_width(tokens: int, max_length: int) -> int:
    """The columns a prefill of ``tokens`` tokens runs with: the next power of two (at least
    ``MIN_WIDTH``), at most ``max_length``."""
    return min(max_length, max(MIN_WIDTH, 1 << (tokens - 1).bit_length()))


class Session:
    """The caches of ``batch`` sequences and the program prepared for them on ``place``."""

    def __init__(self, decoder: DecoderProgram, place: Place, batch: int) -> None:
        self.decoder = decoder
        self.place = place
        self.batch = batch
        self.scope = decoder.scope.new_scope()
        for names in decoder.caches:
            for name in names:
                self.scope.set(name, np.zeros(decoder.cache_shape(batch), decoder.dtype.numpy))
        self._prepared: dict[tuple[int, int], PreparedProgram] = {}
        self.prepare_seconds = 0.0
        """Seconds spent preparing the program, for every shape so far."""

    @property
    def cache_bytes(self) -> int:
        """Bytes of every layer's key and value caches."""
        return sum(self.scope.get(name).nbytes for names in self.decoder.caches for name in names)

    def run(self, ids: np.ndarray, positions: np.ndarray, past: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The logits [len(rows), vocab] of ``rows`` of the new tokens ``ids`` [batch, S], which the
        caches take at ``past``."""
        feeds = dict(zip(FEEDS, (ids, positions, past, rows)))
        logits: np.ndarray = self._program(ids.shape[1], len(rows)).run(feeds)[0]
        return logits

    def _program(self, width: int, rows: int) -> PreparedProgram:
        key = (width, rows)
        if key not in self._prepared:
            shapes = {"input_ids": (self.batch, width), "position_ids": (self.batch, width),
                      "past_lengths": (self.batch,), "rows": (rows,)}
            share = next(iter(self._prepared.values()), None)
            start = time.perf_counter()
            prepared = Executor(self.place).prepare(self.decoder.program, list(FEEDS), [LOGITS], self.scope,
                                                    feed_shapes=shapes, check_float16_range=False, share=share)
            assert isinstance(prepared, PreparedProgram)  # every feed's shape is given
            self._prepared[key] = prepared
            self.prepare_seconds += time.perf_counter() - start
        return self._prepared[key]
