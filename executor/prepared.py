"""Prepared programs: kernels chosen, shapes inferred, memory planned and kernels bound once;
``run`` checks the feeds, hands them to the backend and calls one pre-bound runnable per op.
One class for every backend: feeds, fetches and errors are handled here alone."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from attrs import define, field

from ..ir.dtypes import DType
from ..ir.errors import FeedError, HalfwayError
from ..ir.operator import Operator
from ..ir.schema import TensorInfo
from ..kernels.registry import KernelKey
from .backend import Backend, Run, StepFailure
from .device_tensor import DeviceTensor
from .float16_range import Float16Range
from .memory import MemoryPlan

__all__ = ["Step", "PreparedProgram", "PrepareReport", "check_feeds", "check_names", "check_feed", "read_only"]

Feed = np.ndarray | DeviceTensor


@define
class Step:
    """One op as prepared: the kernel chosen for it, and what runs it (None: nothing to run)."""

    op: Operator
    key: KernelKey
    kernel: Any
    run: Run | None
    timed: Callable[[], float] | None = None

    @property
    def where(self) -> str:
        return f"op #{self.op.index} {self.op.describe()} [{self.key}]"


@define
class PrepareReport:
    """What prepare decided: a kernel per op (index, type, key), the memory plan's figures, the ops
    that fell back to numpy (index, type, why), the device launches per run, and the runs of ops
    the backend calls as one (``Backend.fuse``: the numpy backend's compiled chains), by op index."""

    kernels: list[tuple[int, str, KernelKey]] = field(factory=list)
    memory: MemoryPlan = field(factory=MemoryPlan)
    backend: str = "numpy"
    device: str = ""
    float16_mode: str = ""
    fallbacks: list[tuple[int, str, str]] = field(factory=list)
    launches: int = 0
    chains: list[tuple[int, ...]] = field(factory=list)

    @property
    def peak_activation_bytes(self) -> int:
        return self.memory.peak_bytes

    @property
    def no_reuse_activation_bytes(self) -> int:
        return self.memory.no_reuse_bytes

    def summary(self) -> str:
        mode = f", float16 mode {self.float16_mode}" if self.float16_mode else ""
        chained = f", {sum(map(len, self.chains))} ops in {len(self.chains)} chain(s)" if self.chains else ""
        lines = [f"{self.backend} device {self.device}{mode}, {len(self.kernels)} ops, {self.launches} launches, "
                 f"{len(self.fallbacks)} numpy fallback(s){chained}"]
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
                 float16_range: Float16Range | None = None,
                 resident: Mapping[str, tuple[np.ndarray, Any]] | None = None) -> None:
        self.backend = backend
        self.resident = dict(resident or {})
        """Parameter name -> (its scope array, its handle): what a program prepared with ``share``
        takes from this one."""
        self._steps = steps
        running = [step for step in steps if step.run is not None]
        self._runs: list[Run] = []
        self._covered: list[list[Step]] = []
        """Per run of ``_runs``, the steps it stands for (``Backend.fuse``)."""
        first = 0
        for run, count in backend.fuse([step.run for step in running]):  # type: ignore[misc]
            self._runs.append(run)
            self._covered.append(running[first:first + count])
            first += count
        report.chains = [tuple(step.op.index for step in covered) for covered in self._covered if len(covered) > 1]
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

    def run(self, feed: Mapping[str, Any], *, on_device: bool = False) -> list[Any]:
        """Run on ``feed`` (name -> numpy array or ``DeviceTensor``); returns the fetched arrays in
        fetch order, or with ``on_device`` ``DeviceTensor``s (``halfway.executor.device_tensor``)."""
        checked = self._check(feed)
        devices = on_device or any(isinstance(value, DeviceTensor) for value in checked)
        if devices and self._range is not None:
            raise FeedError("a float16 program checks float16's range on host feeds and fetches; to run it on device "
                            "tensors, prepare it with check_float16_range=False")
        with self._turns:
            state = self._start(checked)
            try:
                for run in self._runs:
                    run(state)
            except Exception as e:
                covered = self._covered[self._runs.index(run)]
                step, error = (covered[e.offset], e.error) if isinstance(e, StepFailure) else (covered[0], e)
                self._fail(state, error, step)
            results = self._finish(state, on_device)
        if self._range is not None:
            self._range.check_fetches(dict(zip(self.feed_names, _hosts(checked))), results)
        return results

    def to_device(self, feed: Mapping[str, np.ndarray]) -> dict[str, DeviceTensor]:
        """``feed``'s arrays (checked as ``run`` checks its feeds, by name) copied into this
        program's device memory, to feed its runs, or those of any program prepared on the same
        place, without a copy from the host each run."""
        check_feeds(feed)
        infos = {name: info for name, _, info in self._feeds}
        check_names(feed, self.feed_names, ())
        tensors = {}
        for name in feed:
            value = check_feed(name, feed, infos[name])
            tensors[name] = DeviceTensor(self.backend.to_device(value, infos[name].dtype), infos[name].dtype,
                                         self.backend)
        return tensors

    def profile(self, feed: Mapping[str, Any]) -> list[tuple[str, float]]:
        """Run once, then once more waiting after every op: (op, seconds) per op, for finding the
        slow ones. An op whose backend times its work on the device (OpenCL: profiling events)
        gets the device's seconds, without the launch and the wait the host would count."""
        self.run(feed)
        checked = self._check(feed)
        times = []
        with self._turns:
            state = self._start(checked)
            for step in self._steps:
                start = time.perf_counter()
                try:
                    if step.run is None:  # a view: no work
                        seconds = 0.0
                    elif step.timed is not None:
                        seconds = step.timed()
                    else:
                        step.run(state)
                        self.backend.finish(state)
                        seconds = time.perf_counter() - start
                except Exception as e:
                    self._fail(state, e, step)
                times.append((step.where, seconds))
            self._finish(state)
        return times

    def _check(self, feed: Mapping[str, Any]) -> list[Feed]:
        """Every feed checked, in feed order."""
        check_feeds(feed, devices=True)
        check_names(feed, self.feed_names, self.feed_names)
        checked = [check_device_feed(name, feed, info, self.backend.memory) for name, _, info in self._feeds]
        if self._range is not None and not any(isinstance(value, DeviceTensor) for value in checked):
            self._range.check_feeds(_hosts(checked))
        return checked

    def _start(self, checked: Sequence[Feed]) -> Any:
        """The checked feeds handed to the backend: a run's state."""
        state = self.backend.start()
        for (_, handle, _), value in zip(self._feeds, checked):
            if isinstance(value, DeviceTensor):
                self.backend.upload_device(state, handle, value.value)
            else:
                self.backend.upload(state, handle, value)
        return state

    def _finish(self, state: Any, on_device: bool = False) -> list[Any]:
        if on_device:
            results: list[Any] = [DeviceTensor(self.backend.fetch_device(state, handle, dtype), dtype, self.backend)
                                  for handle, dtype in self._fetches]
        else:
            results = [self.backend.download(state, handle, dtype) for handle, dtype in self._fetches]
        self.backend.finish(state)
        return results

    def _fail(self, state: Any, error: Exception, step: Step) -> None:
        """Raise ``error`` again naming the op it came from."""
        self.backend.finish(state)
        if isinstance(error, HalfwayError):
            raise type(error)(f"while executing {step.where}: {error}") from error
        raise HalfwayError(f"while executing {step.where}: {type(error).__name__}: {error}") from error


