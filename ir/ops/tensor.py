"""Schemas of the tensor ops: feed/fetch, concat/split, reshape2 and its kin, fill_constant, fill_any_like,
assign, slice, strided_slice, shape, pad, pad3d and dropout — Paddle's op types, slots, attrs and
defaults.

Several ops take a shape, axis or index list either from an attr or from integer tensor inputs
(``reshape2.ShapeTensor``, ``slice.StartsTensorList``, ...); the tensor wins, as in Paddle. A value
from a tensor is known when ``ctx.input_value`` gives it (a parameter or a folded constant); an
unknown one makes the dims it decides -1. Those tensors are ``keep_dtype_slots``: they stay
int32/int64 under a float16 kernel.

The XShape outputs of reshape2/transpose2/squeeze2/unsqueeze2/flatten_contiguous_range are
dispensable training leftovers of shape ``[0, *X.shape]``, as Paddle declares them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, InferFn, OpSchema, Slot, register_op
from .window import join_channels, ranked, split_channels

__all__ = ["check_axis", "scalar_input"]

_INDEX_DTYPES = (DType.int32, DType.int64)
_DTYPE_CODES = frozenset(d.value for d in DType)
Ints = list[int | None]
"""Integers read from attrs or tensors; None where a tensor's value is unknown before run time."""


# -- shared helpers --------------------------------------------------------------------------------
def check_axis(ctx: InferContext, value: int, rank: int, what: str) -> int:
    """``value`` as an axis of a rank-``rank`` tensor, a negative one counted from the end."""
    ctx.check(-rank <= value < rank, f"{what} = {value} is out of range [{-rank}, {rank - 1}] for a rank-{rank} input")
    return value % rank


def _numel(dims: Sequence[int]) -> int:
    """The product of ``dims``, -1 if one is unknown."""
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _index_tensor(ctx: InferContext, slot: str, index: int) -> np.ndarray | None:
    info = ctx.input(slot, index)
    ctx.check(info.dtype in _INDEX_DTYPES,
              f"input {slot!r} must be int32 or int64, got {getattr(info.dtype, 'name', info.dtype)}")
    value = ctx.input_value(slot, index)
    return None if value is None else np.asarray(value).reshape(-1)


def _vector_input(ctx: InferContext, slot: str) -> Ints | None:
    """The ints of the 1-D (or 0-d) integer tensor in ``slot``; None if the slot is empty."""
    if not ctx.has_input(slot):
        return None
    value = _index_tensor(ctx, slot, 0)
    if value is not None:
        return [int(v) for v in value]
    shape = ctx.input(slot).shape
    ctx.check(len(shape) <= 1 and _numel(shape) >= 0,
              f"input {slot!r} must be a 1-D tensor of known length, got shape {list(shape)}")
    return [None] * _numel(shape)


def _scalars_input(ctx: InferContext, slot: str) -> Ints | None:
    """One int per one-element integer tensor of duplicable ``slot``; None if the slot is empty."""
    if not ctx.has_input(slot):
        return None
    values: Ints = []
    for i, info in enumerate(ctx.inputs(slot)):
        value = _index_tensor(ctx, slot, i)
        ctx.check(_numel(info.shape) in (1, -1) and (value is None or value.size == 1),
                  f"{slot}[{i}] must hold one value, has shape {list(info.shape)}")
        values.append(None if value is None else int(value[0]))
    return values


def scalar_input(ctx: InferContext, slot: str, attr: str) -> int | None:
    """The int in tensor ``slot`` when present (None if unknown), else the value of ``attr``."""
    values = _vector_input(ctx, slot)
    if values is None:
        value: int | None = ctx.attr(attr)
        return value
    ctx.check(len(values) == 1, f"input {slot!r} must hold one value, has {len(values)}")
    return values[0]


def _merge(ctx: InferContext, dims: Sequence[int], what: str) -> int:
    """The one size that ``dims`` (-1 = unknown) agree on."""
    known = {d for d in dims if d >= 0}
    ctx.check(len(known) <= 1, f"{what}: sizes {list(dims)} differ")
    return known.pop() if known else -1


