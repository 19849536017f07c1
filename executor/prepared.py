"""Prepared programs: kernels chosen, shapes inferred, memory planned and kernels bound once;
``run`` checks the feeds, hands them to the backend and calls one pre-bound runnable per op.
One class for every backend: feeds, fetches and errors are handled here alone."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from attrs import define, field

from halfway.ir.dtypes import DType
from halfway.ir.errors import FeedError, HalfwayError
from halfway.ir.operator import Operator
from halfway.ir.schema import TensorInfo
from halfway.kernels.registry import KernelKey
from halfway.executor.backend import Backend, Run
from halfway.executor.float16_range import Float16Range
from halfway.executor.memory import MemoryPlan

__all__ = ["Step", "PreparedProgram", "PrepareReport", "check_feeds", "check_feed", "read_only"]


@define
class Step:
    """One op as prepared: the kernel chosen for it, and what runs it (None: nothing to run)."""

    op: Operator
    key: KernelKey
    kernel: Any
    run: Run | None

    @property
    def where(self) -> str:
        return f"op #{self.op.index} {self.op.describe()} [{self.key}]"


@define
class PrepareReport:
    """What prepare decided: a kernel per op (index, type, key), the memory plan's figures, the ops
    that fell back to numpy (index, type, why) and the device launches per run."""

    kernels: list[tuple[int, str, KernelKey]] = field(factory=list)
    memory: MemoryPlan = field(factory=MemoryPlan)
    backend: str = "numpy"
    device: str = ""
    float16_mode: str = ""
    fallbacks: list[tuple[int, str, str]] = field(factory=list)
    launches: int = 0

    @property
    def peak_activation_bytes(self) -> int:
        return self.memory.peak_bytes

    @property
    def no_reuse_activation_bytes(self) -> int:
        return self.memory.no_reuse_bytes

    def summary(self) -> str:
        mode = f", float16 mode {self.float16_mode}" if self.float16_mode else ""
        lines = [f"{self.backend} device {self.device}{mode}, {len(self.kernels)} ops, {self.launches} launches, "
                 f"{len(self.fallbacks)} numpy fallback(s)"]
        lines += [f"  op #{index} {op_type} -> numpy: {why}" for index, op_type, why in self.fallbacks]
        return "\n".join(lines)


class PreparedProgram:
    """Runs one program for fixed feed names, fetch names and feed shapes on one backend.

    A float16 program checks float16's range around each run (``halfway.executor.float16_range``)
    unless prepared with ``check_float16_range=False``.

    A prepared program may be run from several threads. On a backend whose runs keep their
    values apart (numpy: ``Backend.concurrent_runs``) the runs overlap; on one whose buffers are
    bound once at prepare (OpenCL) a lock lets one run at a time in, from its uploads to its
    downloads, so every caller gets its own feed's results.
    """

    def __init__(self, backend: Backend, steps: list[Step], feeds: Sequence[tuple[str, Any, TensorInfo]],
                 fetches: Sequence[tuple[Any, DType]], fetch_names: Sequence[str], report: PrepareReport,
                 float16_range: Float16Range | None = None) -> None:
        self.backend = backend
        self._steps = steps
        self._running = [step for step in steps if step.run is not None]
        self._runs = [step.run for step in self._running]
        self._feeds = list(feeds)
        self._fetches = list(fetches)
        self.fetch_names = list(fetch_names)
        self.report = report
        self._range = float16_range
        self._turns: contextlib.AbstractContextManager[Any] = (
            contextlib.nullcontext() if backend.concurrent_runs else threading.Lock())

    @property
    def feed_names(self) -> list[str]:
        return [name for name, _, _ in self._feeds]

    def run(self, feed: Mapping[str, Any]) -> list[np.ndarray]:
        """Run on ``feed`` (name -> array); returns the fetched arrays in fetch order."""
        checked = self._check(feed)
        with self._turns:
            state = self._start(checked)
            try:
                for run in self._runs:
                    run(state)
            except Exception as e:
                self._fail(state, e, self._running[self._runs.index(run)])
            results = self._finish(state)
        if self._range is not None:
            self._range.check_fetches(dict(zip(self.feed_names, checked)), results)
        return results

    def profile(self, feed: Mapping[str, Any]) -> list[tuple[str, float]]:
        """Run once, then once more waiting after every op: (op, seconds) per op, for finding the
        slow ones."""
        self.run(feed)
        checked = self._check(feed)
        times = []
        with self._turns:
            state = self._start(checked)
            for step in self._steps:
                start = time.perf_counter()
                try:
                    if step.run is not None:
                        step.run(state)
                    self.backend.finish(state)
                except Exception as e:
                    self._fail(state, e, step)
                times.append((step.where, time.perf_counter() - start))
            self._finish(state)
        return times

    def _check(self, feed: Mapping[str, Any]) -> list[np.ndarray]:
        """Every feed checked, in feed order."""
        check_feeds(feed)
        checked = [check_feed(name, feed, info) for name, _, info in self._feeds]
        unknown = set(feed) - set(self.feed_names)
        if unknown:
            raise FeedError(f"unknown feed name(s) {sorted(unknown)}; the program is fed {self.feed_names}")
        if self._range is not None:
            self._range.check_feeds(checked)
        return checked

    def _start(self, checked: Sequence[np.ndarray]) -> Any:
        """The checked feeds handed to the backend: a run's state."""
        state = self.backend.start()
        for (_, handle, _), value in zip(self._feeds, checked):
            self.backend.upload(state, handle, value)
        return state

    def _finish(self, state: Any) -> list[np.ndarray]:
        results = [self.backend.download(state, handle, dtype) for handle, dtype in self._fetches]
        self.backend.finish(state)
        return results

    def _fail(self, state: Any, error: Exception, step: Step) -> None:
        """Raise ``error`` again naming the op it came from."""
        self.backend.finish(state)
        if isinstance(error, HalfwayError):
            raise type(error)(f"while executing {step.where}: {error}") from error
        raise HalfwayError(f"while executing {step.where}: {type(error).__name__}: {error}") from error