def check_feeds(feed: object, devices: bool = False) -> Mapping[str, Any]:
    """``feed`` itself, checked to be a mapping of var names to numpy arrays (or, with
    ``devices``, ``DeviceTensor``s: ``PreparedProgram.run`` takes them; ``Executor.run``, which
    derives shapes from the feed before any program is prepared, does not).

    Raises:
        FeedError: ``feed`` is not a mapping, or a key is not a string or a value not an array.
    """
    kinds = (np.ndarray, DeviceTensor) if devices else np.ndarray
    if not isinstance(feed, Mapping):
        raise FeedError(f"the feed must be a dict of var name -> numpy array, got {type(feed).__name__}")
    for name, value in feed.items():
        if not isinstance(name, str):
            raise FeedError(f"feed names must be var names (str), got {name!r} ({type(name).__name__})")
        if not isinstance(value, kinds):
            hint = "" if value is None else " (np.asarray(value, dtype=...) makes one)"
            raise FeedError(f"feed {name!r} must be a numpy array, got {type(value).__name__}{hint}")
    return feed


def check_names(feed: Mapping[str, Any], feed_names: Sequence[str], required: Sequence[str]) -> None:
    """FeedError naming, at once, the names of ``feed`` that are not among ``feed_names`` and
    the ``required`` names it lacks (a misspelt feed is both)."""
    unknown = sorted(set(feed) - set(feed_names))
    missing = [name for name in required if name not in feed]
    if not unknown and not missing:
        return
    lacking = f"missing feed{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"
    problems = ([f"unknown feed name(s) {unknown}"] if unknown else []) + ([lacking] if missing else [])
    raise FeedError(f"{' and '.join(problems)}; the program is fed {list(feed_names)}")