def _with_xshape(ctx: InferContext, out: Sequence[int]) -> None:
    """Set Out to ``out`` and XShape to ``[0, *X.shape]``, both of X's dtype."""
    x = ctx.input("X")
    ctx.set_output("Out", out, x.dtype)
    ctx.set_output("XShape", (0, *x.shape), x.dtype)


def _xshape_op(op_type: str, infer: InferFn, attrs: Sequence[AttrSpec], doc: str,
               inputs: Sequence[Slot] = ()) -> OpSchema:
    """A reshape-like schema: X (+ ``inputs``) -> Out, a view of X, and a dispensable XShape."""
    return OpSchema(op_type, inputs=[Slot("X"), *inputs], outputs=[Slot("Out"), Slot("XShape", dispensable=True)],
                    attrs=attrs, infer=infer, keep_dtype_slots=[s.name for s in inputs],
                    views={"Out": "X"}, doc=doc)


# -- feed / fetch ----------------------------------------------------------------------------------
register_op(OpSchema(
    "feed", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("col", AttrType.INT)],
    infer=None, dtype_slots=(),
    doc="Out = column `col` of the feed list X. No inference: the feed list carries no shapes, "
        "so Out keeps its declared shape and dtype, and its dtype is the fed tensor's.",
))
register_op(OpSchema(
    "fetch", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("col", AttrType.INT)],
    infer=None,
    doc="Store X as column `col` of the fetch list Out (a FETCH_LIST var: no shape to infer).",
))


