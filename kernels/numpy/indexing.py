"""numpy kernels of the selection and indexing ops (``halfway.ir.ops.indexing``).

The ops that only move data (where, expand_v2, tile, tril_triu, gather, gather_nd, take_along_axis,
top_k_v2) run every dtype as it is, float16 included; the ones that compute (cumsum, the
scatters' reductions, einsum) widen float16 to float32 and round once. Index tensors out of
``[-dim, dim)`` are errors naming the op (numpy would wrap or raise IndexError).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.ops.family import NUMBERS
from ..registry import Kernel, KernelSpec, register_kernel
from .tensor import DATA_DTYPES, IntSource, int_source, register_data_kernel

__all__: list[str] = []

_NUMBERS = (*NUMBERS, DType.float64)


def _in_range(op_type: str, index: np.ndarray, size: int) -> np.ndarray:
    """``index`` with negative entries counted from the end; an error outside [-size, size)."""
    if index.size and (index.min() < -size or index.max() >= size):
        raise HalfwayError(f"{op_type}: an index is outside [{-size}, {size}) (min {index.min()}, max {index.max()})")
    return np.where(index < 0, index + size, index)


@register_data_kernel("where")
def _where(spec: KernelSpec) -> Kernel:
    return lambda cond, x, y: np.where(cond, x, y)


@register_data_kernel("expand_v2")
def _expand(spec: KernelSpec) -> Kernel:
    """numpy's broadcast to the target, where -1 (Paddle) keeps X's dim as 1 does (numpy, ONNX)."""
    target_of = int_source(spec, ["Shape"], spec.attrs["shape"])

    def run(*args: np.ndarray) -> np.ndarray:
        x, target = args[0], target_of(args)
        lead = len(target) - x.ndim
        shape = np.broadcast_shapes(x.shape, tuple(1 if d == -1 and i >= lead else d for i, d in enumerate(target)))
        return np.broadcast_to(x, shape).copy()  # a broadcast view is read-only; later ops may write in place

    return run


@register_data_kernel("tile")
def _tile(spec: KernelSpec) -> Kernel:
    times_of = int_source(spec, ["RepeatTimes"], spec.attrs["repeat_times"])
    return lambda *args: np.tile(args[0], times_of(args))


@register_data_kernel("tril_triu")
def _tril_triu(spec: KernelSpec) -> Kernel:
    fn = np.tril if spec.attrs["lower"] else np.triu
    k_of = int_source(spec, ["DiagonalTensor"], [spec.attrs["diagonal"]])
    return lambda *args: fn(args[0], k_of(args)[0])


def _running(fn: Callable[..., np.ndarray], identity: Callable[..., np.ndarray], axis_of: IntSource,
             exclusive: bool, reverse: bool) -> Kernel:
    """``fn`` (np.cumsum, np.cumprod) along the axis ``axis_of`` reads (the attr or the
    AxisTensor); ``exclusive`` shifts the run by one, ``identity`` (zeros_like, ones_like) first."""

    def run(*args: np.ndarray) -> np.ndarray:
        x = args[0]
        if not x.ndim:
            return x.copy() if not exclusive else identity(x)
        axis = axis_of(args)[0] % x.ndim
        data = np.flip(x, axis) if reverse else x
        out = fn(data, axis=axis, dtype=x.dtype)
        if exclusive:
            out = np.concatenate([identity(np.take(out, [0], axis)), np.delete(out, -1, axis)], axis)
        return np.flip(out, axis) if reverse else out

    return run


@register_kernel("cumsum", dtypes=_NUMBERS)
def _cumsum(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    running = _running(np.cumsum, np.zeros_like, int_source(spec, ["AxisTensor"], [attrs["axis"]]),
                       attrs["exclusive"], attrs["reverse"])
    return (lambda x, *axis: running(x.reshape(-1), *axis)) if attrs["flatten"] else running


@register_kernel("cumprod", dtypes=_NUMBERS)
def _cumprod(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    return _running(np.cumprod, np.ones_like, int_source(spec, ["AxisTensor"], [attrs["dim"]]),
                    attrs["exclusive"], attrs["reverse"])


@register_kernel("range", dtypes=_NUMBERS)
def _range(spec: KernelSpec) -> Kernel:
    dtype = spec.output("Out").dtype.numpy

    def run(start: np.ndarray, end: np.ndarray, step: np.ndarray) -> np.ndarray:
        s, e, d = (np.asarray(v).reshape(-1)[0] for v in (start, end, step))
        if d == 0:
            raise HalfwayError("range: Step is 0")
        count = max(int(np.ceil((e - s) / d)), 0)
        return (s + np.arange(count, dtype=dtype) * d).astype(dtype)

    return run


def _arg(pick: Callable[..., np.ndarray]) -> Callable[[KernelSpec], Kernel]:
    def make(spec: KernelSpec) -> Kernel:
        attrs, dtype = spec.attrs, spec.output("Out").dtype.numpy
        shape = spec.output("Out").shape

        def run(x: np.ndarray) -> np.ndarray:
            if attrs["flatten"]:
                return np.asarray(pick(x.reshape(-1)), dtype).reshape(shape)
            axis = attrs["axis"] % max(x.ndim, 1)
            return np.asarray(pick(x, axis=axis, keepdims=attrs["keepdims"]), dtype)

        return run

    return make


register_kernel("arg_max", dtypes=(*DATA_DTYPES[1:], DType.float16))(_arg(np.argmax))
register_kernel("arg_min", dtypes=(*DATA_DTYPES[1:], DType.float16))(_arg(np.argmin))


@register_data_kernel("top_k_v2")
def _top_k(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    axis = attrs["axis"] % max(len(spec.input("X").shape), 1)

    def run(x: np.ndarray, *k_tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = int(k_tensor[0].reshape(-1)[0]) if k_tensor else attrs["k"]
        if not 0 <= k <= x.shape[axis]:
            raise HalfwayError(f"top_k_v2: k = {k} is out of range for dim {axis} of X {list(x.shape)}")
        keys = -x.astype(np.float64) if attrs["largest"] and x.dtype != np.bool_ else x
        if attrs["largest"] and x.dtype == np.bool_:
            keys = ~x
        order = np.argsort(keys, axis=axis, kind="stable")
        index = np.take(order, np.arange(k), axis=axis)
        return np.take_along_axis(x, index, axis), index.astype(np.int64)

    return run


register_data_kernel("where_index")(lambda spec: lambda condition: np.argwhere(condition).astype(np.int64))


@register_data_kernel("lookup_table_v2")
def _lookup_table(spec: KernelSpec) -> Kernel:
    padding = spec.attrs["padding_idx"]

    def run(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
        rows = table.shape[0]
        if ids.size and (ids.min() < 0 or ids.max() >= rows):
            raise HalfwayError(f"lookup_table_v2: an id is outside [0, {rows}) (min {ids.min()}, max {ids.max()})")
        out = np.take(table, ids, axis=0)
        if padding != -1:
            out[ids == padding % rows] = 0
        return out

    return run


@register_data_kernel("gather_nd")
def _gather_nd(spec: KernelSpec) -> Kernel:
    """X at Index's partial indices; under batch_dims each of the leading slices of Index reads its
    own slice of X (a batch index beside the others)."""
    batch = spec.attrs["batch_dims"]

    def run(x: np.ndarray, index: np.ndarray) -> np.ndarray:
        depth = index.shape[-1]
        rows = index.shape[:-1]
        leading = tuple(np.arange(size).reshape([-1 if d == i else 1 for d in range(len(rows))])
                        for i, size in enumerate(rows[:batch]))
        parts = tuple(_in_range("gather_nd", index[..., i], x.shape[batch + i]) for i in range(depth))
        return x[leading + parts]

    return run


@register_data_kernel("take_along_axis")
def _take_along_axis(spec: KernelSpec) -> Kernel:
    axis = spec.attrs["Axis"] % max(len(spec.input("Input").shape), 1)

    def run(x: np.ndarray, index: np.ndarray) -> np.ndarray:
        index = _in_range("take_along_axis", index, x.shape[axis])
        window = tuple(slice(None) if i == axis else slice(0, d) for i, d in enumerate(index.shape))
        return np.take_along_axis(x[window], index, axis)

    return run


_REDUCE: dict[str, Any] = {"add": np.add, "mul": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _scatter(out: np.ndarray, where: tuple[np.ndarray, ...], values: np.ndarray, reduce: str) -> np.ndarray:
    """``out[where] (reduce)= values`` with repeated positions applied in order."""
    if reduce == "assign":
        out[where] = values
    else:
        _REDUCE[reduce].at(out, where, values)
    return out


def _put_along_axis(spec: KernelSpec) -> Kernel:
    axis, reduce = spec.attrs["Axis"] % max(len(spec.input("Input").shape), 1), spec.attrs["Reduce"]

    def run(x: np.ndarray, index: np.ndarray, value: np.ndarray) -> np.ndarray:
        index = _in_range("put_along_axis", index, x.shape[axis])
        grid: list[np.ndarray] = list(np.indices(index.shape, sparse=True))
        grid[axis] = index
        return _scatter(x.copy(), tuple(grid), np.broadcast_to(value, index.shape), reduce)

    return run


def _scatter_nd(spec: KernelSpec) -> Kernel:
    reduce = spec.attrs.get("reduce", "add")

    def run(x: np.ndarray, index: np.ndarray, updates: np.ndarray) -> np.ndarray:
        depth = index.shape[-1]
        where = tuple(_in_range(spec.op_type, index[..., i], x.shape[i]) for i in range(depth))
        return _scatter(x.copy(), where, updates, reduce)

    return run


for _op_type, _factory in (("put_along_axis", _put_along_axis), ("scatter_nd", _scatter_nd),
                           ("scatter_nd_add", _scatter_nd)):
    register_kernel(_op_type, dtypes=_NUMBERS)(_factory)
@register_data_kernel("tensor_scatter")
def _tensor_scatter(spec: KernelSpec) -> Kernel:
    """A copy of PastCache with each batch row's Update written at its positions along the axis."""
    circular = spec.attrs["mode"] == "circular"

    def run(cache: np.ndarray, update: np.ndarray, *indices: np.ndarray) -> np.ndarray:
        axis = spec.attrs["axis"] % cache.ndim
        starts = indices[0].astype(np.int64) if indices else np.zeros(cache.shape[0], np.int64)
        size, steps = cache.shape[axis], update.shape[axis]
        if starts.shape != (cache.shape[0],) or (not circular and ((starts < 0) | (starts + steps > size)).any()):
            raise HalfwayError(f"tensor_scatter: WriteIndices {starts.tolist()} must be one per batch row with "
                               f"{steps} steps fitting in the axis of {size}")
        out = cache.copy()
        for row, start in enumerate(starts):
            positions = (start + np.arange(steps)) % size if circular else np.arange(start, start + steps)
            np.moveaxis(out[row], axis - 1, 0)[positions] = np.moveaxis(update[row], axis - 1, 0)
        return out

    return run


