"""numpy kernels of the tensor ops (``halfway.ir.ops.tensor``): concat, split, reshape2,
flatten_contiguous_range, transpose2, squeeze2, unsqueeze2, fill_constant, fill_any_like, assign, slice,
strided_slice, shape, pad, pad3d and dropout. ``feed`` and ``fetch`` have none: the executor binds feeds and
fetches itself. pad3d: numpy's pad (constant / reflect / edge / wrap for Paddle's circular); pad: numpy's
constant pad of every dim. dropout (inference): ``X * (1 - p)`` (downgrade_in_infer) or X itself
(upscale_in_train); Mask, when the op has one, is all ones (uint8).

These ops only move data, so every kernel is registered for float16 as it is — not through the
registry's float32 widening, which would convert a float16 tensor twice for nothing — and for
float32, float64, bool and the integer dtypes: a float16 output is bit-exact to the input.

**Outputs may alias inputs.** reshape2, flatten_contiguous_range, squeeze2 and unsqueeze2 return
``x.reshape(...)`` (a view unless X is not contiguous), transpose2, slice and strided_slice return views, and
split returns views of X. The kernels never write into an input (nor into anything they did not
allocate during the call), so a view is safe as long as nobody writes into it. Hence:

1. The executor must not hand a value that may alias a feed, a parameter or another live value
   to an in-place kernel: an output of these ops shares its input's buffer (transitively).
2. A memory plan that places values in buffers must count such an output as living in its
   input's buffer, which stays live until the output's last reader.
3. Views may be non-contiguous (transpose2, slice, split along an inner axis): kernels must accept
   any strides.
4. A caller who writes into a fetched output may be writing into its own feed or into the scope.

concat, assign (a copy, as Paddle's) and fill_constant return new arrays; shape and
fill_constant a fresh one on every call, never an array cached at prepare time.

Shapes, axes and cut points are computed at prepare time from the ``KernelSpec`` when the op's
inferred shapes are known and no shape tensor is read at run time; otherwise from the run-time
shapes and tensors, by the same rules as the schemas (Paddle's: 0 copies a dim in reshape2,
slice clamps like numpy but rejects an end before the start). Integer tensors that carry shapes, axes or bounds take precedence over the attrs
in the order the schemas give.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.limits import check_tensor_size
from ...ir.ops.family import INTS
from ..registry import Kernel, KernelFactory, KernelSpec, register_kernel

__all__ = ["DATA_DTYPES", "register_data_kernel", "int_source"]

DATA_DTYPES = (DType.float16, DType.float32, DType.float64, DType.bool, *INTS)
"""The dtypes every tensor-op kernel is registered for (float16 without widening)."""

Args = Sequence[np.ndarray]
IntSource = Callable[[Args], list[int]]


def register_data_kernel(op_type: str) -> Callable[[KernelFactory], KernelFactory]:
    """Register a data-movement factory for every dtype of ``DATA_DTYPES`` as it is.

    float16 gets its own call: a dtypes list holding float32 too would wrap it in the widening.
    """

    def decorate(factory: KernelFactory) -> KernelFactory:
        register_kernel(op_type, dtypes=[DType.float16])(factory)
        return register_kernel(op_type, dtypes=[d for d in DATA_DTYPES if d is not DType.float16])(factory)

    return decorate


# -- helpers -----------------------------------------------------------------------------------------
def _positions(spec: KernelSpec) -> dict[str, slice]:
    """Where each present input slot's arrays sit among the kernel's positional arguments."""
    positions, start = {}, 0
    for slot, infos in spec.inputs.items():
        positions[slot] = slice(start, start + len(infos))
        start += len(infos)
    return positions


def int_source(spec: KernelSpec, slots: Sequence[str], default: Sequence[int]) -> IntSource:
    """Read ints from the first of ``slots`` the op has — a 1-D tensor or one-value tensors,
    flattened in order — else return ``default`` (the attr)."""
    positions = _positions(spec)
    for slot in slots:
        if slot in positions:
            where = positions[slot]
            return lambda args: [v for a in args[where] for v in a.reshape(-1).tolist()]
    fixed = [int(v) for v in default]
    return lambda args: fixed


def _reads_tensors(spec: KernelSpec, slots: Sequence[str]) -> bool:
    return any(spec.has_input(slot) for slot in slots)


def _known(shape: Sequence[int]) -> bool:
    return all(d >= 0 for d in shape)


def _with_xshape(spec: KernelSpec, run: Kernel) -> Kernel:
    """``run``, returning ``(Out, None)`` when the op has an XShape output (nobody reads it)."""
    if not spec.outputs.get("XShape"):
        return run
    return lambda *args: (run(*args), None)


def _reshaping(spec: KernelSpec, runtime_shape: Callable[[tuple[int, ...], Args], Sequence[int]]) -> Kernel:
    """A kernel returning ``X.reshape(...)``: to the inferred Out shape when it is known, else to
    ``runtime_shape(X.shape, args)``."""
    out = spec.output("Out").shape
    if _known(out):
        return _with_xshape(spec, lambda x, *_: x.reshape(out))
    return _with_xshape(spec, lambda *args: args[0].reshape(runtime_shape(args[0].shape, args)))


def _fail(op_type: str, message: str) -> NoReturn:
    raise HalfwayError(f"{op_type}: {message}")


# -- concat / split ----------------------------------------------------------------------------------
@register_data_kernel("concat")
def _concat(spec: KernelSpec) -> Kernel:
    count = len(spec.inputs["X"])
    if not spec.has_input("AxisTensor"):
        axis = spec.attrs["axis"]
        return lambda *xs: np.concatenate(xs, axis=axis)
    axis_of = int_source(spec, ["AxisTensor"], ())
    return lambda *args: np.concatenate(args[:count], axis=axis_of(args)[0])


def _cut_points(op_type: str, dim: int, num: int, sections: Sequence[int]) -> list[int]:
    """Where a dim of size ``dim`` is cut into ``num`` equal pieces or pieces of ``sections``
    sizes (one -1 = the rest)."""
    if num:
        if dim % num:
            _fail(op_type, f"attr 'num' = {num} does not divide the split dim of size {dim}")
        sizes = [dim // num] * num
    else:
        rest = dim - sum(s for s in sections if s != -1)
        sizes = [rest if s == -1 else s for s in sections]
        if sections.count(-1) > 1 or min(sizes, default=0) < 0 or sum(sizes) != dim:
            _fail(op_type, f"sections {list(sections)} do not split a dim of size {dim}")
    return np.cumsum(sizes)[:-1].tolist()


@register_data_kernel("split")
def _split(spec: KernelSpec) -> Kernel:
    single = len(spec.outputs["Out"]) == 1
    num = spec.attrs["num"]
    axis_of = int_source(spec, ["AxisTensor"], [spec.attrs["axis"]])
    sections_of = int_source(spec, ["SectionsTensorList"], spec.attrs["sections"])
    if not _reads_tensors(spec, ["AxisTensor", "SectionsTensorList"]):
        axis = spec.attrs["axis"]
        sizes = [out.shape[axis] for out in spec.outputs["Out"]]
        if _known(sizes):
            cuts = np.cumsum(sizes)[:-1].tolist()
            return lambda x: _pieces(np.split(x, cuts, axis=axis), single)

    def run(*args: np.ndarray) -> Any:
        x, axis = args[0], axis_of(args)[0]
        cuts = _cut_points("split", x.shape[axis], num, sections_of(args))
        return _pieces(np.split(x, cuts, axis=axis), single)

    return run


def _pieces(pieces: list[np.ndarray], single: bool) -> Any:
    return pieces[0] if single else tuple(pieces)


# -- reshape2 / flatten / transpose2 / squeeze2 / unsqueeze2 -----------------------------------------
def _paddle_shape(in_shape: tuple[int, ...], target: Sequence[int]) -> list[int]:
    """Paddle's reshape target with each 0 replaced by the input dim at its index (-1 stays)."""
    if any(d == 0 and i >= len(in_shape) for i, d in enumerate(target)):
        _fail("reshape2", f"shape {list(target)} copies (0) a dim beyond the rank of X, of shape {list(in_shape)}")
    return [in_shape[i] if d == 0 else d for i, d in enumerate(target)]