def check_feeds(feed: object) -> Mapping[str, np.ndarray]:
    """``feed`` itself, checked to be a mapping of var names to numpy arrays (``Executor.run``
    derives shapes from it before any program is prepared; ``PreparedProgram.run`` checks it
    the same way).

    Raises:
        FeedError: ``feed`` is not a mapping, or a key is not a string or a value not an array.
    """
    if not isinstance(feed, Mapping):
        raise FeedError(f"the feed must be a dict of var name -> numpy array, got {type(feed).__name__}")
    for name, value in feed.items():
        if not isinstance(name, str):
            raise FeedError(f"feed names must be var names (str), got {name!r} ({type(name).__name__})")
        if not isinstance(value, np.ndarray):
            hint = "" if value is None else " (np.asarray(value, dtype=...) makes one)"
            raise FeedError(f"feed {name!r} must be a numpy array, got {type(value).__name__}{hint}")
    return feed


def check_feed(name: str, feed: Mapping[str, np.ndarray], info: TensorInfo) -> np.ndarray:
    """The feed value for ``name`` (``feed`` passed ``check_feeds``), checked against the var's
    dtype and fixed dims."""
    if name not in feed:
        raise FeedError(f"missing feed {name!r} ({info.dtype.name}{list(info.shape)})")
    value = feed[name]
    if value.dtype != info.dtype.numpy:
        raise FeedError(f"feed {name!r} has dtype {value.dtype}, expected {info.dtype.name}")
    if value.ndim != len(info.shape) or any(d not in (-1, v) for d, v in zip(info.shape, value.shape)):
        raise FeedError(f"feed {name!r} has shape {list(value.shape)}, expected {list(info.shape)} (-1 = any)")
    return read_only(value if value.flags.c_contiguous else np.ascontiguousarray(value))


def read_only(value: np.ndarray) -> np.ndarray:
    """A read-only view of the caller's array: no kernel can write into a feed or a parameter."""
    view = value.view()
    view.flags.writeable = False
    return view