register_kernel("einsum", dtypes=_NUMBERS)(lambda spec: lambda *xs: np.asarray(np.einsum(spec.attrs["equation"], *xs)))


@register_kernel("one_hot_v2", dtypes=(DType.int32, DType.int64))
def _one_hot(spec: KernelSpec) -> Kernel:
    depth_of, allow = int_source(spec, ["depth_tensor"], [spec.attrs["depth"]]), spec.attrs["allow_out_of_range"]
    dtype = spec.output("Out").dtype.numpy

    def run(*args: np.ndarray) -> np.ndarray:
        x, depth = args[0], depth_of(args)[0]
        if not allow and x.size and (x.min() < 0 or x.max() >= depth):
            raise HalfwayError(f"one_hot_v2: an index is outside [0, {depth}) (min {x.min()}, max {x.max()})")
        return (x[..., None] == np.arange(depth)).astype(dtype)

    return run


@register_data_kernel("unique")
def _unique(spec: KernelSpec) -> Kernel:
    """numpy's unique, reordered by first appearance unless sorted; one array per output slot."""
    axes, in_order = spec.attrs["axis"], not spec.attrs["is_sorted"]
    slots = [slot for slot in ("Out", "Indices", "Index", "Counts") if spec.outputs.get(slot)]

    def run(x: np.ndarray) -> tuple[np.ndarray, ...]:
        axis = axes[0] % x.ndim if axes else None
        values, first, which, counts = np.unique(x if axes else x.reshape(-1), return_index=True, return_inverse=True,
                                                 return_counts=True, axis=axis)
        which = which.reshape(-1)
        if in_order:
            order = np.argsort(first, kind="stable")
            values, first, counts = np.take(values, order, axis=axis or 0), first[order], counts[order]
            which = np.argsort(order)[which]
        found = {"Out": values, "Indices": first, "Index": which, "Counts": counts}
        return tuple(found[slot] if slot == "Out" else found[slot].astype(np.int64) for slot in slots)

    return run


