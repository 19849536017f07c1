"""Prepared programs on an OpenCL device.

``prepare`` resolves every op as the numpy executor does (shapes, dtypes), then per op takes
the OpenCL kernel registered for (op type, "opencl", dtype), or the numpy kernel when there is
none or it does not cover the op's configuration (``Unsupported``) — each such fallback is listed
in the report, and ``strict`` makes it an error. Then:

* parameters are uploaded once, in their var's dtype (float16 parameters take half the bytes);
  with ``precision="high"`` float16 tensors live as float32 on the device;
* activations live in the buffers of the liveness memory plan (``plan_memory``), sized in
  device bytes; reshape-like ops (``ALIAS``) share their input's buffer, and elementwise ops
  write in place where the plan allows;
* every kernel's arguments are bound once, so ``run`` uploads the feeds, enqueues the launches
  back to back on the in-order queue and waits only for the fetches, converted to each fetched
  var's dtype. A numpy fallback reads its inputs back and uploads its outputs (a host sync).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyopencl as cl
from attrs import define, field

from halfway.ir.block import Block
from halfway.ir.dtypes import DType
from halfway.ir.errors import FeedError, HalfwayError, KernelNotFoundError
from halfway.ir.schema import TensorInfo
from halfway.ir.scope import Scope
from halfway.kernels import opencl as _opencl_kernels  # noqa: F401  (registers the OpenCL kernels)
from halfway.kernels.opencl.base import ALIAS, INPLACE_OPS, DeviceArray, Launch, Unsupported
from halfway.kernels.opencl.runtime import Runtime
from halfway.kernels.registry import KernelKey, find_kernel, has_kernel
from halfway.executor.executor import _output_sources, _Pending, _Preparer, _SKIPPED
from halfway.executor.memory import Value, plan_memory
from halfway.executor.place import OpenCLPlace
from halfway.executor.prepared import PrepareReport, check_feed

__all__ = ["OpenCLReport", "OpenCLProgram", "prepare_opencl"]


@define
class OpenCLReport(PrepareReport):
    """PrepareReport plus the device, its float16 mode, the numpy fallbacks and the launch count."""

    device: str = ""
    float16_mode: str = ""
    fallbacks: list[tuple[int, str, str]] = field(factory=list)
    launches: int = 0

    def summary(self) -> str:
        lines = [f"OpenCL device {self.device}, float16 mode {self.float16_mode}, {len(self.kernels)} ops, "
                 f"{self.launches} launches, {len(self.fallbacks)} numpy fallback(s)"]
        lines += [f"  op #{index} {op_type} -> numpy: {why}" for index, op_type, why in self.fallbacks]
        return "\n".join(lines)


@define
class _Bound:
    """One op's launches and where an error in them is reported."""

    where: str
    launches: list[Launch]


class OpenCLProgram:
    """A program prepared on an OpenCL device for fixed feeds, fetches and feed shapes."""

    def __init__(self, rt: Runtime, steps: list[_Bound], feeds: list[tuple[str, DeviceArray, TensorInfo]],
                 fetches: list[tuple[DType, DeviceArray]], fetch_names: list[str], report: OpenCLReport) -> None:
        self.runtime = rt
        self._steps = steps
        self._feeds = feeds
        self._fetches = fetches
        self.fetch_names = fetch_names
        self.report = report

    @property
    def feed_names(self) -> list[str]:
        return [name for name, _, _ in self._feeds]

    def run(self, feed: Mapping[str, Any]) -> list[np.ndarray]:
        """Upload ``feed``, enqueue every op, and return the fetched arrays in fetch order."""
        unknown = set(feed) - set(self.feed_names)
        if unknown:
            raise FeedError(f"unknown feed name(s) {sorted(unknown)}; the program is fed {self.feed_names}")
        queue = self.runtime.queue
        # every feed checked first; the host arrays the non-blocking uploads read stay alive until
        # the queue is done
        staged = [np.ascontiguousarray(check_feed(name, feed, info), dtype=target.dtype)
                  for name, target, info in self._feeds]
        for (_, target, _), value in zip(self._feeds, staged):
            cl.enqueue_copy(queue, target.buffer, value, is_blocking=False)
        bound = None
        try:
            for bound in self._steps:
                for enqueue in bound.launches:
                    enqueue()
        except HalfwayError as e:
            queue.finish()
            raise type(e)(f"while executing {bound.where}: {e}") from e
        except Exception as e:  # a driver's failure: name the op it ran
            queue.finish()
            raise HalfwayError(f"while executing {bound.where if bound else 'the program'}: "
                               f"{type(e).__name__}: {e}") from e
        results = [_download(queue, array).astype(dtype.numpy, copy=False) for dtype, array in self._fetches]
        queue.finish()
        return results

    def profile(self, feed: Mapping[str, Any]) -> list[tuple[str, float]]:
        """Run once waiting after every op: (op, seconds) per op, for finding the slow ones."""
        self.run(feed)
        times = []
        for bound in self._steps:
            start = time.perf_counter()
            for enqueue in bound.launches:
                enqueue()
            self.runtime.finish()
            times.append((bound.where, time.perf_counter() - start))
        return times


