"""OpenCL kernels of the tensor ops (``halfway.ir.ops.tensor``), data movement all, for floats, integers and bool (bits are copied as
they are, whatever the float16 mode).

reshape2, flatten_contiguous_range, squeeze2 and unsqueeze2 are ``ALIAS``: their output is their
input's buffer under the inferred shape, with no work. concat, split, slice, strided_slice
and transpose2 are one strided copy per operand (``movement.cl``; a split into up to
``SPLIT_PIECES`` pieces is one launch for them all), with offsets and strides
computed here (negative for a reversed strided_slice); pad fills the
output with the pad value and copies X into its interior; assign and bitcast are buffer copies. Bounds,
shapes and paddings given as tensors must be constants at prepare (``KernelSpec.constant``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

from ...ir.dtypes import DType
from ..registry import KernelSpec, register_kernel
from .base import (
    ALIAS,
    C_TYPES,
    INPLACE_OPS,
    Binder,
    DeviceArray,
    Launch,
    Unsupported,
    contiguous_strides,
    copy_launch,
    element_type,
    launch_1d,
    meta,
    source,
)
from .runtime import Runtime

__all__ = ["DTYPES", "SPLIT_PIECES", "strided_copy", "fill", "constant_ints", "known_shapes", "split_pieces"]

DTYPES = (DType.float32, DType.float16, *C_TYPES)
SPLIT_PIECES = 4
"""A split into at most this many pieces is one launch (``movement.cl``'s split4)."""
_VIEWS = ("reshape2", "flatten_contiguous_range", "squeeze2", "unsqueeze2")


def strided_copy(rt: Runtime, src: DeviceArray, dst: DeviceArray, dims: Sequence[int], src_offset: int,
                 src_strides: Sequence[int], dst_offset: int, dst_strides: Sequence[int]) -> Launch:
    """dst[dst_offset + idx . dst_strides] = src[src_offset + idx . src_strides] for idx over dims."""
    kernel = rt.kernel(source("movement.cl", defines={"ELEM": element_type(src.dtype)}), "strided_copy")
    n = int(np.prod(dims)) if dims else 1
    info = [max(len(dims), 1), src_offset, dst_offset, *(dims or [1]), *(src_strides or [0]), *(dst_strides or [0])]
    return launch_1d(rt, kernel, n, src.buffer, dst.buffer, meta(rt, info), np.int32(n))


def fill(rt: Runtime, dst: DeviceArray, value: float) -> Launch:
    """Every element of ``dst`` set to ``value`` (converted to its element type)."""
    kernel = rt.kernel(source("movement.cl", defines={"ELEM": element_type(dst.dtype)}), "fill")
    bits = np.asarray(value).astype(dst.dtype).reshape(1).view(f"u{dst.dtype.itemsize}")[0]
    return launch_1d(rt, kernel, dst.size, dst.buffer, bits, np.int32(dst.size))


def constant_ints(spec: KernelSpec, slots: Sequence[str], default: Sequence[int]) -> list[int]:
    """Ints from the first of ``slots`` the op has (a tensor, or a list of one-value tensors),
    which must be a constant at prepare; else ``default`` (the attr)."""
    for slot in slots:
        if spec.has_input(slot):
            values = [spec.constant(slot, i) for i in range(len(spec.inputs[slot]))]
            if any(v is None for v in values):
                raise Unsupported(f"{spec.op_type}'s {slot} is computed at run time")
            return [int(v) for value in values for v in np.asarray(value).reshape(-1)]
    return [int(v) for v in default]


def known_shapes(spec: KernelSpec) -> None:
    for infos in (*spec.inputs.values(), *spec.outputs.values()):
        for info in infos:
            if any(d < 0 for d in info.shape):
                raise Unsupported(f"{spec.op_type} with a shape unknown at prepare time")


def _view(spec: KernelSpec) -> object:
    known_shapes(spec)
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
    known_shapes(spec)
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
    known_shapes(spec)
    whole = spec.input("X").shape
    axis = spec.attrs["axis"] % len(whole)
    shapes = [o.shape for o in spec.outputs["Out"]]
    if len(shapes) <= SPLIT_PIECES:
        return split_pieces(whole, axis, [shape[axis] for shape in shapes])
    pieces = _axis_pieces(whole, shapes, axis)
    strides = contiguous_strides(whole)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], out, shape, offset, strides, 0, contiguous_strides(shape))
                for out, (shape, offset) in zip(outs, pieces) if out is not None]

    return bind