# -- concat / split --------------------------------------------------------------------------------
def _infer_concat(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    ctx.check(bool(xs), "input 'X' needs at least one var")
    rank, dtype = len(xs[0].shape), xs[0].dtype
    ctx.check(rank > 0, "inputs 'X' must have rank >= 1, X[0] is 0-d")
    for i, x in enumerate(xs):
        ctx.check(len(x.shape) == rank, f"X[{i}] has rank {len(x.shape)}, X[0] has rank {rank}")
        ctx.check(x.dtype == dtype, f"X[{i}] is {x.dtype.name}, X[0] is {dtype.name}")
    axis = scalar_input(ctx, "AxisTensor", "axis")
    if axis is None:
        ctx.set_output("Out", [-1] * rank, dtype)
        return
    axis = check_axis(ctx, axis, rank, "attr 'axis'")
    joined = [x.shape[axis] for x in xs]
    out = [(-1 if min(joined) < 0 else sum(joined)) if d == axis else
           _merge(ctx, [x.shape[d] for x in xs], f"inputs 'X' disagree on dim {d} (concat axis {axis})")
           for d in range(rank)]
    ctx.set_output("Out", out, dtype)


register_op(OpSchema(
    "concat", inputs=[Slot("X", duplicable=True), Slot("AxisTensor", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("axis", AttrType.INT, 0)], infer=_infer_concat, dtype_slots=("X",),
    keep_dtype_slots=("AxisTensor",), doc="Join the X tensors along `axis` (AxisTensor overrides it).",
))


def _split_sizes(ctx: InferContext, dim: int, num: int, sections: Ints) -> list[int]:
    """The sizes of the pieces of a dim of size ``dim`` (-1 = unknown)."""
    if num:
        ctx.check(dim < 0 or dim % num == 0, f"attr 'num' = {num} does not divide the split dim of size {dim}")
        return [dim // num if dim >= 0 else -1] * num
    ctx.check(sections.count(-1) <= 1, f"sections {sections} may hold -1 (infer) only once")
    ctx.check(all(s is None or s >= -1 for s in sections), f"sections {sections} must be >= 0, or -1 once")
    if dim < 0 or None in sections:
        return [-1 if s is None else s for s in sections]
    sizes = [s for s in sections if s is not None]  # all of them: None was handled above
    known = sum(s for s in sizes if s != -1)
    if -1 in sizes:
        ctx.check(known <= dim, f"sections {sections} exceed the split dim of size {dim}")
        return [dim - known if s == -1 else s for s in sizes]
    ctx.check(known == dim, f"sections {sections} sum to {known}, the split dim has size {dim}")
    return sizes


def _infer_split(ctx: InferContext) -> None:
    x = ctx.input("X")
    num = ctx.attr("num")
    sections = _scalars_input(ctx, "SectionsTensorList")
    sections = list(ctx.attr("sections")) if sections is None else sections
    ctx.check(num >= 0 and (num > 0) != bool(sections),
              f"needs exactly one of attr 'num' (> 0) and non-empty sections, got num={num}, sections={sections}")
    axis = scalar_input(ctx, "AxisTensor", "axis")
    if axis is None:
        for i in range(num or len(sections)):
            ctx.set_output("Out", [-1] * len(x.shape), x.dtype, index=i)
        return
    axis = check_axis(ctx, axis, len(x.shape), "attr 'axis'")
    for i, size in enumerate(_split_sizes(ctx, x.shape[axis], num, sections)):
        ctx.set_output("Out", [*x.shape[:axis], size, *x.shape[axis + 1:]], x.dtype, index=i)


register_op(OpSchema(
    "split",
    inputs=[Slot("X"), Slot("AxisTensor", dispensable=True),
            Slot("SectionsTensorList", duplicable=True, dispensable=True)],
    outputs=[Slot("Out", duplicable=True)],
    attrs=[AttrSpec("axis", AttrType.INT, 0), AttrSpec("num", AttrType.INT, 0),
           AttrSpec("sections", AttrType.INTS, ())],
    infer=_infer_split, keep_dtype_slots=("AxisTensor", "SectionsTensorList"), views={"Out": "X"},
    doc="Split X along `axis` into `num` equal pieces or pieces of `sections` sizes (one -1 = the rest).",
))


# -- reshape2 / flatten / transpose2 / squeeze2 / unsqueeze2 ---------------------------------------
def _reshaped(ctx: InferContext, in_shape: Sequence[int], target: Ints) -> list[int]:
    """Paddle's reshape rule: 0 copies the input dim at that index, one -1 takes the remaining size.

    Unknown input dims copied by a 0 cancel out, so [-1, 3, 4] reshaped to [0, -1] is [-1, 12].
    """
    ctx.check(target.count(-1) <= 1, f"shape {target} may hold -1 (infer) only once")
    out = []
    for i, d in enumerate(target):
        if d == 0:
            ctx.check(i < len(in_shape), f"shape[{i}] = 0 copies input dim {i}, but X has rank {len(in_shape)}")
            out.append(in_shape[i])
        else:
            ctx.check(d is None or d >= -1, f"shape[{i}] = {d}: dims must be > 0, 0 (copy) or -1 (infer)")
            out.append(-1 if d is None else d)
    infer_at = target.index(-1) if -1 in target else None
    copied = {i for i, d in enumerate(target) if d == 0}
    size = _numel([d for i, d in enumerate(in_shape) if i not in copied])
    rest = _numel([d for i, d in enumerate(out) if i not in copied and i != infer_at])
    if size < 0 or rest < 0:
        return out
    if infer_at is None:
        ctx.check(size == rest, f"cannot reshape X of shape {list(in_shape)} into {out}: element counts differ")
    else:
        ctx.check(rest > 0 and size % rest == 0,
                  f"cannot reshape X of shape {list(in_shape)} into {target}: no size for the -1 dim")
        out[infer_at] = size // rest
    return out


def _infer_reshape2(ctx: InferContext) -> None:
    x = ctx.input("X")
    target = _scalars_input(ctx, "ShapeTensor")
    if target is None:
        target = _vector_input(ctx, "Shape")
    if target is None:
        target = list(ctx.attr("shape"))
    _with_xshape(ctx, _reshaped(ctx, x.shape, target))


def _infer_flatten(ctx: InferContext) -> None:
    shape = ctx.input("X").shape
    start, stop = ctx.attr("start_axis"), ctx.attr("stop_axis")
    if not shape:
        ctx.check(start in (0, -1) and stop in (0, -1),
                  f"a 0-d X takes start_axis and stop_axis 0 or -1, got {start} and {stop}")
        _with_xshape(ctx, [1])
        return
    start = check_axis(ctx, start, len(shape), "attr 'start_axis'")
    stop = check_axis(ctx, stop, len(shape), "attr 'stop_axis'")
    ctx.check(start <= stop, f"attr 'start_axis' ({start}) comes after attr 'stop_axis' ({stop})")
    _with_xshape(ctx, [*shape[:start], _numel(shape[start:stop + 1]), *shape[stop + 1:]])


def _infer_transpose2(ctx: InferContext) -> None:
    shape = ctx.input("X").shape
    perm = [check_axis(ctx, a, len(shape), "attr 'axis' entry") for a in ctx.attr("axis")]
    ctx.check(sorted(perm) == list(range(len(shape))),
              f"attr 'axis' = {list(ctx.attr('axis'))} is not a permutation of the {len(shape)} axes of X")
    _with_xshape(ctx, [shape[a] for a in perm])


def _infer_squeeze2(ctx: InferContext) -> None:
    """Empty axes drop every dim of size 1. Listed axes drop dims of size 1 or -1 and keep others,
    as Paddle does (an unknown dim named in axes is taken to be 1; a 0-d X ignores axes)."""
    shape = ctx.input("X").shape
    axes = ctx.attr("axes")
    if ctx.has_input("AxesTensor"):  # computed at run time: each names a dim of size 1
        count = _numel(ctx.input("AxesTensor").shape)
        ctx.check(0 < count <= len(shape), f"AxesTensor must hold 1 to {len(shape)} axes, has {count}")
        _with_xshape(ctx, [-1] * (len(shape) - count))
        return
    if not shape:
        drop: set[int] = set()
    elif not axes:
        drop = {i for i, d in enumerate(shape) if d == 1}
    else:
        drop = {a for a in (check_axis(ctx, a, len(shape), "attr 'axes' entry") for a in axes) if shape[a] in (1, -1)}
    _with_xshape(ctx, [d for i, d in enumerate(shape) if i not in drop])


def _infer_unsqueeze2(ctx: InferContext) -> None:
    """Insert size-1 dims one axis at a time, each counted in the rank reached so far (as Paddle)."""
    shape = list(ctx.input("X").shape)
    axes = _vector_input(ctx, "AxesTensor")
    if axes is None:
        axes = _scalars_input(ctx, "AxesTensorList")
    if axes is None:
        axes = list(ctx.attr("axes"))
    known = [a for a in axes if a is not None]
    if len(known) < len(axes):
        _with_xshape(ctx, [-1] * (len(shape) + len(axes)))
        return
    for a in known:
        shape.insert(check_axis(ctx, a, len(shape) + 1, "attr 'axes' entry"), 1)
    _with_xshape(ctx, shape)


register_op(_xshape_op(
    "reshape2", _infer_reshape2, [AttrSpec("shape", AttrType.INTS, ())],
    inputs=[Slot("Shape", dispensable=True), Slot("ShapeTensor", duplicable=True, dispensable=True)],
    doc="Reshape X to `shape` (0 = copy that input dim, one -1 = infer); ShapeTensor, then Shape, override it.",
))
register_op(_xshape_op(
    "flatten_contiguous_range", _infer_flatten,
    [AttrSpec("start_axis", AttrType.INT, 1), AttrSpec("stop_axis", AttrType.INT, 1)],
    doc="Merge dims start_axis..stop_axis (inclusive) of X into one.",
))
register_op(_xshape_op(
    "transpose2", _infer_transpose2, [AttrSpec("axis", AttrType.INTS)],
    doc="Permute the dims of X: Out.shape[i] = X.shape[axis[i]].",
))
register_op(_xshape_op(
    "squeeze2", _infer_squeeze2, [AttrSpec("axes", AttrType.INTS, ())], inputs=[Slot("AxesTensor", dispensable=True)],
    doc="Drop size-1 dims of X: those in `axes`, or all of them when `axes` is empty; the AxesTensor (computed "
        "at run time) names dims that must be of size 1.",
))
register_op(_xshape_op(
    "unsqueeze2", _infer_unsqueeze2, [AttrSpec("axes", AttrType.INTS, ())],
    inputs=[Slot("AxesTensor", dispensable=True), Slot("AxesTensorList", duplicable=True, dispensable=True)],
    doc="Insert size-1 dims into X at `axes` (AxesTensor, then AxesTensorList, override it).",
))


# -- fill_constant / assign / shape ----------------------------------------------------------------
def _infer_fill_constant(ctx: InferContext) -> None:
    code, text = ctx.attr("dtype"), ctx.attr("str_value")
    ctx.check(code in _DTYPE_CODES, f"attr 'dtype' = {code} is not a VarType.Type value "
                                    f"(e.g. {DType.float32.value} = float32, {DType.int64.value} = int64)")
    ctx.check(not text or _is_number(text), f"attr 'str_value' = {text!r} is not a number")
    if ctx.has_input("ValueTensor"):
        ctx.check(_numel(ctx.input("ValueTensor").shape) in (1, -1),
                  f"input 'ValueTensor' must hold one value, has shape {list(ctx.input('ValueTensor').shape)}")
    shape = _vector_input(ctx, "ShapeTensor")
    if shape is None:
        shape = _scalars_input(ctx, "ShapeTensorList")
    if shape is None:
        shape = list(ctx.attr("shape"))
    ctx.check(all(d is None or d >= 0 for d in shape), f"shape {shape} must not hold negative dims")
    ctx.set_output("Out", [-1 if d is None else d for d in shape], DType(code))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


register_op(OpSchema(
    "fill_constant",
    inputs=[Slot("ValueTensor", dispensable=True), Slot("ShapeTensor", dispensable=True),
            Slot("ShapeTensorList", duplicable=True, dispensable=True)],
    outputs=[Slot("Out")],
    attrs=[AttrSpec("dtype", AttrType.INT, DType.float32.value), AttrSpec("shape", AttrType.LONGS, ()),
           AttrSpec("value", AttrType.FLOAT, 0.0), AttrSpec("str_value", AttrType.STRING, ""),
           AttrSpec("force_cpu", AttrType.BOOLEAN, False), AttrSpec("place_type", AttrType.INT, -1)],
    infer=_infer_fill_constant, dtype_slots=(),
    keep_dtype_slots=("ValueTensor", "ShapeTensor", "ShapeTensorList"),
    doc="A `dtype` tensor of `shape` filled with `value` (str_value, then ValueTensor, override it; "
        "ShapeTensor, then ShapeTensorList, override `shape`). Its dtype is the attr's, not an input's.",
))


def _infer_fill_any_like(ctx: InferContext) -> None:
    code = ctx.attr("dtype")
    ctx.check(code == -1 or code in _DTYPE_CODES, f"attr 'dtype' = {code} is neither -1 (X's dtype) nor a "
                                                  f"VarType.Type value (e.g. {DType.float32.value} = float32)")
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype if code == -1 else DType(code))


register_op(OpSchema(
    "fill_any_like", inputs=[Slot("X")], outputs=[Slot("Out")],
    attrs=[AttrSpec("value", AttrType.FLOAT, 0.0), AttrSpec("dtype", AttrType.INT, -1)],
    infer=_infer_fill_any_like,
    doc="A tensor of X's shape filled with `value`, of dtype `dtype` (-1: X's); X's values are not read.",
))


def _infer_assign(ctx: InferContext) -> None:
    if ctx.has_input("X"):
        x = ctx.input("X")
        ctx.set_output("Out", x.shape, x.dtype)


register_op(OpSchema(
    "assign", inputs=[Slot("X", dispensable=True)], outputs=[Slot("Out")], infer=_infer_assign,
    inplace={"X": "Out"}, doc="Out = a copy of X (an absent X leaves Out as it is).",
))


def _infer_bitcast(ctx: InferContext) -> None:
    x, out_dtype = ctx.input("X"), DType(ctx.attr("out_dtype"))
    ctx.check(x.dtype.numpy.itemsize == out_dtype.numpy.itemsize,
              f"X is {x.dtype.name} ({x.dtype.numpy.itemsize} bytes), out_dtype {out_dtype.name} "
              f"({out_dtype.numpy.itemsize} bytes): bitcast keeps the size of the elements")
    ctx.set_output("Out", x.shape, out_dtype)


register_op(OpSchema(
    "bitcast", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("out_dtype", AttrType.INT)],
    infer=_infer_bitcast, doc="Out = the bits of X read as out_dtype, an element type of the same size.",
))


def _infer_shape(ctx: InferContext) -> None:
    ctx.set_output("Out", [len(ctx.input("Input").shape)], DType.int32)


register_op(OpSchema(
    "shape", inputs=[Slot("Input")], outputs=[Slot("Out")], infer=_infer_shape,
    doc="Out = the dims of Input, an int32 vector of length rank(Input).",
))


# -- slice --------------------------------------------------------------------------------------
def _slice_bounds(ctx: InferContext, attr: str, count: int) -> Ints:
    """``starts`` or ``ends``: from <Attr>Tensor, then <Attr>TensorList, then the attr."""
    slot = attr.capitalize() + "Tensor"
    values = _vector_input(ctx, slot)
    if values is None:
        values = _scalars_input(ctx, slot + "List")
    if values is None:
        values = list(ctx.attr(attr))
    ctx.check(len(values) == count, f"{attr} {values} has {len(values)} entries, attr 'axes' has {count}")
    return values


def _slice_size(ctx: InferContext, dim: int, start: int | None, end: int | None, axis: int) -> int:
    """Numpy's x[start:end] clamping; Paddle rejects an end before the start (numpy gives 0)."""
    if dim < 0 or start is None or end is None:
        return -1
    lo = min(max(start + dim if start < 0 else start, 0), dim)
    hi = min(max(end + dim if end < 0 else end, 0), dim)
    ctx.check(hi >= lo, f"axis {axis} (size {dim}): end {end} comes before start {start}")
    return hi - lo


def _infer_slice(ctx: InferContext) -> None:
    x = ctx.input("Input")
    rank = len(x.shape)
    axes = [check_axis(ctx, a, rank, "attr 'axes' entry") for a in ctx.attr("axes")]
    ctx.check(len(set(axes)) == len(axes), f"attr 'axes' = {list(ctx.attr('axes'))} repeats an axis")
    starts, ends = _slice_bounds(ctx, "starts", len(axes)), _slice_bounds(ctx, "ends", len(axes))
    flags = ctx.attr("infer_flags")
    ctx.check(not flags or len(flags) == len(axes), f"attr 'infer_flags' {list(flags)} must match attr 'axes'")
    from_attrs = not any(ctx.has_input(s) for s in ("StartsTensor", "EndsTensor", "StartsTensorList",
                                                    "EndsTensorList"))
    out = list(x.shape)
    for i, axis in enumerate(axes):
        unknown = from_attrs and bool(flags) and flags[i] == -1
        out[axis] = -1 if unknown else _slice_size(ctx, x.shape[axis], starts[i], ends[i], axis)
    drop = {check_axis(ctx, a, rank, "attr 'decrease_axis' entry") for a in ctx.attr("decrease_axis")}
    for a in sorted(drop):
        ctx.check(out[a] in (1, -1), f"attr 'decrease_axis' drops axis {a}, whose sliced size is {out[a]}, not 1")
    ctx.set_output("Out", [d for i, d in enumerate(out) if i not in drop], x.dtype)


register_op(OpSchema(
    "slice",
    inputs=[Slot("Input"), Slot("StartsTensor", dispensable=True), Slot("EndsTensor", dispensable=True),
            Slot("StartsTensorList", duplicable=True, dispensable=True),
            Slot("EndsTensorList", duplicable=True, dispensable=True)],
    outputs=[Slot("Out")],
    attrs=[AttrSpec("axes", AttrType.INTS), AttrSpec("starts", AttrType.INTS, ()),
           AttrSpec("ends", AttrType.INTS, ()), AttrSpec("infer_flags", AttrType.INTS, ()),
           AttrSpec("decrease_axis", AttrType.INTS, ())],
    infer=_infer_slice,
    keep_dtype_slots=("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"),
    views={"Out": "Input"},
    doc="Input[starts:ends] along `axes` (numpy clamping, negative = from the end); "
        "`decrease_axis` drops size-1 dims.",
))


def _infer_strided_slice(ctx: InferContext) -> None:
    x = ctx.input("Input")
    rank = len(x.shape)
    axes = [check_axis(ctx, a, rank, "attr 'axes' entry") for a in ctx.attr("axes")]
    starts, ends, strides = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("strides")
    ctx.check(len(set(axes)) == len(axes), f"attr 'axes' = {list(ctx.attr('axes'))} repeats an axis")
    ctx.check(len(starts) == len(ends) == len(strides) == len(axes),
              f"starts {list(starts)}, ends {list(ends)} and strides {list(strides)} need one entry per axis "
              f"of {list(axes)}")
    ctx.check(0 not in strides, f"attr 'strides' = {list(strides)} holds a 0")
    tensors = any(ctx.has_input(s) for s in _STRIDED_TENSORS)
    out = list(x.shape)
    for axis, start, end, step in zip(axes, starts, ends, strides):
        out[axis] = len(range(*slice(start, end, step).indices(out[axis]))) if out[axis] >= 0 and not tensors else -1
    drop = {check_axis(ctx, a, rank, "attr 'decrease_axis' entry") for a in ctx.attr("decrease_axis")}
    for a in sorted(drop):
        ctx.check(out[a] in (1, -1), f"attr 'decrease_axis' drops axis {a}, whose sliced size is {out[a]}, not 1")
    ctx.set_output("Out", [d for i, d in enumerate(out) if i not in drop], x.dtype)


_STRIDED_TENSORS = ("StartsTensor", "EndsTensor", "StridesTensor")
"""strided_slice's bounds computed at run time (1-D, one entry per axis), which replace the attrs."""


register_op(OpSchema(
    "strided_slice", inputs=[Slot("Input"), *(Slot(s, dispensable=True) for s in _STRIDED_TENSORS)],
    outputs=[Slot("Out")], keep_dtype_slots=_STRIDED_TENSORS,
    attrs=[AttrSpec("axes", AttrType.INTS), AttrSpec("starts", AttrType.INTS), AttrSpec("ends", AttrType.INTS),
           AttrSpec("strides", AttrType.INTS), AttrSpec("infer_flags", AttrType.INTS, ()),
           AttrSpec("decrease_axis", AttrType.INTS, ())],
    infer=_infer_strided_slice, views={"Out": "Input"},
    doc="Input[starts:ends:strides] along `axes` with Python's slice semantics (negative strides walk "
        "backwards; bounds are clamped); `decrease_axis` drops size-1 dims; StartsTensor, EndsTensor and "
        "StridesTensor replace their attrs.",
))


def _infer_pad3d(ctx: InferContext) -> None:
    x = ranked(ctx, "X", 5)
    channel_last = ctx.attr("data_format") == "NDHWC"
    n, c, (d, h, w) = split_channels(x.shape, channel_last)
    if ctx.has_input("Paddings"):
        value = ctx.input_value("Paddings")
        if value is None:
            ctx.set_output("Out", join_channels(n, c, (-1, -1, -1), channel_last), x.dtype)
            return
        paddings = [int(v) for v in value.reshape(-1)]
    else:
        paddings = list(ctx.attr("paddings"))
    ctx.check(len(paddings) == 6 and min(paddings) >= 0,
              f"paddings must be 6 values >= 0 [left, right, top, bottom, front, back], got {paddings}")
    pairs = ((paddings[4], paddings[5]), (paddings[2], paddings[3]), (paddings[0], paddings[1]))
    out = []
    for axis, (size, (before, after)) in zip("DHW", zip((d, h, w), pairs)):
        if ctx.attr("mode") == "reflect" and size >= 0:
            ctx.check(max(before, after) < size, f"reflect padding of {axis} ({before}, {after}) must be "
                                                 f"smaller than the input's {axis} ({size})")
        out.append(size + before + after if size >= 0 else -1)
    ctx.set_output("Out", join_channels(n, c, out, channel_last), x.dtype)


register_op(OpSchema(
    "pad3d", inputs=[Slot("X"), Slot("Paddings", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("paddings", AttrType.INTS, [0] * 6),
           AttrSpec("mode", AttrType.STRING, "constant", choices=("constant", "reflect", "replicate", "circular")),
           AttrSpec("value", AttrType.FLOAT, 0.0),
           AttrSpec("data_format", AttrType.STRING, "NCDHW", choices=("NCDHW", "NDHWC"))],
    infer=_infer_pad3d, keep_dtype_slots=("Paddings",),
    doc="Pads the D, H, W dims of a 5-D tensor; paddings (or the Paddings tensor) are "
        "[left, right, top, bottom, front, back].",
))


def _infer_pad(ctx: InferContext) -> None:
    x = ctx.input("X")
    if ctx.has_input("Paddings"):
        value = ctx.input_value("Paddings")
        paddings = [int(v) for v in np.asarray(value).reshape(-1)] if value is not None else None
    else:
        paddings = list(ctx.attr("paddings"))
    if paddings is None:
        ctx.set_output("Out", [-1] * len(x.shape), x.dtype)
        return
    ctx.check(len(paddings) == 2 * len(x.shape) and min(paddings, default=0) >= 0,
              f"paddings must be {2 * len(x.shape)} values >= 0 (before, after per dim of X "
              f"{list(x.shape)}), got {paddings}")
    out = [d + paddings[2 * i] + paddings[2 * i + 1] if d >= 0 else -1 for i, d in enumerate(x.shape)]
    ctx.set_output("Out", out, x.dtype)


register_op(OpSchema(
    "pad", inputs=[Slot("X"), Slot("Paddings", dispensable=True), Slot("ValueTensor", dispensable=True)],
    outputs=[Slot("Out")],
    attrs=[AttrSpec("paddings", AttrType.INTS, []), AttrSpec("pad_value", AttrType.FLOAT, 0.0),
           AttrSpec("mode", AttrType.STRING, "constant", choices=("constant", "reflect", "edge", "wrap"))],
    infer=_infer_pad, keep_dtype_slots=("Paddings",),
    doc="Pads every dim of X with pad_value; paddings are [before_0, after_0, before_1, after_1, ...] "
        "(the Paddings tensor, a halfway extension for run-time pads, overrides the attr; so does the "
        "ValueTensor, one value of X's dtype, the pad value); `mode` (a halfway extension) reflects, repeats "
        "the edge or wraps around instead of padding with the value.",
))


def _infer_dropout(ctx: InferContext) -> None:
    x = ctx.input("X")
    p = ctx.attr("dropout_prob")
    ctx.check(0.0 <= p <= 1.0, f"attr dropout_prob must be in [0, 1], got {p}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Mask", x.shape, DType.uint8)


register_op(OpSchema(
    "dropout", inputs=[Slot("X"), Slot("Seed", dispensable=True)],
    outputs=[Slot("Out"), Slot("Mask", dispensable=True)],
    attrs=[AttrSpec("dropout_prob", AttrType.FLOAT, 0.5), AttrSpec("is_test", AttrType.BOOLEAN, False),
           AttrSpec("dropout_implementation", AttrType.STRING, "downgrade_in_infer",
                    choices=("downgrade_in_infer", "upscale_in_train")),
           AttrSpec("fix_seed", AttrType.BOOLEAN, False), AttrSpec("seed", AttrType.INT, 0)],
    infer=_infer_dropout, keep_dtype_slots=("Seed",), inplace={"X": "Out"}, views={"Out": "X"},
    doc="Inference dropout: Out = X * (1 - dropout_prob) (downgrade_in_infer) or X (upscale_in_train).",
))