@register_data_kernel("reshape2")
def _reshape2(spec: KernelSpec) -> Kernel:
    target_of = int_source(spec, ["ShapeTensor", "Shape"], spec.attrs["shape"])
    return _reshaping(spec, lambda shape, args: _paddle_shape(shape, target_of(args)))


@register_data_kernel("flatten_contiguous_range")
def _flatten_contiguous_range(spec: KernelSpec) -> Kernel:
    start, stop = spec.attrs["start_axis"], spec.attrs["stop_axis"]

    def flattened(shape: tuple[int, ...], args: Args) -> list[int]:
        if not shape:
            return [1]
        lo, hi = start % len(shape), stop % len(shape)
        return [*shape[:lo], math.prod(shape[lo:hi + 1]), *shape[hi + 1:]]

    return _reshaping(spec, flattened)


@register_data_kernel("transpose2")
def _transpose2(spec: KernelSpec) -> Kernel:
    perm = tuple(spec.attrs["axis"])
    return _with_xshape(spec, lambda x: x.transpose(perm))


@register_data_kernel("squeeze2")
def _squeeze2(spec: KernelSpec) -> Kernel:
    axes_of = int_source(spec, ["AxesTensor"], spec.attrs["axes"])

    def squeezed(shape: tuple[int, ...], args: Args) -> list[int]:
        axes = axes_of(args)
        named = {a % len(shape) for a in axes} if shape and axes else set(range(len(shape)))
        if spec.has_input("AxesTensor") and any(shape[a] != 1 for a in named):
            _fail("squeeze2", f"axes {axes} name dims of shape {list(shape)} that are not 1")
        return [d for i, d in enumerate(shape) if not (d == 1 and i in named)]

    return _reshaping(spec, squeezed)