def split_pieces(whole: tuple[int, ...], axis: int, sizes: Sequence[int]) -> Binder:
    """``movement.cl``'s split4 of ``whole`` along ``axis`` into pieces of ``sizes`` (at most
    ``SPLIT_PIECES``): every piece written by one launch (a decoder splits its fused projections
    each layer, and each launch costs the host microseconds)."""
    ends = list(itertools.accumulate(sizes))[:-1]
    ends += [whole[axis]] * (SPLIT_PIECES - 1 - len(ends))
    inner = math.prod(whole[axis + 1:])

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        buffers = [out.buffer if out is not None else None for out in outs]
        buffers += [None] * (SPLIT_PIECES - len(buffers))
        live = sum(1 << p for p, buffer in enumerate(buffers) if buffer is not None)
        kernel = rt.kernel(source("movement.cl", defines={"ELEM": element_type(ins[0].dtype)}), "split4")
        return [launch_1d(rt, kernel, ins[0].size, ins[0].buffer, *buffers,
                          *(np.int32(v) for v in (whole[axis], inner, *ends, live, ins[0].size)))]

    return bind


def _transpose2(spec: KernelSpec) -> Binder:
    known_shapes(spec)
    x = spec.input("X").shape
    perm = [a % len(x) for a in spec.attrs["axis"]]
    in_strides = contiguous_strides(x)
    out = spec.output("Out").shape

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], outs[0], out, 0, [in_strides[p] for p in perm], 0, contiguous_strides(out))]

    return bind


def _slice(spec: KernelSpec) -> Binder:
    known_shapes(spec)
    starts = constant_ints(spec, ("StartsTensor", "StartsTensorList"), spec.attrs["starts"])
    ends = constant_ints(spec, ("EndsTensor", "EndsTensorList"), spec.attrs["ends"])
    shape = spec.input("Input").shape
    steps = [1] * len(spec.attrs["axes"])
    return _strided_view(spec, shape, zip(spec.attrs["axes"], starts, ends, steps), clamp=True)


def _strided_slice(spec: KernelSpec) -> Binder:
    if len(spec.inputs) > 1:
        raise Unsupported("strided_slice with tensor bounds")
    known_shapes(spec)
    attrs = spec.attrs
    bounds = zip(attrs["axes"], attrs["starts"], attrs["ends"], attrs["strides"])
    return _strided_view(spec, spec.input("Input").shape, bounds, clamp=False)


def _strided_view(spec: KernelSpec, shape: tuple[int, ...], bounds: Iterable[tuple[int, int, int, int]],
                  clamp: bool) -> Binder:
    """A copy of X[start:end:step] on each (axis, start, end, step); ``clamp``: Paddle's slice,
    whose bounds clamp to [0, dim] and whose end before its start selects nothing."""
    strides = contiguous_strides(shape)
    dims, steps, offset = list(shape), list(strides), 0
    for axis, start, end, step in bounds:
        axis %= len(shape)
        if clamp:
            start, end = (min(max(v + shape[axis] if v < 0 else v, 0), shape[axis]) for v in (start, end))
        picked = range(*slice(start, end, step).indices(shape[axis]))
        dims[axis] = len(picked)
        offset += (picked.start if picked else 0) * strides[axis]
        steps[axis] = step * strides[axis]

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [strided_copy(rt, ins[0], outs[0], dims, offset, steps, 0, contiguous_strides(dims))]

    return bind


def _pad(spec: KernelSpec) -> Binder:
    known_shapes(spec)
    if spec.has_input("ValueTensor") or spec.attrs["mode"] != "constant":
        raise Unsupported("pad with its value computed at run time, or of another mode than constant")
    paddings = constant_ints(spec, ("Paddings",), spec.attrs["paddings"])
    shape, out = spec.input("X").shape, spec.output("Out").shape
    if any(p < 0 for p in paddings):
        raise Unsupported("pad with negative paddings (a crop)")
    strides = contiguous_strides(out)
    offset = sum(paddings[2 * i] * strides[i] for i in range(len(shape)))
    value = spec.attrs["pad_value"]

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [fill(rt, outs[0], value),
                strided_copy(rt, ins[0], outs[0], shape, 0, contiguous_strides(shape), offset, strides)]

    return bind


def _assign(spec: KernelSpec) -> Binder:
    return lambda rt, ins, outs: [copy_launch(rt, ins[0], outs[0])]


def _register() -> None:
    for op_type in _VIEWS:
        register_kernel(op_type, "opencl", DTYPES)(_view)
    for op_type, factory in (("concat", _concat), ("split", _split), ("transpose2", _transpose2),
                             ("slice", _slice), ("strided_slice", _strided_slice), ("pad", _pad),
                             ("assign", _assign), ("bitcast", _assign)):
        register_kernel(op_type, "opencl", DTYPES)(factory)
    INPLACE_OPS.add("assign")


_register()
