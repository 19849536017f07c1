"""What every OpenCL kernel module shares: device arrays, the binder protocol, kernel sources
and pre-bound launches.

An OpenCL kernel factory is registered in the kernel registry under backend ``"opencl"``. At
prepare time it gets the ``KernelSpec`` and returns either

* a **binder** ``bind(rt, inputs, outputs) -> list[Launch]``: given the runtime and the op's
  device arrays (in ``spec.input_keys`` / ``spec.output_keys`` order; None for an output nobody
  reads), it compiles what it needs and returns zero-argument callables that enqueue the op's
  work with every argument already set, so ``run`` is a loop of enqueues and no host syncs;
* or ``ALIAS``: the op's first output is its first input's buffer under another shape (reshape2
  and its kin), so there is nothing to run.

A factory raises ``Unsupported`` (``halfway.kernels.registry.Unsupported``) for a configuration
it has no kernel for (an NHWC layout, an attr given as a tensor); the registry then picks the
op's numpy kernel instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np
from attrs import frozen

from ...ir.dtypes import DType
from ..registry import Unsupported
from .runtime import Runtime, cl

__all__ = ["DeviceArray", "Launch", "Binder", "ALIAS", "INPLACE_OPS", "Unsupported", "source", "with_header", "launch",
           "launch_1d", "copy_launch", "meta", "element_type", "contiguous_strides", "C_TYPES", "element_options",
           "broadcast_strides", "index_defines", "param_defines", "work_group"]

Launch = Callable[[], Any]


@frozen
class DeviceArray:
    """A tensor in a device buffer: contiguous, row-major, starting at the buffer's start."""

    buffer: Any
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


Binder = Callable[[Runtime, Sequence[DeviceArray], Sequence[DeviceArray | None]], list[Launch]]


class _Alias:
    def __repr__(self) -> str:
        return "ALIAS"


ALIAS = _Alias()


INPLACE_OPS: set[str] = set()
"""Op types whose OpenCL kernels read each element before writing that element alone, so the
memory plan may give their output the buffer of the input they overwrite (schema ``inplace``)."""


@functools.cache
def _read(name: str) -> str:
    return resources.files("halfway.kernels.opencl").joinpath("cl", name).read_text()


def source(*names: str, defines: Mapping[str, Any] | None = None) -> str:
    """The program text: ``#define``s, the common header, then the named .cl files."""
    return with_header("\n".join(_read(n) for n in names), defines)


def with_header(text: str, defines: Mapping[str, Any] | None = None) -> str:
    """``text`` (OpenCL C) after ``#define``s and the common header (T, REAL, LOAD, STORE, ...)."""
    lines = [f"#define {k} {v}".rstrip() for k, v in (defines or {}).items()]
    return "\n".join([*lines, _read("common.h"), text])


def launch(rt: Runtime, kernel: Any, gws: Sequence[int], lws: Sequence[int] | None, *args: Any,
           queue: Any = None) -> Launch:
    """A pre-bound enqueue of ``kernel`` with ``args`` over ``gws`` (rounded up to ``lws``) on ``rt``'s
    queue, or ``queue``."""
    kernel.set_args(*args)
    if lws is not None:
        gws = [-(-g // l) * l for g, l in zip(gws, lws)]
    enqueue = functools.partial(cl.enqueue_nd_range_kernel, rt.queue if queue is None else queue, kernel, tuple(gws),
                                None if lws is None else tuple(lws))
    enqueue.keep = args  # the kernel holds raw handles: keep its buffers alive as long as the launch
    return enqueue


def launch_1d(rt: Runtime, kernel: Any, items: int, *args: Any) -> Launch:
    """One work-item per ``items``; 256-wide work-groups on GPUs, the driver's choice elsewhere."""
    return launch(rt, kernel, (max(items, 1),), (256,) if rt.caps.is_gpu else None, *args)


def copy_launch(rt: Runtime, src: DeviceArray, dst: DeviceArray) -> Launch:
    """A device-to-device copy of ``src`` into ``dst`` (nothing when they share the buffer)."""
    if src.buffer.int_ptr == dst.buffer.int_ptr:
        return lambda: None
    return functools.partial(cl.enqueue_copy, rt.queue, dst.buffer, src.buffer, byte_count=src.nbytes)


def meta(rt: Runtime, values: Sequence[int]) -> Any:
    """A small int32 buffer of shape and stride data, uploaded once at bind time."""
    return rt.upload(np.asarray(values, np.int32))


_ELEMENT_TYPES = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


def element_type(dtype: np.dtype) -> str:
    """The OpenCL type that copies elements of ``dtype`` bit for bit."""
    return _ELEMENT_TYPES[np.dtype(dtype).itemsize]


C_TYPES = {DType.bool: "uchar", DType.int8: "char", DType.uint8: "uchar", DType.int16: "short", DType.uint16: "ushort",
           DType.int32: "int", DType.uint32: "uint", DType.int64: "long", DType.uint64: "ulong"}
"""The OpenCL C type of each integer and bool dtype (bool is a uchar of 0 or 1)."""


def element_options(rt: Runtime, dtype: DType) -> tuple[str, ...]:
    """Build options selecting the common header's T / REAL for ``dtype``: the float modes of
    ``Runtime.float_options``, or an integer type (``INT_T``) whose arithmetic is its own."""
    if dtype in C_TYPES:
        return (f"-DINT_T={C_TYPES[dtype]}", f"-DINT_T4={C_TYPES[dtype]}4")
    return rt.float_options(dtype)


def index_defines(dtype: DType) -> dict[str, str]:
    """IDX: the C type of an index tensor (int32 or int64)."""
    return {"IDX": C_TYPES[dtype]}


def param_defines(rt: Runtime, dtype: DType) -> dict[str, str]:
    """P, LOADP and STOREP: a parameter of ``dtype`` (norm scales, batch norm statistics) read and
    written as float, whatever the element type T of the program."""
    if rt.storage(dtype) == np.float16:
        return {"P": "half", "LOADP(p, i)": "vload_half((i), (p))", "STOREP(p, i, v)": "vstore_half_rte((v), (i), (p))"}
    return {"P": "float", "LOADP(p, i)": "((p)[i])", "STOREP(p, i, v)": "((p)[i] = (v))"}


def work_group(rt: Runtime, items: int) -> int:
    """A power-of-two work-group size for a reduction over ``items``: up to 256 on GPUs, 16 on
    CPUs (whose work-items run in one thread, so a wide group only adds barriers)."""
    cap = min(256 if rt.caps.is_gpu else 16, rt.caps.max_work_group_size)
    size = 1
    while size < cap and size < items:
        size *= 2
    return size


def broadcast_strides(shapes: Sequence[Sequence[int]], out: Sequence[int]) -> list[int]:
    """[rank, out dims, then each operand's strides] for numpy-broadcast operands (stride 0 on
    the dims an operand broadcasts; a scalar output counts as rank 1)."""
    rank = len(out)
    info = [max(rank, 1), *(list(out) or [1])]
    for shape in shapes:
        padded = [1] * (rank - len(shape)) + list(shape)
        full = contiguous_strides(padded)
        info += [0 if d == 1 and o != 1 else s for d, o, s in zip(padded, out, full)] or [0]
    return info


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]
