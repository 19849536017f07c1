"""Schemas of the selection and indexing ops: where, expand_v2, tile, cumsum, cumprod, tril_triu, range,
arg_max / arg_min, top_k_v2, where_index, lookup_table_v2, gather, gather_nd, take_along_axis, put_along_axis, scatter_nd and
scatter_nd_add, tensor_scatter, one_hot_v2 and einsum — Paddle's op types, slots, attrs and defaults
(scatter_nd, ONNX's ScatterND with a ``reduce`` attr, and tensor_scatter, ONNX's TensorScatter,
have no Paddle counterpart).

Index tensors (``Index``, ``Condition``, ``Start``/``End``/``Step``) are ``keep_dtype_slots``:
they keep their own dtype under a float16 kernel. Negative indices count from the end of their
dim, as numpy's and ONNX's do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op
from .tensor import check_axis, scalar_input
from .window import same_dim

__all__ = ["broadcast_dims", "einsum_shape", "range_length"]

_INDEX_DTYPES = (DType.int32, DType.int64)


def broadcast_dims(ctx: InferContext, shapes: Sequence[Sequence[int]]) -> list[int]:
    """numpy's broadcast of ``shapes`` (-1 = unknown: taken as the other side's size)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0}
        known = dims - {1, -1}
        ctx.check(len(known) <= 1, f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(known.pop() if known else -1 if -1 in dims else 1)
    return out


def _axis(ctx: InferContext, axis: int, rank: int) -> int:
    ctx.check(-rank <= axis < max(rank, 1), f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def _index(ctx: InferContext, slot: str) -> tuple[int, ...]:
    info = ctx.input(slot)
    ctx.check(info.dtype in _INDEX_DTYPES, f"input {slot!r} must be int32 or int64, got {info.dtype.name}")
    return info.shape


# -- where / expand_v2 / tile ----------------------------------------------------------------------
def _infer_where(ctx: InferContext) -> None:
    cond, x, y = ctx.input("Condition"), ctx.input("X"), ctx.input("Y")
    ctx.check(cond.dtype is DType.bool, f"input 'Condition' must be bool, got {cond.dtype.name}")
    ctx.check(x.dtype == y.dtype, f"X is {x.dtype.name} but Y is {y.dtype.name}")
    ctx.set_output("Out", broadcast_dims(ctx, [cond.shape, x.shape, y.shape]), x.dtype)


def _target(ctx: InferContext, slot: str, attr: str) -> list[int | None]:
    """A shape-like int list from tensor ``slot`` when the op has it (None where its value is not
    known yet), else attr ``attr``."""
    if not ctx.has_input(slot):
        return list(ctx.attr(attr))
    info = ctx.input(slot)
    ctx.check(info.dtype in _INDEX_DTYPES and len(info.shape) == 1 and info.shape[0] >= 0,
              f"input {slot!r} must be a 1-D int32/int64 tensor of known length, got {info.dtype.name}"
              f"{list(info.shape)}")
    value = ctx.input_value(slot)
    return [None] * info.shape[0] if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def _expanded_dim(have: int, want: int | None, new: bool) -> int | None:
    """One dim of expand_v2's output: X's ``have`` (-1 = unknown; 1 for a ``new`` leading dim)
    taken to ``want`` (None = not known yet); None when it cannot be."""
    if want is None:
        return have if have > 1 else -1
    if want == -1:
        return None if new else have
    if want == 1:
        return have
    return want if have in (1, want, -1) else None


def _infer_expand(ctx: InferContext) -> None:
    """Paddle's rule (-1 keeps X's dim; new dims lead) widened to ONNX Expand's two-way
    broadcast (a 1 keeps X's dim; either shape may be the longer), so that a run-time ONNX
    shape can be the Shape input as it is."""
    x, target = ctx.input("X"), _target(ctx, "Shape", "shape")
    rank = max(len(x.shape), len(target))
    have = [1] * (rank - len(x.shape)) + list(x.shape)
    want: list[int | None] = [*[1] * (rank - len(target)), *target]
    lead = rank - len(x.shape)
    out = [_expanded_dim(h, w, i < lead) for i, (h, w) in enumerate(zip(have, want))]
    bad = [i for i, d in enumerate(out) if d is None]
    ctx.check(not bad, f"cannot expand X {list(x.shape)} to {target} (dim {bad[:1]})")
    ctx.set_output("Out", [d for d in out if d is not None], x.dtype)


def _infer_tile(ctx: InferContext) -> None:
    x, times = ctx.input("X"), _target(ctx, "RepeatTimes", "repeat_times")
    ctx.check(all(t is None or t >= 1 for t in times), f"repeat_times {times} must be >= 1")
    rank = max(len(x.shape), len(times))
    shape = [1] * (rank - len(x.shape)) + list(x.shape)
    padded: list[int | None] = [*[1] * (rank - len(times)), *times]
    ctx.set_output("Out", [d * t if d >= 0 and t is not None else -1 for d, t in zip(shape, padded)], x.dtype)


register_op(OpSchema(
    "where", inputs=[Slot("Condition"), Slot("X"), Slot("Y")], outputs=[Slot("Out")], infer=_infer_where,
    dtype_slots=("X", "Y"), keep_dtype_slots=("Condition",),
    doc="Out = X where Condition else Y, the three broadcast numpy's way.",
))
register_op(OpSchema(
    "expand_v2", inputs=[Slot("X"), Slot("Shape", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("shape", AttrType.INTS, ())], infer=_infer_expand, keep_dtype_slots=("Shape",),
    doc="X broadcast to `shape` (the Shape tensor overrides it): -1 or 1 keeps X's dim, new dims lead, "
        "and the shorter of the two shapes is padded with leading 1s (numpy's and ONNX's broadcast).",
))
register_op(OpSchema(
    "tile", inputs=[Slot("X"), Slot("RepeatTimes", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("repeat_times", AttrType.INTS, ())], infer=_infer_tile, keep_dtype_slots=("RepeatTimes",),
    doc="X repeated repeat_times[i] times along dim i (the RepeatTimes tensor overrides the attr; "
        "leading 1s fill the shorter).",
))


# -- cumsum / tril_triu ----------------------------------------------------------------------------
def _infer_cumsum(ctx: InferContext) -> None:
    x = ctx.input("X")
    if ctx.attr("flatten"):
        ctx.set_output("Out", [math.prod(x.shape) if min(x.shape, default=0) >= 0 else -1], x.dtype)
        return
    _infer_cumsum_like(ctx, "axis")


def _infer_cumprod(ctx: InferContext) -> None:
    _infer_cumsum_like(ctx, "dim")


def _infer_cumsum_like(ctx: InferContext, axis_attr: str) -> None:
    """The AxisTensor (a halfway extension: the axis computed at run time) replaces the attr."""
    x = ctx.input("X")
    axis = scalar_input(ctx, "AxisTensor", axis_attr)
    if axis is not None:
        _axis(ctx, axis, len(x.shape))
    ctx.set_output("Out", x.shape, x.dtype)


def _infer_tril_triu(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.check(len(x.shape) >= 2, f"X must have rank >= 2, has shape {list(x.shape)}")
    scalar_input(ctx, "DiagonalTensor", "diagonal")
    ctx.set_output("Out", x.shape, x.dtype)


register_op(OpSchema(
    "cumsum", inputs=[Slot("X"), Slot("AxisTensor", dispensable=True)], outputs=[Slot("Out")], keep_dtype_slots=("AxisTensor",),
    attrs=[AttrSpec("axis", AttrType.INT, -1), AttrSpec("flatten", AttrType.BOOLEAN, False),
           AttrSpec("exclusive", AttrType.BOOLEAN, False), AttrSpec("reverse", AttrType.BOOLEAN, False)],
    infer=_infer_cumsum,
    doc="Running sums of X along `axis` (of X flattened when `flatten`); `exclusive` leaves the element "
        "itself out, `reverse` sums from the end; the AxisTensor (one int) replaces `axis`.",
))
register_op(OpSchema(
    "cumprod", inputs=[Slot("X"), Slot("AxisTensor", dispensable=True)], outputs=[Slot("Out")], keep_dtype_slots=("AxisTensor",),
    attrs=[AttrSpec("dim", AttrType.INT, -1), AttrSpec("exclusive", AttrType.BOOLEAN, False),
           AttrSpec("reverse", AttrType.BOOLEAN, False)],
    infer=_infer_cumprod,
    doc="Running products of X along `dim`; `exclusive` leaves the element itself out (a 1 first), "
        "`reverse` multiplies from the end; the AxisTensor (one int) replaces `dim`.",
))
register_op(OpSchema(
    "tril_triu", inputs=[Slot("X"), Slot("DiagonalTensor", dispensable=True)], outputs=[Slot("Out")],
    keep_dtype_slots=("DiagonalTensor",),
    attrs=[AttrSpec("diagonal", AttrType.INT, 0), AttrSpec("lower", AttrType.BOOLEAN, False)],
    infer=_infer_tril_triu,
    doc="X with the entries above (lower) or below (upper) diagonal `diagonal` of its last two dims zeroed "
        "(the DiagonalTensor, one int, replaces the attr).",
))


# -- range -----------------------------------------------------------------------------------------
def range_length(start: float, end: float, step: float) -> int:
    """How many values range(start, end, step) holds (0 when it runs the wrong way)."""
    return max(math.ceil((end - start) / step), 0)


def _infer_range(ctx: InferContext) -> None:
    infos = [ctx.input(s) for s in ("Start", "End", "Step")]
    for slot, info in zip(("Start", "End", "Step"), infos):
        ctx.check(math.prod(info.shape) in (1, -1), f"input {slot!r} must hold one value, has {list(info.shape)}")
        ctx.check(info.dtype == infos[0].dtype, f"Start is {infos[0].dtype.name} but {slot} is {info.dtype.name}")
    values = [ctx.input_value(s) for s in ("Start", "End", "Step")]
    if any(v is None for v in values):
        ctx.set_output("Out", [-1], infos[0].dtype)
        return
    start, end, step = (float(np.asarray(v).reshape(-1)[0]) for v in values)
    ctx.check(step != 0 and all(map(math.isfinite, (start, end, step))), f"range({start}, {end}, {step}) has no end")
    ctx.set_output("Out", [range_length(start, end, step)], infos[0].dtype)


register_op(OpSchema(
    "range", inputs=[Slot("Start"), Slot("End"), Slot("Step")], outputs=[Slot("Out")], infer=_infer_range,
    doc="Out = Start, Start + Step, ... up to End (exclusive), of Start's dtype.",
))


# -- arg_max / arg_min / top_k_v2 ------------------------------------------------------------------
def _infer_arg(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.check(ctx.attr("dtype") in (int(DType.int32), int(DType.int64)),
              f"attr dtype must be int32 ({int(DType.int32)}) or int64 ({int(DType.int64)}), got {ctx.attr('dtype')}")
    dtype = DType(ctx.attr("dtype"))
    if ctx.attr("flatten"):
        ctx.set_output("Out", [1] * len(x.shape) if ctx.attr("keepdims") else [], dtype)
        return
    axis = _axis(ctx, ctx.attr("axis"), len(x.shape))
    keep = ctx.attr("keepdims")
    ctx.set_output("Out", [1 if i == axis else d for i, d in enumerate(x.shape) if keep or i != axis], dtype)


for _op_type, _which in (("arg_max", "largest"), ("arg_min", "smallest")):
    register_op(OpSchema(
        _op_type, inputs=[Slot("X")], outputs=[Slot("Out")],
        attrs=[AttrSpec("axis", AttrType.LONG, 0), AttrSpec("keepdims", AttrType.BOOLEAN, False),
               AttrSpec("flatten", AttrType.BOOLEAN, False), AttrSpec("dtype", AttrType.INT, int(DType.int64))],
        infer=_infer_arg,
        doc=f"The index of the {_which} entry of X along `axis` (the first of equals; of X flattened when "
            f"`flatten`), as `dtype`.",
    ))


def _infer_top_k(ctx: InferContext) -> None:
    x = ctx.input("X")
    axis = _axis(ctx, ctx.attr("axis"), len(x.shape))
    k = ctx.attr("k")
    if ctx.has_input("K"):
        value = ctx.input_value("K")
        k = -1 if value is None else int(np.asarray(value).reshape(-1)[0])
    ctx.check(k >= -1 and (x.shape[axis] < 0 or k <= x.shape[axis]),
              f"k = {k} is out of range for dim {axis} of X {list(x.shape)}")
    out = [k if i == axis else d for i, d in enumerate(x.shape)]
    ctx.set_output("Out", out, x.dtype)
    ctx.set_output("Indices", out, DType.int64)


register_op(OpSchema(
    "top_k_v2", inputs=[Slot("X"), Slot("K", dispensable=True)], outputs=[Slot("Out"), Slot("Indices")],
    attrs=[AttrSpec("k", AttrType.INT, 1), AttrSpec("axis", AttrType.INT, -1),
           AttrSpec("largest", AttrType.BOOLEAN, True), AttrSpec("sorted", AttrType.BOOLEAN, True)],
    infer=_infer_top_k, keep_dtype_slots=("K",),
    doc="The k largest (or smallest) entries of X along `axis` and their int64 indices, in order, equal "
        "values by index (K overrides k).",
))


def _infer_where_index(ctx: InferContext) -> None:
    ctx.set_output("Out", [-1, len(ctx.input("Condition").shape)], DType.int64)


register_op(OpSchema(
    "where_index", inputs=[Slot("Condition")], outputs=[Slot("Out")], infer=_infer_where_index,
    doc="The int64 indices of the nonzero (true) entries of Condition, one row per entry in row-major "
        "order: [count, rank], count known only when it runs (ONNX's NonZero is its transpose).",
))


# -- lookup_table_v2 --------------------------------------------------------------------------------
def _infer_lookup_table(ctx: InferContext) -> None:
    table, ids = ctx.input("W"), ctx.input("Ids")
    ctx.check(ids.dtype in _INDEX_DTYPES, f"input 'Ids' must be int32 or int64, got {ids.dtype.name}")
    ctx.check(len(table.shape) == 2, f"input 'W' must be a [rows, width] table, got shape {list(table.shape)}")
    ctx.set_output("Out", [*ids.shape, table.shape[1]], table.dtype)


register_op(OpSchema(
    "lookup_table_v2", inputs=[Slot("W"), Slot("Ids")], outputs=[Slot("Out")],
    attrs=[AttrSpec("padding_idx", AttrType.LONG, -1)], infer=_infer_lookup_table,
    dtype_slots=("W",), keep_dtype_slots=("Ids",),
    doc="Embedding: Out[i...] = W[Ids[i...]], ids in [0, rows); rows of id `padding_idx` (when not -1) "
        "are zeros.",
))


# -- gather_nd / take_along_axis / put_along_axis / scatter_nd --------------------------------------
def _infer_gather_nd(ctx: InferContext) -> None:
    x, index, batch = ctx.input("X"), _index(ctx, "Index"), ctx.attr("batch_dims")
    ctx.check(0 <= batch < min(len(index), len(x.shape) + 1) and all(map(same_dim, x.shape[:batch], index[:batch])),
              f"attr batch_dims = {batch} must count leading dims X {list(x.shape)} and Index {list(index)} share, "
              f"Index's last dim not among them")
    ctx.check(len(index) >= 1 and 0 <= index[-1] <= len(x.shape) - batch,
              f"Index {list(index)} must end in a dim of at most X's rank {len(x.shape)} less batch_dims {batch}")
    ctx.set_output("Out", [*index[:-1], *x.shape[batch + index[-1]:]], x.dtype)


def _infer_take_along_axis(ctx: InferContext) -> None:
    x, index = ctx.input("Input"), _index(ctx, "Index")
    ctx.check(len(index) == len(x.shape), f"Index {list(index)} and Input {list(x.shape)} differ in rank")
    _axis(ctx, ctx.attr("Axis"), len(x.shape))
    ctx.set_output("Result", index, x.dtype)


_REDUCTIONS = ("assign", "add", "mul", "amax", "amin")


def _infer_put_along_axis(ctx: InferContext) -> None:
    x, index, value = ctx.input("Input"), _index(ctx, "Index"), ctx.input("Value")
    ctx.check(len(index) == len(x.shape) == len(value.shape),
              f"Input {list(x.shape)}, Index {list(index)} and Value {list(value.shape)} differ in rank")
    _axis(ctx, ctx.attr("Axis"), len(x.shape))
    ctx.set_output("Result", x.shape, x.dtype)


def _infer_scatter_nd(ctx: InferContext) -> None:
    x, index, updates = ctx.input("X"), _index(ctx, "Index"), ctx.input("Updates")
    ctx.check(len(index) >= 1 and 0 <= index[-1] <= len(x.shape),
              f"Index {list(index)} must end in a dim of at most X's rank {len(x.shape)}")
    ctx.check(len(updates.shape) == len(index) - 1 + len(x.shape) - index[-1],
              f"Updates {list(updates.shape)} must be Index's leading dims {list(index[:-1])} and X's trailing ones")
    ctx.set_output("Out", x.shape, x.dtype)


register_op(OpSchema(
    "gather_nd", inputs=[Slot("X"), Slot("Index")], outputs=[Slot("Out")], infer=_infer_gather_nd,
    attrs=[AttrSpec("batch_dims", AttrType.INT, 0)], keep_dtype_slots=("Index",),
    doc="Out[i...] = X[Index[i...]]: the last dim of Index holds a (partial) index into X's leading dims; the "
        "first batch_dims dims (a halfway attr for ONNX's GatherND) pair X's and Index's slices one to one.",
))
register_op(OpSchema(
    "take_along_axis", inputs=[Slot("Input"), Slot("Index")], outputs=[Slot("Result")],
    attrs=[AttrSpec("Axis", AttrType.INT, 0)], infer=_infer_take_along_axis, keep_dtype_slots=("Index",),
    doc="Result[..., i, ...] = Input[..., Index[..., i, ...], ...] along `Axis`; Index may be smaller than "
        "Input on the other dims.",
))
register_op(OpSchema(
    "put_along_axis", inputs=[Slot("Input"), Slot("Index"), Slot("Value")], outputs=[Slot("Result")],
    attrs=[AttrSpec("Axis", AttrType.INT, 0), AttrSpec("Reduce", AttrType.STRING, "assign", choices=_REDUCTIONS)],
    infer=_infer_put_along_axis, dtype_slots=("Input", "Value"), keep_dtype_slots=("Index",),
    doc="Input with Value written (or reduced, by `Reduce`) at Index along `Axis`, in order.",
))
for _op_type, _reduce in (("scatter_nd", True), ("scatter_nd_add", False)):
    register_op(OpSchema(
        _op_type, inputs=[Slot("X"), Slot("Index"), Slot("Updates")], outputs=[Slot("Out")],
        attrs=[AttrSpec("reduce", AttrType.STRING, "assign", choices=_REDUCTIONS)] if _reduce else [],
        infer=_infer_scatter_nd, dtype_slots=("X", "Updates"), keep_dtype_slots=("Index",),
        doc="X with Updates " + ("written (or reduced, by `reduce`)" if _reduce else "added") +
            " at the (partial) indices in the last dim of Index, in order.",
    ))



def _infer_tensor_scatter(ctx: InferContext) -> None:
    cache, update = ctx.input("PastCache"), ctx.input("Update")
    rank = len(cache.shape)
    ctx.check(rank >= 2, f"PastCache must have a batch dim and at least one more, has shape {list(cache.shape)}")
    axis = check_axis(ctx, ctx.attr("axis"), rank, "attr axis")
    ctx.check(axis != 0, "attr axis must not be the batch dim (0)")
    ctx.check(len(update.shape) == rank and all(i == axis or same_dim(a, b) for i, (a, b) in
                                                enumerate(zip(cache.shape, update.shape))),
              f"Update {list(update.shape)} must have PastCache's shape {list(cache.shape)} but along axis {axis}")
    if ctx.has_input("WriteIndices"):
        ctx.check(len(ctx.input("WriteIndices").shape) == 1, f"WriteIndices must be [batch], has shape "
                                                              f"{list(ctx.input('WriteIndices').shape)}")
    ctx.set_output("Out", cache.shape, cache.dtype)


register_op(OpSchema(
    "tensor_scatter", inputs=[Slot("PastCache"), Slot("Update"), Slot("WriteIndices", dispensable=True)],
    outputs=[Slot("Out")],
    attrs=[AttrSpec("axis", AttrType.INT, -2), AttrSpec("mode", AttrType.STRING, "linear", choices=("linear", "circular"))],
    infer=_infer_tensor_scatter, dtype_slots=("PastCache", "Update"), keep_dtype_slots=("WriteIndices",),
    doc="PastCache with each batch row's Update written along `axis` from its WriteIndices position (0 when "
        "absent); `circular` wraps the positions around the axis, `linear` must fit in it (ONNX's TensorScatter).",
))

# -- one_hot_v2 / einsum ----------------------------------------------------------------------------
def _infer_one_hot(ctx: InferContext) -> None:
    x = _index(ctx, "X")
    depth = scalar_input(ctx, "depth_tensor", "depth")
    ctx.check(depth is None or depth >= 1, f"depth must be >= 1, got {depth}")
    ctx.set_output("Out", [*x, -1 if depth is None else depth], DType(ctx.attr("dtype")))


register_op(OpSchema(
    "one_hot_v2", inputs=[Slot("X"), Slot("depth_tensor", dispensable=True)], outputs=[Slot("Out")],
    keep_dtype_slots=("depth_tensor",),
    attrs=[AttrSpec("depth", AttrType.INT), AttrSpec("dtype", AttrType.INT, int(DType.float32)),
           AttrSpec("allow_out_of_range", AttrType.BOOLEAN, False)],
    infer=_infer_one_hot,
    doc="Out[..., j] = 1 where X[...] == j, else 0 (a new last dim of size depth, or depth_tensor's one "
        "value); an index outside [0, depth) is an error unless allow_out_of_range (a row of zeros).",
))


def _infer_unique(ctx: InferContext) -> None:
    x, axes = ctx.input("X"), ctx.attr("axis")
    ctx.check(len(axes) <= 1, f"attr axis must name one axis or none, got {list(axes)}")
    axis = check_axis(ctx, axes[0], len(x.shape), "attr 'axis'") if axes else None
    count = _numel_of(x.shape) if axis is None else x.shape[axis]
    ctx.set_output("Out", [-1] if axis is None else [-1 if i == axis else d for i, d in enumerate(x.shape)], x.dtype)
    for slot, dims in (("Indices", [-1]), ("Index", [count]), ("Counts", [-1])):
        ctx.set_output(slot, dims, DType.int64)


def _numel_of(shape: Sequence[int]) -> int:
    return -1 if any(d < 0 for d in shape) else math.prod(shape)


register_op(OpSchema(
    "unique", inputs=[Slot("X")],
    outputs=[Slot("Out"), Slot("Indices", dispensable=True), Slot("Index", dispensable=True),
             Slot("Counts", dispensable=True)],
    attrs=[AttrSpec("axis", AttrType.INTS, ()), AttrSpec("is_sorted", AttrType.BOOLEAN, True)],
    infer=_infer_unique,
    doc="The distinct values of X (flattened, or its slices along `axis`), ascending or (not is_sorted) in "
        "order of first appearance; Indices: where each first appears, Index: which one each element is, "
        "Counts: how often each appears (int64).",
))


def _infer_reverse_sequence(ctx: InferContext) -> None:
    x, lengths = ctx.input("X"), _index(ctx, "SequenceLength")
    batch, time = (check_axis(ctx, ctx.attr(a), len(x.shape), f"attr {a!r}") for a in ("batch_axis", "time_axis"))
    ctx.check(len(x.shape) >= 2 and batch != time, f"X {list(x.shape)} needs a batch and a time axis apart, "
                                                   f"got {batch} and {time}")
    ctx.check(len(lengths) == 1 and (x.shape[batch] < 0 or lengths[0] in (x.shape[batch], -1)),
              f"SequenceLength {list(lengths)} must hold one length per batch row ({x.shape[batch]})")
    ctx.set_output("Y", x.shape, x.dtype)


register_op(OpSchema(
    "reverse_sequence", inputs=[Slot("X"), Slot("SequenceLength")], outputs=[Slot("Y")],
    attrs=[AttrSpec("batch_axis", AttrType.INT, 1), AttrSpec("time_axis", AttrType.INT, 0)],
    infer=_infer_reverse_sequence, keep_dtype_slots=("SequenceLength",),
    doc="X with the first SequenceLength[b] steps along time_axis of each batch row b reversed, the rest kept.",
))


def einsum_shape(equation: str, shapes: Sequence[Sequence[int]]) -> list[int]:
    """The output dims of ``equation`` (explicit ``->`` or numpy's implicit output) for ``shapes``;
    ValueError when they do not fit."""
    lhs, arrow, output = equation.replace(" ", "").replace("...", ".").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"equation {equation!r} names {len(terms)} operands, {len(shapes)} are given")
    sizes: dict[str, int] = {}
    batch: list[int] = []
    for term, shape in zip(terms, shapes):
        extra = len(shape) - len(term.replace(".", ""))
        if extra < 0 or extra and "." not in term:
            raise ValueError(f"term {term!r} of {equation!r} does not fit a rank-{len(shape)} operand")
        dims = iter(shape)
        for label in term:
            if label == ".":
                batch = _broadcast_pair(equation, [next(dims) for _ in range(extra)], batch)
                continue
            sizes[label] = _unify_label(equation, label, sizes.get(label, 1), next(dims))
    if not arrow:
        labels = lhs.replace(",", "").replace(".", "")
        output = ("." if "." in lhs else "") + "".join(sorted(c for c in set(labels) if labels.count(c) == 1))
    out: list[int] = []
    for label in output:
        out.extend(batch if label == "." else [sizes[label]])
    return out


def _unify_label(equation: str, label: str, known: int, d: int) -> int:
    """One size for ``label`` seen as ``known`` and then ``d``: a 1 broadcasts, a symbolic dim (< 0)
    takes the concrete size it meets (checked at run time, by the kernel), two concrete sizes must agree."""
    if d in (1, known):
        return known
    if known == 1 or known < 0:
        return d
    if d < 0:
        return known
    raise ValueError(f"label {label!r} of {equation!r} has sizes {known} and {d}")


def _broadcast_pair(equation: str, a: list[int], b: list[int]) -> list[int]:
    """The dims two operands' ``...`` broadcast to, unified as labels are."""
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + a, [1] * (rank - len(b)) + b
    return [_unify_label(equation, "...", known, d) for d, known in zip(a, b)]


def _infer_einsum(ctx: InferContext) -> None:
    operands = ctx.inputs("Operands")
    ctx.check(bool(operands), "input 'Operands' needs at least one var")
    try:
        shape = einsum_shape(ctx.attr("equation"), [o.shape for o in operands])
    except ValueError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", shape, operands[0].dtype)


register_op(OpSchema(
    "einsum", inputs=[Slot("Operands", duplicable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("equation", AttrType.STRING)], infer=_infer_einsum,
    doc="The Einstein summation `equation` of the Operands (numpy's einsum).",
))


def _infer_gather(ctx: InferContext) -> None:
    x, index = ctx.input("X"), ctx.input("Index")
    ctx.check(index.dtype in _INDEX_DTYPES, f"input 'Index' must be int32 or int64, got {index.dtype.name}")
    ctx.check(len(index.shape) <= 1 or (len(index.shape) == 2 and index.shape[1] in (1, -1)),
              f"input 'Index' must be 0-d, 1-D or [N, 1], got shape {list(index.shape)}")
    rank = len(x.shape)
    ctx.check(rank > 0, "input 'X' must have rank >= 1, got a 0-d tensor")
    axis = scalar_input(ctx, "Axis", "axis")
    if axis is None:
        ctx.set_output("Out", [-1] * (rank - (not index.shape)), x.dtype)
        return
    axis = check_axis(ctx, axis, rank, "attr 'axis'")
    ctx.set_output("Out", [*x.shape[:axis], *index.shape[:1], *x.shape[axis + 1:]], x.dtype)


register_op(OpSchema(
    "gather", inputs=[Slot("X"), Slot("Index"), Slot("Axis", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("axis", AttrType.INT, 0), AttrSpec("overwrite", AttrType.BOOLEAN, True)],
    infer=_infer_gather, keep_dtype_slots=("Index", "Axis"),
    doc="Take the entries of X at Index along `axis` (the Axis tensor overrides it); a negative index "
        "counts from the end of the dim.",
))