def _download(queue: Any, array: DeviceArray) -> np.ndarray:
    host = np.empty(array.shape, array.dtype)
    if host.nbytes:
        cl.enqueue_copy(queue, host, array.buffer, is_blocking=True)
    return host


def prepare_opencl(place: OpenCLPlace, block: Block, scope: Scope, feed_names: list[str], fetch_names: list[str],
                   feed_shapes: dict[str, Any], reuse_memory: bool = True) -> OpenCLProgram:
    return _OpenCLPreparer(place, block, scope, reuse_memory).prepare_device(feed_names, fetch_names, feed_shapes)


class _OpenCLPreparer(_Preparer):
    """Resolves ops through the numpy preparer (which also yields the fallback factories), then
    binds OpenCL kernels to device arrays."""

    def __init__(self, place: OpenCLPlace, block: Block, scope: Scope, reuse: bool) -> None:
        super().__init__(block, "numpy", scope, reuse)
        self.place = place
        self.rt: Runtime = place.runtime
        self.arrays: dict[str, DeviceArray] = {}

    def prepare_device(self, feed_names: list[str], fetch_names: list[str],
                       feed_shapes: dict[str, Any]) -> OpenCLProgram:
        feeds = [self._bind_feed(name, feed_shapes.get(name)) for name in feed_names]
        pending = [self._resolve(op) for op in self.block.ops if op.type not in _SKIPPED]
        for name in fetch_names:
            if name not in self.infos:
                raise FeedError(f"cannot fetch {name!r}: no op computes it and it is neither fed nor a parameter")
        report = OpenCLReport(device=self.rt.caps.name, float16_mode=self.rt.mode.value)
        kernels = [self._device_kernel(p, report) for p in pending]
        if report.fallbacks and self.place.strict:
            raise KernelNotFoundError("strict OpenCL place: no OpenCL kernel for " + "; ".join(
                f"op #{i} {t} ({why})" for i, t, why in report.fallbacks))
        report.memory = plan_memory(self._device_values(pending, kernels, fetch_names), reuse=self.reuse)
        self._allocate(report, [name for name, _, _ in feeds])
        steps = [self._bind(p, kernel, report) for p, kernel in zip(pending, kernels)]
        report.launches = sum(len(s.launches) for s in steps)
        device_feeds = [(name, self.arrays[name], info) for name, _, info in feeds]
        fetches = [(self.infos[n].dtype, self._array(n)) for n in fetch_names]
        return OpenCLProgram(self.rt, steps, device_feeds, fetches, fetch_names, report)

    # -- kernel choice --------------------------------------------------------------------------
    def _device_kernel(self, p: _Pending, report: OpenCLReport) -> Any:
        """The OpenCL binder (or ALIAS) of ``p``, or None after recording a numpy fallback."""
        if not has_kernel(p.op.type, "opencl", p.spec.dtype):
            report.fallbacks.append((p.op.index, p.op.type, f"no OpenCL kernel for {p.spec.dtype.name}"))
            return None
        try:
            return find_kernel(p.op.type, "opencl", p.spec.dtype)(p.spec)
        except Unsupported as e:
            report.fallbacks.append((p.op.index, p.op.type, str(e)))
            return None

    # -- memory ---------------------------------------------------------------------------------
    def _device_bytes(self, name: str) -> int:
        info = self.infos[name]
        return int(np.prod(info.shape, dtype=np.int64)) * self.rt.storage(info.dtype).itemsize

    def _device_values(self, pending: list[_Pending], kernels: list[Any], fetch_names: list[str]) -> list[Value]:
        """The memory plan's values: ALIAS outputs are views; only INPLACE_OPS write in place."""
        names = {s: n for n, s in self.slots.items()}
        values: dict[str, Value] = {}
        for i, (p, kernel) in enumerate(zip(pending, kernels)):
            for s in p.inputs:
                values.setdefault(names[s], Value(names[s], self._device_bytes(names[s]), None, i)).last = i
            for index, (name, _, inplace_of) in enumerate(_output_sources(p.op, p.schema)):
                if name in values:
                    values[name].last = i
                    continue
                owned = self.values[self.slots[name]] is None
                view = names[p.inputs[0]] if kernel is ALIAS and index == 0 else None
                inplace = kernel is not None and p.op.type in INPLACE_OPS
                values[name] = Value(name, self._device_bytes(name), i if owned else None, i, view,
                                     inplace_of if inplace else None)
        for name in fetch_names:
            if name in values:
                values[name].last = len(pending)
        return list(values.values())

    def _allocate(self, report: OpenCLReport, feed_names: list[str]) -> None:
        """Device arrays: planned buffers for activations, one upload per parameter, one buffer per feed."""
        rt = self.rt
        buffers = [rt.alloc(n) for n in report.memory.buffer_bytes]
        for name, index in report.memory.buffer_of.items():
            self.arrays[name] = self._device_array(name, buffers[index])
        for name, slot in self.slots.items():
            value = self.values[slot]
            if value is not None:
                stored = value.astype(rt.storage(self.infos[name].dtype))
                self.arrays[name] = self._device_array(name, rt.upload(stored))
        for name in feed_names:
            self.arrays[name] = self._device_array(name, rt.alloc(self._device_bytes(name)))
        for name, root in report.memory.views.items():  # views of feeds and parameters
            if name not in self.arrays and root in self.arrays:
                self.arrays[name] = self._device_array(name, self.arrays[root].buffer)

    def _device_array(self, name: str, buffer: Any) -> DeviceArray:
        info = self.infos[name]
        return DeviceArray(buffer, tuple(info.shape), self.rt.storage(info.dtype))

    def _array(self, name: str) -> DeviceArray:
        if name not in self.arrays:
            raise HalfwayError(f"var {name!r} has no device buffer (a value nobody writes)")
        return self.arrays[name]

    # -- binding --------------------------------------------------------------------------------
    def _bind(self, p: _Pending, kernel: Any, report: OpenCLReport) -> _Bound:
        names = {s: n for n, s in self.slots.items()}
        key = KernelKey(p.op.type, "opencl" if kernel is not None else "numpy", p.spec.dtype)
        report.kernels.append((p.op.index, p.op.type, key))
        where = f"op #{p.op.index} {p.op.describe()} [{key}]"
        ins = [self._array(names[s]) for s in p.inputs]
        outs = [self.arrays.get(names[s]) if self._device_bytes(names[s]) else None for s in p.outputs]
        if kernel is ALIAS:
            return _Bound(where, [])
        try:
            if kernel is None:
                return _Bound(where, [self._fallback(p, ins, outs)])
            return _Bound(where, kernel(self.rt, ins, outs))
        except HalfwayError as e:
            raise type(e)(f"while preparing {where}: {e}") from e

    def _fallback(self, p: _Pending, ins: list[DeviceArray], outs: list[DeviceArray | None]) -> Launch:
        """The numpy kernel between a read-back of its inputs and an upload of its outputs."""
        names = {s: n for n, s in self.slots.items()}
        kernel = p.factory(p.spec)
        queue = self.rt.queue
        params = [self.values[s] for s in p.inputs]
        in_dtypes = [self.infos[names[s]].dtype.numpy for s in p.inputs]
        single = len(p.outputs) == 1

        def run() -> None:
            args = [param if param is not None else _download(queue, x).astype(dtype, copy=False)
                    for param, x, dtype in zip(params, ins, in_dtypes)]
            results = kernel(*args)
            for out, result in zip(outs, [results] if single else results):
                if out is not None and result is not None:
                    host = np.ascontiguousarray(np.asarray(result), dtype=out.dtype)
                    cl.enqueue_copy(queue, out.buffer, host, is_blocking=True)

        return run