@register_data_kernel("unsqueeze2")
def _unsqueeze2(spec: KernelSpec) -> Kernel:
    axes_of = int_source(spec, ["AxesTensor", "AxesTensorList"], spec.attrs["axes"])

    def unsqueezed(shape: tuple[int, ...], args: Args) -> list[int]:
        out = list(shape)
        for axis in axes_of(args):
            if not -len(out) - 1 <= axis <= len(out):
                _fail("unsqueeze2", f"axis {axis} is out of range for a rank-{len(out)} shape {out}")
            out.insert(axis % (len(out) + 1), 1)
        return out

    return _reshaping(spec, unsqueezed)


# -- fill_constant / assign / shape ------------------------------------------------------------------
def _fill_scalar(value: float | int | bool, dtype: np.dtype) -> np.ndarray:
    """``value`` as a 0-d array of ``dtype``, converted as Paddle's ``static_cast`` does: toward
    zero for integers, != 0 for bool, through float32 for float16."""
    if dtype == np.float16:
        return np.asarray(np.float32(value)).astype(np.float16)
    if dtype.kind in "iu":
        if not math.isfinite(value):
            _fail("fill_constant", f"value {value} cannot fill a {dtype} tensor")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            _fail("fill_constant", f"value {value} is out of the range of {dtype} [{info.min}, {info.max}]")
        return np.asarray(int(value), dtype)
    if dtype == np.bool_:
        return np.asarray(value != 0)
    return np.asarray(value, dtype)


