"""OpenCL kernels of the indexing ops (``indexing.cl``): where, gather (lookup_table_v2 too), gather_nd,
take_along_axis on any element type (bits copied as they are), and cumsum on floats and
integers; expand_v2 is one ``tensor.strided_copy``, reading X with stride 0 along the dims it
broadcasts. Index tensors are int32 or int64; a negative index counts from the end, and one
outside its dim reads the dim's nearest end (the numpy kernels raise there; a device kernel cannot).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ..registry import KernelSpec, register_kernel
from .base import (
    Binder,
    DeviceArray,
    Launch,
    Unsupported,
    broadcast_strides,
    contiguous_strides,
    element_options,
    element_type,
    index_defines,
    launch_1d,
    meta,
    source,
)
from .elementwise import INTEGERS
from .runtime import Runtime
from .tensor import DTYPES, constant_ints, known_shapes, strided_copy

__all__: list[str] = []

FLOATS = (DType.float32, DType.float16)


def _kernel(rt: Runtime, name: str, elem: np.dtype, index: DType | None = None) -> object:
    defines = {"ELEM": element_type(elem), **(index_defines(index) if index is not None else {})}
    return rt.kernel(source("indexing.cl", defines=defines), name)


def _where(spec: KernelSpec) -> Binder:
    out = spec.output("Out").shape
    info = broadcast_strides([spec.input(s).shape for s in ("Condition", "X", "Y")], out)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        o = outs[0]
        return [launch_1d(rt, _kernel(rt, "where_bcast", o.dtype), o.size, *(a.buffer for a in ins), o.buffer,
                          meta(rt, info), np.int32(o.size))]

    return bind


def _gather(spec: KernelSpec) -> Binder:
    x = spec.input("X").shape
    axis = constant_ints(spec, ("Axis",), [spec.attrs["axis"]])[0] % len(x)
    return _gather_binder(spec.input("Index").dtype, math.prod(spec.input("Index").shape), x[axis],
                          math.prod(x[axis + 1:]))


def _gather_binder(index: DType, count: int, axis_len: int, inner: int) -> Binder:
    """``indexing.cl``'s gather of ``count`` indices along a dim of ``axis_len``, ``inner`` elements apart."""

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        o = outs[0]
        return [launch_1d(rt, _kernel(rt, "gather", o.dtype, index), o.size, ins[0].buffer, ins[1].buffer, o.buffer,
                          *(np.int32(v) for v in (count, axis_len, inner, o.size)))]

    return bind


def _lookup_table(spec: KernelSpec) -> Binder:
    """``gather`` of W's rows; a padding_idx (zero rows) is left to numpy."""
    if spec.attrs["padding_idx"] != -1:
        raise Unsupported("lookup_table_v2 with a padding_idx")
    rows, width = spec.input("W").shape
    ids = spec.input("Ids")
    return _gather_binder(ids.dtype, math.prod(ids.shape), rows, width)


def _gather_nd(spec: KernelSpec) -> Binder:
    if spec.attrs.get("batch_dims"):
        raise Unsupported("gather_nd with batch_dims")
    x, index = spec.input("X").shape, spec.input("Index")
    depth = index.shape[-1] if index.shape else 0
    info = [depth, *x[:depth], *contiguous_strides(x)[:depth]]
    inner = math.prod(x[depth:])

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        o = outs[0]
        return [launch_1d(rt, _kernel(rt, "gather_nd", o.dtype, index.dtype), o.size, ins[0].buffer, ins[1].buffer,
                          o.buffer, meta(rt, info), np.int32(inner), np.int32(o.size))]

    return bind


def _take_along_axis(spec: KernelSpec) -> Binder:
    x, index = spec.input("Input").shape, spec.input("Index")
    if not x:
        raise Unsupported("take_along_axis of a 0-d tensor")
    axis = spec.attrs["Axis"] % len(x)
    info = [len(x), axis, *index.shape, *contiguous_strides(x), x[axis]]

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        o = outs[0]
        return [launch_1d(rt, _kernel(rt, "take_along_axis", o.dtype, index.dtype), o.size, ins[0].buffer,
                          ins[1].buffer, o.buffer, meta(rt, info), np.int32(o.size))]

    return bind


def _cumsum(spec: KernelSpec) -> Binder:
    attrs = spec.attrs
    if spec.has_input("AxisTensor"):
        raise Unsupported("cumsum along an axis computed at run time")
    shape = spec.input("X").shape or (1,)
    if attrs["flatten"]:
        shape = (math.prod(shape),)
    axis = attrs["axis"] % len(shape)
    length, inner = shape[axis], math.prod(shape[axis + 1:])
    lines = math.prod(shape) // max(length, 1)
    defines = {"CUMSUM": "", **{name.upper(): "" for name in ("exclusive", "reverse") if attrs[name]}}

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("indexing.cl", defines=defines), "cumsum", element_options(rt, spec.dtype))
        return [launch_1d(rt, kernel, lines, ins[0].buffer, outs[0].buffer, np.int32(length), np.int32(inner),
                          np.int32(lines))]

    return bind


def _expand(spec: KernelSpec) -> Binder:
    """X read with stride 0 along the dims it broadcasts (the target shape is Out's, known at prepare)."""
    known_shapes(spec)
    out = spec.output("Out").shape
    info = broadcast_strides([spec.input("X").shape], out)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], outs[0], out, 0, info[1 + len(out):], 0, contiguous_strides(out))]

    return bind


def _register() -> None:
    for op_type, factory in (("where", _where), ("gather", _gather), ("lookup_table_v2", _lookup_table),
                             ("gather_nd", _gather_nd),
                             ("take_along_axis", _take_along_axis), ("expand_v2", _expand)):
        register_kernel(op_type, "opencl", DTYPES)(factory)
    register_kernel("cumsum", "opencl", FLOATS + INTEGERS)(_cumsum)


_register()
