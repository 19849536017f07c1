"""Latency and accuracy figures: median timings of repeated runs, and how far outputs stray
from a reference."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from attrs import frozen

from ..ir.errors import HalfwayError

__all__ = ["Timing", "Comparison", "time_runs", "compare", "nonfinite"]


@frozen
class Timing:
    median: float
    best: float
    runs: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median_s": self.median, "min_s": self.best, "runs": self.runs}


@frozen
class Comparison:
    """``max_rel`` is the largest absolute error over the largest reference magnitude (so values
    near zero do not blow it up); ``top1`` is the share of rows whose argmax over the last axis
    agrees, for outputs shaped [classes] or [batch, classes], perhaps followed by dims of 1
    ([1, 1000, 1, 1]); None for others."""

    max_abs: float
    max_rel: float
    top1: float | None
    scale: float

    def within(self, atol: float, rtol: float) -> bool:
        """Whether every error is at most ``atol + rtol * max|reference|``."""
        return self.max_abs <= atol + rtol * self.scale

    def as_dict(self) -> dict[str, float | None]:
        return {"max_abs_error": self.max_abs, "max_rel_error": self.max_rel, "top1_agreement": self.top1}


def time_runs(run: Callable[[], object], repeat: int, warmup: int,
              tick: Callable[[], None] = lambda: None) -> Timing:
    """Call ``run`` ``warmup`` times, then time ``repeat`` calls; ``tick`` after each call."""
    for _ in range(warmup):
        run()
        tick()
    seconds: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
        tick()
    return Timing(statistics.median(seconds), min(seconds), repeat)


def compare(reference: Sequence[np.ndarray], output: Sequence[np.ndarray], what: str = "output") -> Comparison:
    """Errors of ``output`` against ``reference``: matching lists of arrays of one fetch (one per
    sample), compared in float64."""
    ref = np.stack([np.asarray(r, dtype=np.float64) for r in reference])
    try:
        out = np.stack([np.asarray(o, dtype=np.float64) for o in output])
    except ValueError as e:
        raise HalfwayError(f"{what}: cannot compare outputs of different shapes ({e})") from None
    if ref.shape != out.shape:
        raise HalfwayError(f"{what}: shapes differ: {list(ref.shape[1:])} vs {list(out.shape[1:])}")
    if ref.size == 0:
        return Comparison(0.0, 0.0, None, 0.0)
    max_abs = float(np.max(np.abs(out - ref)))
    scale = float(np.max(np.abs(ref)))
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    top1 = None
    classes = _without_trailing_ones(ref.shape)
    if len(classes) in (2, 3) and classes[-1] > 1:  # per sample: [classes] or [batch, classes]
        ref, out = ref.reshape(classes), out.reshape(classes)
        top1 = float(np.mean(ref.argmax(axis=-1) == out.argmax(axis=-1)))
    return Comparison(max_abs, max_rel, top1, scale)


def _without_trailing_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with its trailing dims of size 1 dropped (keeping the sample axis and one more)."""
    dims = list(shape)
    while len(dims) > 2 and dims[-1] == 1:
        dims.pop()
    return tuple(dims)


def nonfinite(arrays: Mapping[str, np.ndarray]) -> list[str]:
    """``'name' holds 3 NaN and 1 inf of 4 values`` for each floating array holding NaN or
    infinities."""
    found = []
    for name, value in arrays.items():
        if value.dtype.kind not in "fc" or np.isfinite(value).all():
            continue
        counts = [(int(np.isnan(value).sum()), "NaN"), (int(np.isinf(value).sum()), "inf")]
        held = " and ".join(f"{n} {what}" for n, what in counts if n)
        found.append(f"{name!r} holds {held} of {value.size} values")
    return found