def _attr_value(attrs: Any, dtype: np.dtype) -> float | int:
    """fill_constant's value from its attrs: ``str_value`` when set (an integer literal read
    exactly for integer dtypes, so int64 values past 2**53 survive), else ``value``."""
    text = attrs["str_value"]
    if not text:
        return float(attrs["value"])
    if dtype.kind in "iu":
        try:
            return int(text)
        except ValueError:
            pass
    return float(text)


@register_data_kernel("fill_constant")
def _fill_constant(spec: KernelSpec) -> Kernel:
    dtype = spec.output("Out").dtype.numpy
    shape = spec.output("Out").shape
    value_at = _positions(spec).get("ValueTensor")
    shape_of = int_source(spec, ["ShapeTensor", "ShapeTensorList"], spec.attrs["shape"])
    fixed = _fill_scalar(_attr_value(spec.attrs, dtype), dtype)
    if value_at is None and _known(shape):
        return lambda *_: np.full(shape, fixed, dtype)

    def run(*args: np.ndarray) -> np.ndarray:
        value = fixed if value_at is None else _fill_scalar(args[value_at][0].reshape(-1)[0].item(), dtype)
        dims = shape_of(args)
        check_tensor_size(dims, dtype, "fill_constant")
        return np.full(dims, value, dtype)

    return run


@register_data_kernel("fill_any_like")
def _fill_any_like(spec: KernelSpec) -> Kernel:
    dtype = spec.output("Out").dtype.numpy
    value = _fill_scalar(float(spec.attrs["value"]), dtype)
    return lambda x: np.full(x.shape, value, dtype)


@register_data_kernel("assign")
def _assign(spec: KernelSpec) -> Kernel:
    return lambda x: x.copy()


@register_data_kernel("bitcast")
def _bitcast(spec: KernelSpec) -> Kernel:
    dtype = spec.output("Out").dtype.numpy
    return lambda x: x.view(dtype).copy()


@register_data_kernel("shape")
def _shape(spec: KernelSpec) -> Kernel:
    return lambda x: np.array(x.shape, dtype=np.int32)


# -- slice ----------------------------------------------------------------------------------------
_SLICE_TENSORS = ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")


def _slice_index(shape: tuple[int, ...], axes: Sequence[int], starts: Sequence[int], ends: Sequence[int],
                 decrease: Sequence[int]) -> tuple[Any, ...]:
    """The basic index of Paddle's slice: bounds clamped to [0, dim] after counting negative ones
    from the end, an end before its start rejected, decreased axes (sliced to size 1) indexed by
    an int. The trailing Ellipsis keeps a 0-d result an array view rather than a numpy scalar."""
    if not len(starts) == len(ends) == len(axes):
        _fail("slice", f"starts {list(starts)} and ends {list(ends)} must have one entry per axis of {list(axes)}")
    index: list[Any] = [slice(None)] * len(shape)
    for axis, start, end in zip(axes, starts, ends):
        dim = shape[axis]
        lo = min(max(start + dim if start < 0 else start, 0), dim)
        hi = min(max(end + dim if end < 0 else end, 0), dim)
        if hi < lo:
            _fail("slice", f"axis {axis} (size {dim}): end {end} comes before start {start}")
        index[axis] = slice(lo, hi)
    for axis in decrease:
        lo, hi, _ = index[axis].indices(shape[axis])
        if hi - lo != 1:
            _fail("slice", f"decrease_axis drops axis {axis}, whose sliced size is {hi - lo}, not 1")
        index[axis] = lo
    return (*index, Ellipsis)


@register_data_kernel("slice")
def _slice(spec: KernelSpec) -> Kernel:
    in_shape = spec.input("Input").shape
    rank = len(in_shape)
    axes = [a % rank for a in spec.attrs["axes"]]
    decrease = sorted({a % rank for a in spec.attrs["decrease_axis"]})
    starts_of = int_source(spec, ["StartsTensor", "StartsTensorList"], spec.attrs["starts"])
    ends_of = int_source(spec, ["EndsTensor", "EndsTensorList"], spec.attrs["ends"])
    if not _reads_tensors(spec, _SLICE_TENSORS) and _known(in_shape):
        index = _slice_index(in_shape, axes, starts_of(()), ends_of(()), decrease)
        return lambda x: x[index]
    return lambda *args: args[0][_slice_index(args[0].shape, axes, starts_of(args), ends_of(args), decrease)]


