"""The model side of batch inference: a model loaded, passed, transpiled and prepared once, then
called on batch after batch (``halfway batch``, and each actor of ``halfway.api.ray.predict``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...executor import Executor, PreparedBySignature, PreparedProgram
from ...executor.place import Place
from ...ir.errors import FeedError
from ..feeds import parse_inputs
from ..models import load_model
from ..pipelines import float16_pass, run_passes
from ..places import parse_place
from .rows import FeedSpec, feed_specs

__all__ = ["Predictor"]

Calibration = str | Mapping[str, np.ndarray] | None


class Predictor:
    """A model ready to run on batches of rows: ``predictor(batch) -> batch``.

    ``model`` is a path (ONNX, Paddle or halfway). ``passes`` is a comma-separated pipeline
    (None: the default one; ``"none"``: no pass); ``fp16`` transpiles to float16 after the passes
    (keeping float32 inputs and outputs), ``calibration`` being inputs (an .npz path, or name ->
    array) that keep ops whose values would overflow float16 in float32. ``place`` is ``cpu``,
    ``opencl`` or ``opencl:N`` (or a Place).

    A batch maps column names to numpy arrays, one entry per row along axis 0 (a column whose
    rows differ in shape is an object array of per-row arrays). The model's inputs are columns;
    its outputs become new columns; the input columns are dropped and every other column (ids,
    file names) passes through. A model with a fixed batch dim runs the rows in chunks of that
    size. Usable as it is with Ray Data's ``Dataset.map_batches(Predictor, fn_constructor_args=...)``.
    """

    def __init__(self, model: str, *, passes: str | None = None, fp16: bool = False,
                 calibration: Calibration = None, place: str | Place = "cpu") -> None:
        loaded = load_model(model)
        if isinstance(calibration, str):
            calibration = parse_inputs([calibration], loaded.program, loaded.feed_names)
        after = [float16_pass(calibration=dict(calibration) if calibration is not None else None)] if fp16 else []
        loaded, _ = run_passes(loaded, passes, after=after)
        self.place = parse_place(place) if isinstance(place, str) else place
        self.feeds: list[FeedSpec] = feed_specs(loaded.program, loaded.feed_names)
        self.fetch_names: list[str] = list(loaded.fetch_names)
        self._chunk = _fixed_batch(self.feeds)
        # without feed shapes: a program with open dims is prepared once per feed signature
        self._prepared: PreparedProgram | PreparedBySignature = Executor(self.place).prepare(
            loaded.program, loaded.feed_names, loaded.fetch_names, loaded.scope)

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The batch with the model's outputs as new columns and its inputs dropped.

        Raises:
            FeedError: a missing input column, an output named like a passed-through column, or a
                row of the wrong shape or dtype (named by its place in the batch and its id columns).
        """
        names = {f.name for f in self.feeds}
        missing = sorted(names - set(batch))
        if missing:
            raise FeedError(f"the batch has no column {missing} (its columns: {sorted(batch)}); the model's inputs "
                            f"are {[f.name for f in self.feeds]}")
        kept = {name: values for name, values in batch.items() if name not in names}
        clash = [name for name in self.fetch_names if name in kept]
        if clash:
            raise FeedError(f"the model's outputs {clash} are named like columns of the batch; rename those columns")
        labels = {name: values for name, values in kept.items() if values.ndim == 1 and values.dtype != object}
        feed = {f.name: f.stack(batch[f.name], labels) for f in self.feeds}
        return kept | self._run(feed)

    def _run(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = len(next(iter(feed.values())))
        if self._chunk is None:
            return self._fetched(self._prepared.run(feed), rows)
        pieces = [self._run_chunk({n: a[start:start + self._chunk] for n, a in feed.items()})
                  for start in range(0, rows, self._chunk)]
        return {name: np.concatenate([p[i] for p in pieces]) for i, name in enumerate(self.fetch_names)}

    def _run_chunk(self, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One run at the model's fixed batch size; a short last chunk is padded with copies of
        its last row, whose outputs are dropped."""
        rows = len(next(iter(feed.values())))
        assert self._chunk is not None
        short = self._chunk - rows
        if short:
            feed = {n: np.concatenate([a, np.repeat(a[-1:], short, axis=0)]) for n, a in feed.items()}
        return list(self._fetched(self._prepared.run(feed), self._chunk, keep=rows).values())

    def _fetched(self, results: Sequence[np.ndarray], rows: int, keep: int | None = None) -> dict[str, np.ndarray]:
        """The fetched arrays by name, each checked to hold one entry per row (its first ``keep``)."""
        for name, value in zip(self.fetch_names, results):
            if value.ndim == 0 or value.shape[0] != rows:
                raise FeedError(f"output {name!r} has shape {list(value.shape)}, not one entry per row of a batch "
                                f"of {rows}: batch inference needs outputs with a leading batch dim")
        return {name: value[:keep] for name, value in zip(self.fetch_names, results)}


def _fixed_batch(feeds: Sequence[FeedSpec]) -> int | None:
    """The batch size the model fixes (None: any); FeedError where its inputs disagree."""
    fixed = {f.batch for f in feeds if f.batch >= 0}
    if len(fixed) > 1:
        raise FeedError(f"the model's inputs fix different batch sizes {sorted(fixed)}: cannot batch its rows")
    return fixed.pop() if fixed else None