@register_data_kernel("reverse_sequence")
def _reverse_sequence(spec: KernelSpec) -> Kernel:
    batch_axis, time_axis = spec.attrs["batch_axis"], spec.attrs["time_axis"]

    def run(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        rows = np.moveaxis(x, (batch_axis, time_axis), (0, 1))
        out = rows.copy()
        for b, length in enumerate(lengths.reshape(-1).tolist()):
            if not 0 <= length <= rows.shape[1]:
                raise HalfwayError(f"reverse_sequence: length {length} of row {b} is outside [0, {rows.shape[1]}]")
            out[b, :length] = rows[b, :length][::-1]
        return np.moveaxis(out, (0, 1), (batch_axis, time_axis))

    return run


@register_data_kernel("gather")
def _gather(spec: KernelSpec) -> Kernel:
    axis_of = int_source(spec, ["Axis"], [spec.attrs["axis"]])
    fixed_axis = None if spec.has_input("Axis") else axis_of(())[0]

    def run(*args: np.ndarray) -> np.ndarray:
        x, index = args[0], args[1]
        axis = axis_of(args)[0] if fixed_axis is None else fixed_axis
        flat = index.reshape(-1) if index.ndim else index
        size = x.shape[axis]
        if flat.size and (flat.min() < -size or flat.max() >= size):
            bad = flat[(flat < -size) | (flat >= size)].reshape(-1)[0]
            raise HalfwayError(f"gather: index {bad} is out of range [{-size}, {size}) for axis {axis} of X, of "
                               f"shape {list(x.shape)}")
        return np.asarray(np.take(x, flat, axis=axis))

    return run