def check_feed(name: str, feed: Mapping[str, Any], info: TensorInfo) -> np.ndarray:
    """The feed array for ``name`` (``feed`` passed ``check_feeds``), checked against the var's
    dtype and fixed dims."""
    value = _fed(name, feed, info)
    if isinstance(value, DeviceTensor):
        raise FeedError(f"feed {name!r} must be a numpy array here, got a DeviceTensor (.numpy() copies it)")
    return read_only(value if value.flags.c_contiguous else np.ascontiguousarray(value))


def check_device_feed(name: str, feed: Mapping[str, Any], info: TensorInfo, memory: Any) -> Feed:
    """``check_feed``, where the value may also be a ``DeviceTensor`` in ``memory`` (a program's)."""
    value = _fed(name, feed, info)
    if not isinstance(value, DeviceTensor):
        return check_feed(name, feed, info)
    if value.memory is not memory:
        raise FeedError(f"feed {name!r} is a DeviceTensor on {value.backend.device}, not in this program's memory; "
                        f"copy it with .numpy(), or prepare the program on the same place")
    return value


def _fed(name: str, feed: Mapping[str, Any], info: TensorInfo) -> Feed:
    """The value fed for ``name``, checked against the var's dtype and fixed dims."""
    if name not in feed:
        raise FeedError(f"missing feed {name!r} ({info.dtype.name}{list(info.shape)})")
    value: Feed = feed[name]
    dtype = value.dtype.numpy if isinstance(value, DeviceTensor) else value.dtype
    if dtype != info.dtype.numpy:
        raise FeedError(f"feed {name!r} has dtype {dtype}, expected {info.dtype.name}")
    if len(value.shape) != len(info.shape) or any(d not in (-1, v) for d, v in zip(info.shape, value.shape)):
        raise FeedError(f"feed {name!r} has shape {list(value.shape)}, expected {list(info.shape)} (-1 = any)")
    return value


def _hosts(values: Sequence[Feed]) -> list[np.ndarray]:
    """``values``, every one a host array (a run with device tensors has no float16 range checks)."""
    hosts = [value for value in values if isinstance(value, np.ndarray)]
    assert len(hosts) == len(values)
    return hosts


def read_only(value: np.ndarray) -> np.ndarray:
    """A read-only view of the caller's array: no kernel can write into a feed or a parameter."""
    view = value.view()
    view.flags.writeable = False
    return view
