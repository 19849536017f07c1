"""OpenCL kernels of the data-movement ops, for float32, float16 and the index dtypes (bits are
copied as they are, whatever the float16 mode).

reshape2, flatten_contiguous_range, squeeze2 and unsqueeze2 are ``ALIAS``: their output is their
input's buffer under the inferred shape, with no work. concat, split, slice and transpose2 are
one strided copy per operand (``movement.cl``), with offsets and strides computed here; assign is
a buffer copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from halfway.ir.dtypes import DType
from halfway.kernels.opencl.base import (ALIAS, INPLACE_OPS, Binder, DeviceArray, Launch, Unsupported,
                                         contiguous_strides, copy_launch, element_type, launch_1d, meta, source)
from halfway.kernels.opencl.runtime import Runtime
from halfway.kernels.registry import KernelSpec, register_kernel

__all__ = ["DTYPES", "strided_copy"]

DTYPES = (DType.float32, DType.float16, DType.int32, DType.int64)
_VIEWS = ("reshape2", "flatten_contiguous_range", "squeeze2", "unsqueeze2")


def strided_copy(rt: Runtime, src: DeviceArray, dst: DeviceArray, dims: Sequence[int], src_offset: int,
                 src_strides: Sequence[int], dst_offset: int, dst_strides: Sequence[int]) -> Launch:
    """dst[dst_offset + idx . dst_strides] = src[src_offset + idx . src_strides] for idx over dims."""
    kernel = rt.kernel(source("movement.cl", defines={"ELEM": element_type(src.dtype)}), "strided_copy")
    n = int(np.prod(dims)) if dims else 1
    info = [max(len(dims), 1), src_offset, dst_offset, *(dims or [1]), *(src_strides or [0]), *(dst_strides or [0])]
    return launch_1d(rt, kernel, n, src.buffer, dst.buffer, meta(rt, info), np.int32(n))


def _known(spec: KernelSpec) -> None:
    for infos in (*spec.inputs.values(), *spec.outputs.values()):
        for info in infos:
            if any(d < 0 for d in info.shape):
                raise Unsupported(f"{spec.op_type} with a shape unknown at prepare time")


def _view(spec: KernelSpec) -> object:
    _known(spec)
    return ALIAS


def _axis_pieces(whole: tuple[int, ...], pieces: Sequence[tuple[int, ...]],
                 axis: int) -> list[tuple[tuple[int, ...], int]]:
    """(piece shape, element offset in the whole) of each piece along ``axis``."""
    stride = contiguous_strides(whole)[axis]
    out, start = [], 0
    for shape in pieces:
        out.append((shape, start * stride))
        start += shape[axis]
    return out


def _concat(spec: KernelSpec) -> Binder:
    if spec.has_input("AxisTensor"):
        raise Unsupported("concat with an AxisTensor")
    _known(spec)
    whole = spec.output("Out").shape
    axis = spec.attrs["axis"] % len(whole)
    pieces = _axis_pieces(whole, [i.shape for i in spec.inputs["X"]], axis)
    strides = contiguous_strides(whole)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, x, outs[0], shape, 0, contiguous_strides(shape), offset, strides)
                for x, (shape, offset) in zip(ins, pieces)]

    return bind


def _split(spec: KernelSpec) -> Binder:
    if spec.has_input("AxisTensor") or spec.has_input("SectionsTensorList"):
        raise Unsupported("split with tensor axis or sections")
    _known(spec)
    whole = spec.input("X").shape
    axis = spec.attrs["axis"] % len(whole)
    pieces = _axis_pieces(whole, [o.shape for o in spec.outputs["Out"]], axis)
    strides = contiguous_strides(whole)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], out, shape, offset, strides, 0, contiguous_strides(shape))
                for out, (shape, offset) in zip(outs, pieces) if out is not None]

    return bind


def _transpose2(spec: KernelSpec) -> Binder:
    _known(spec)
    x = spec.input("X").shape
    perm = [a % len(x) for a in spec.attrs["axis"]]
    in_strides = contiguous_strides(x)
    out = spec.output("Out").shape

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], outs[0], out, 0, [in_strides[p] for p in perm], 0, contiguous_strides(out))]

    return bind


def _slice(spec: KernelSpec) -> Binder:
    if any(spec.has_input(s) for s in ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")):
        raise Unsupported("slice with tensor bounds")
    _known(spec)
    shape = spec.input("Input").shape
    strides = contiguous_strides(shape)
    dims, offset = list(shape), 0
    for axis, start, end in zip(spec.attrs["axes"], spec.attrs["starts"], spec.attrs["ends"]):
        axis %= len(shape)
        lo, hi, _ = slice(start, end).indices(shape[axis])
        dims[axis] = max(hi - lo, 0)
        offset += lo * strides[axis]

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], outs[0], dims, offset, strides, 0, contiguous_strides(dims))]

    return bind


def _assign(spec: KernelSpec) -> Binder:
    return lambda rt, ins, outs: [copy_launch(rt, ins[0], outs[0])]


def _register() -> None:
    for op_type in _VIEWS:
        register_kernel(op_type, "opencl", DTYPES)(_view)
    for op_type, factory in (("concat", _concat), ("split", _split), ("transpose2", _transpose2),
                             ("slice", _slice), ("assign", _assign)):
        register_kernel(op_type, "opencl", DTYPES)(factory)
    INPLACE_OPS.add("assign")


_register()