@register_data_kernel("strided_slice")
def _strided_slice(spec: KernelSpec) -> Kernel:
    """A basic index (a view) of Python slices, decreased axes indexed by their one position."""
    attrs = spec.attrs
    rank = len(spec.input("Input").shape)
    bounds = [int_source(spec, [slot], attrs[name]) for slot, name in
              (("StartsTensor", "starts"), ("EndsTensor", "ends"), ("StridesTensor", "strides"))]
    decrease = {a % rank for a in attrs["decrease_axis"]}

    def run(*args: np.ndarray) -> np.ndarray:
        x = args[0]
        index: list[Any] = [slice(None)] * rank
        for axis, start, end, step in zip(attrs["axes"], *(bound(args) for bound in bounds)):
            index[axis % rank] = slice(start, end, step)
        picked = [(range(*index[a].indices(x.shape[a]))[0] if a in decrease else index[a]) for a in range(rank)]
        return x[(*picked, Ellipsis)]

    return run


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad3d(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    spatial = (1, 2, 3) if attrs["data_format"] == "NDHWC" else (2, 3, 4)
    mode = _PAD_MODES[attrs["mode"]]
    options = {"constant_values": attrs["value"]} if mode == "constant" else {}

    def widths(paddings: Sequence[int]) -> list[tuple[int, int]]:
        """Paddle's [left, right, top, bottom, front, back] as numpy's per-axis pairs."""
        p = [int(v) for v in paddings]
        pairs = dict(zip(spatial, ((p[4], p[5]), (p[2], p[3]), (p[0], p[1]))))
        return [pairs.get(d, (0, 0)) for d in range(5)]

    if spec.has_input("Paddings"):
        return lambda x, paddings: np.pad(x, widths(paddings.reshape(-1)), mode, **options)
    fixed = widths(attrs["paddings"])
    return lambda x: np.pad(x, fixed, mode, **options)


register_kernel("pad3d", dtypes=(DType.float32, DType.int32, DType.int64))(_pad3d)


register_kernel("pad3d", dtypes=(DType.float16,))(_pad3d)  # data movement: float16 as is


def _pad(spec: KernelSpec) -> Kernel:
    """The pads and the value from the attrs, or from the Paddings and ValueTensor inputs; a mode
    other than constant is numpy's of its name."""
    pads_of = int_source(spec, ["Paddings"], spec.attrs["paddings"])
    at = {slot: i for i, slot in enumerate(s for s in ("X", "Paddings", "ValueTensor") if s == "X" or spec.has_input(s))}

    mode = spec.attrs["mode"]

    def run(*args: np.ndarray) -> np.ndarray:
        p = pads_of(args)
        widths = [(p[2 * i], p[2 * i + 1]) for i in range(len(p) // 2)]
        if mode != "constant":
            return np.pad(args[0], widths, mode)
        value = args[at["ValueTensor"]].reshape(-1)[0] if "ValueTensor" in at else spec.attrs["pad_value"]
        return np.pad(args[0], widths, "constant", constant_values=value)

    return run


register_kernel("pad", dtypes=(DType.float32, DType.int32, DType.int64))(_pad)


register_kernel("pad", dtypes=(DType.float16,))(_pad)  # data movement: float16 as is


@register_kernel("dropout")
def dropout(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    keep = np.float32(1 - attrs["dropout_prob"])
    identity = attrs["dropout_implementation"] == "upscale_in_train"
    with_mask = "Mask" in spec.outputs

    def run(x: np.ndarray, *_: np.ndarray) -> Any:
        out = x if identity else x * keep
        return (out, np.ones(x.shape, np.uint8)) if with_mask else out

    return run
