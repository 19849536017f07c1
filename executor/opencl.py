"""The OpenCL backend (through pyopencl, imported when a device is first used).

* parameters are uploaded once, in their var's dtype (float16 parameters take half the bytes), or
  taken from a program prepared with ``share`` (weights and state, such as a key/value cache,
  bound by both);
  with ``precision="high"`` float16 tensors live as float32 on the device;
* activations live in the buffers of the liveness memory plan, sized in device bytes;
  reshape-like ops (``ALIAS``) share their input's buffer, and the ops of ``INPLACE_OPS`` write
  in place where the plan allows;
* every kernel's arguments are bound once, so a run uploads the feeds, enqueues the launches
  back to back on the in-order queue and waits only for the fetches;
* the buffers are the prepared program's, not a run's (``concurrent_runs = False``): runs from
  several threads take turns, one whole run (upload to download) at a time. Buffers per run
  would bind every kernel's arguments again each run, and the runs would queue on the one
  device queue anyway.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np

from ..ir.dtypes import DType
from ..ir.schema import TensorInfo
from ..kernels.opencl.base import ALIAS, INPLACE_OPS, Binder, DeviceArray, Launch
from ..kernels.opencl.runtime import Runtime, cl
from ..kernels.opencl.tuning import tuner
from .backend import Backend, Binding, ResolvedOp, Run, register_backend
from .memory import MemoryPlan

__all__ = ["OpenCLBackend"]


@register_backend
class OpenCLBackend(Backend):
    name = "opencl"
    concurrent_runs = False
    static_shapes = True

    def __init__(self, place: Any) -> None:
        super().__init__(place)
        self.rt: Runtime = place.runtime
        self.tune: bool = place.tune

    @property
    def device(self) -> str:
        return self.rt.caps.name

    @property
    def float16_mode(self) -> str:
        return self.rt.mode.value

    def storage(self, dtype: DType) -> np.dtype:
        return self.rt.storage(dtype)

    def sharing(self, resolved: ResolvedOp, kernel: Any) -> Iterator[tuple[str, str | None, str | None]]:
        """An ALIAS output is a view of the first input; only INPLACE_OPS overwrite their input."""
        inplace = resolved.op.type in INPLACE_OPS
        for index, (name, _, inplace_of) in enumerate(resolved.output_sources()):
            view = resolved.inputs[0] if kernel is ALIAS and index == 0 else None
            yield name, view, inplace_of if inplace else None

    def allocate(self, tensors: Mapping[str, TensorInfo], plan: MemoryPlan, parameters: Mapping[str, np.ndarray],
                 feeds: Sequence[str], shared: Mapping[str, DeviceArray] | None = None) -> dict[str, DeviceArray]:
        rt = self.rt
        arrays: dict[str, DeviceArray] = dict(shared or {})
        buffers = [rt.alloc(n) for n in plan.buffer_bytes]
        for name, index in plan.buffer_of.items():
            arrays[name] = self._array(tensors[name], buffers[index])
        for name, value in parameters.items():
            arrays[name] = self._array(tensors[name], rt.upload(value.astype(rt.storage(tensors[name].dtype))))
        for name in feeds:
            arrays[name] = self._array(tensors[name], rt.alloc(self._nbytes(tensors[name])))
        for name, root in plan.views.items():  # views of feeds and parameters
            if name not in arrays and root in arrays:
                arrays[name] = self._array(tensors[name], arrays[root].buffer)
        return arrays

    def _array(self, info: TensorInfo, buffer: Any) -> DeviceArray:
        return DeviceArray(buffer, tuple(info.shape), self.rt.storage(info.dtype))

    def _nbytes(self, info: TensorInfo) -> int:
        return int(np.prod(info.shape, dtype=np.int64)) * self.rt.storage(info.dtype).itemsize

    def bind(self, kernel: object, inputs: Sequence[DeviceArray], outputs: Sequence[DeviceArray | None],
             dying: Sequence[DeviceArray]) -> Binding:
        """``kernel`` is what an OpenCL factory made: a ``Binder``, or ``ALIAS`` (a view, nothing to run)."""
        if kernel is ALIAS:
            return Binding(None, 0)
        binder = cast(Binder, kernel)
        with tuner(self.rt).measure(self.tune):
            launches = binder(self.rt, inputs, [out if out is not None and out.nbytes else None for out in outputs])
        return Binding(_enqueue(launches), len(launches), functools.partial(_device_seconds, self.rt, launches))

    def start(self) -> list[np.ndarray]:
        """The host arrays of the run's non-blocking uploads, kept alive until ``finish``."""
        return []

    def upload(self, state: list[np.ndarray], handle: DeviceArray, array: np.ndarray) -> None:
        host = np.ascontiguousarray(array, dtype=handle.dtype)
        if host.nbytes:
            state.append(host)
            cl.enqueue_copy(self.rt.queue, handle.buffer, host, is_blocking=False)

    def download(self, state: list[np.ndarray], handle: DeviceArray, dtype: DType) -> np.ndarray:
        return self.to_host(handle, dtype)

    def finish(self, state: list[np.ndarray]) -> None:
        self.rt.finish()
        state.clear()

    @property
    def memory(self) -> Any:
        return self.rt

    def to_device(self, array: np.ndarray, dtype: DType) -> DeviceArray:
        host = np.ascontiguousarray(array, dtype=self.storage(dtype))
        return DeviceArray(self.rt.upload(host), host.shape, host.dtype)

    def upload_device(self, state: list[np.ndarray], handle: DeviceArray, value: DeviceArray) -> None:
        if handle.nbytes:
            cl.enqueue_copy(self.rt.queue, handle.buffer, value.buffer, byte_count=handle.nbytes)

    def fetch_device(self, state: list[np.ndarray], handle: DeviceArray, dtype: DType) -> DeviceArray:
        copy = DeviceArray(self.rt.alloc(handle.nbytes), handle.shape, handle.dtype)
        if handle.nbytes:
            cl.enqueue_copy(self.rt.queue, copy.buffer, handle.buffer, byte_count=handle.nbytes)
        return copy

    def to_host(self, value: DeviceArray, dtype: DType) -> np.ndarray:
        host = np.empty(value.shape, value.dtype)
        if host.nbytes:
            cl.enqueue_copy(self.rt.queue, host, value.buffer, is_blocking=True)
        return host.astype(dtype.numpy, copy=False)


def _device_seconds(rt: Runtime, launches: list[Launch]) -> float:
    """The device's seconds for ``launches``, enqueued once more on a profiling queue (the tuner's)
    after the work before them: each is a pre-bound enqueue whose first argument is ``rt``'s queue
    (``base.launch``, ``copy_launch``); any other runs as it is, untimed."""
    queue = tuner(rt).queue
    rt.finish()
    events = []
    for enqueue in launches:
        if isinstance(enqueue, functools.partial) and enqueue.args and enqueue.args[0] is rt.queue:
            events.append(enqueue.func(queue, *enqueue.args[1:], **enqueue.keywords))
        else:
            enqueue()
            rt.finish()
    queue.finish()
    return float(sum(event.profile.end - event.profile.start for event in events)) * 1e-9


def _enqueue(launches: list[Launch]) -> Run:
    def run(state: Any) -> None:
        for launch in launches:
            launch()

    return run
