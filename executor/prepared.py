"""Prepared programs: kernels chosen, shapes inferred and memory planned once; ``run`` only
binds feeds and dispatches pre-bound callables, dropping each value after its last reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from attrs import define, field

from halfway.ir.dtypes import DType
from halfway.ir.errors import FeedError, HalfwayError
from halfway.ir.operator import Operator
from halfway.ir.schema import TensorInfo
from halfway.kernels.registry import KernelKey
from halfway.executor.memory import MemoryPlan

__all__ = ["Step", "PreparedProgram", "PrepareReport", "check_feed", "read_only"]


@define
class Step:
    op: Operator
    key: KernelKey
    kernel: Any
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    frees: tuple[int, ...]


@define
class PrepareReport:
    """What prepare decided: a kernel per op, the memory plan's figures."""

    kernels: list[tuple[int, str, KernelKey]] = field(factory=list)
    memory: MemoryPlan = field(factory=MemoryPlan)

    @property
    def peak_activation_bytes(self) -> int:
        return self.memory.peak_bytes

    @property
    def no_reuse_activation_bytes(self) -> int:
        return self.memory.no_reuse_bytes


class PreparedProgram:
    """Runs one program for fixed feed names, fetch names and feed shapes."""

    def __init__(self, steps: list[Step], slots: list[np.ndarray | None], feeds: Sequence[tuple[str, int, TensorInfo]],
                 fetches: Sequence[int], fetch_names: Sequence[str], report: PrepareReport) -> None:
        self._steps = steps
        self._template = slots
        self._feeds = list(feeds)
        self._fetches = list(fetches)
        self.fetch_names = list(fetch_names)
        self.report = report

    @property
    def feed_names(self) -> list[str]:
        return [name for name, _, _ in self._feeds]

    def run(self, feed: Mapping[str, Any]) -> list[np.ndarray]:
        """Run on ``feed`` (name -> array); returns the fetched arrays in fetch order."""
        values = list(self._template)
        for name, slot, info in self._feeds:
            values[slot] = check_feed(name, feed, info)
        unknown = set(feed) - {name for name, _, _ in self._feeds}
        if unknown:
            raise FeedError(f"unknown feed name(s) {sorted(unknown)}; the program is fed {self.feed_names}")
        step = None
        try:
            for step in self._steps:
                result = step.kernel(*[values[i] for i in step.inputs])
                if len(step.outputs) == 1:
                    values[step.outputs[0]] = result
                else:
                    for slot, value in zip(step.outputs, result):
                        values[slot] = value
                for slot in step.frees:
                    values[slot] = None
        except HalfwayError as e:
            raise type(e)(f"while executing {_where(step)}: {e}") from e
        except Exception as e:  # a kernel's own failure: name the op it ran
            raise HalfwayError(f"while executing {_where(step)}: {type(e).__name__}: {e}") from e
        return [values[i] for i in self._fetches]


def _where(step: Step | None) -> str:
    if step is None:
        return "the program"
    return f"op #{step.op.index} {step.op.describe()} [{step.key}]"


def check_feed(name: str, feed: Mapping[str, Any], info: TensorInfo) -> np.ndarray:
    """The feed value for ``name``, checked against the var's dtype and fixed dims."""
    if name not in feed:
        raise FeedError(f"missing feed {name!r} ({info.dtype.name}{list(info.shape)})")
    value = feed[name]
    if not isinstance(value, np.ndarray):
        raise FeedError(f"feed {name!r} must be a numpy array, got {type(value).__name__}")
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


def numel_bytes(info: TensorInfo) -> int:
    n = 1
    for d in info.shape:
        n *= max(d, 0)
    return n * (info.dtype.itemsize if info.dtype is not DType.bool else 1)
