"""Schemas of the math ops: the family rows (``halfway.ir.ops.families``: elementwise binary
ops, activations, comparisons and logical ops, reductions), scale, clip, pow, sum, cast, mean.

Broadcasting (Paddle's ``ElementwiseRawInferMeta`` + ``funcs::GetBroadcastDimsArrays``): equal
shapes need nothing (``axis`` is ignored). Otherwise the operand of lower rank, Y or X, is aligned
with the other starting at dim ``axis``: -1 aligns the last dims (numpy's rule), another negative
``axis`` becomes ``rank_diff + axis + 1``, and equal ranks take only -1 or 0. Aligned dims must
be equal or one of them 1; -1 (unknown) broadcasts like a 1 and the result keeps the known dim.
``broadcast_shape`` gives Out's shape; kernels reshape the operands with
``numpy_operand_shapes`` (or ``paddle_axis_to_numpy``) and then let numpy broadcast.

Dtypes: an op's Out has the dtype of its decisive input unless the entry says otherwise. Both
operands of an elementwise op decide its dtype and must agree (no implicit promotion: insert a
cast). ``cast`` computes in its input's dtype (attr ``in_dtype``, which must match X) and writes
``out_dtype``. Reductions write ``out_dtype`` when it is set (not -1); ``reduce_sum`` of bool or
int32 otherwise gives int64, as Paddle's does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..attrs import AttrType
from ..dtypes import DType
from ..errors import IRError
from ..schema import AttrSpec, InferContext, InferError, OpSchema, Slot, TensorInfo, register_op, same_as
from .families import BINARY, COMPARE, REDUCE, UNARY
from .family import Elementwise

__all__ = ["broadcast_shape", "paddle_axis_to_numpy", "numpy_operand_shapes", "reduced_axes"]

Shape = tuple[int, ...]
InferFn = Callable[[InferContext], None]


# -- broadcasting ---------------------------------------------------------------------------------
def paddle_axis_to_numpy(y_shape: Sequence[int], x_ndim: int, axis: int = -1) -> Shape:
    """The shape to give Y so that numpy's right-aligned broadcasting puts it where Paddle's
    ``axis`` does: Y's dims followed by enough 1s to end at X's last dim.

    Y is the operand of lower (or equal) rank; pass X's shape as ``y_shape`` and Y's rank as
    ``x_ndim`` when X has the lower rank. Where Y would run past X's last dim, its trailing 1s are
    dropped first (fluid 1.x accepted X [2, 3, 4] + Y [4, 1] with axis 2).

    Raises:
        InferError: Y has more dims than ``x_ndim``, or ``axis`` is out of range or puts Y
            (partly) outside X.
    """
    y = tuple(int(d) for d in y_shape)
    if len(y) > x_ndim:
        raise InferError(f"the operand placed by axis has rank {len(y)}, more than the other's {x_ndim}")
    if len(y) == x_ndim:
        if axis not in (-1, 0):
            raise InferError(f"axis must be -1 or 0 when both operands have rank {x_ndim}, got {axis}")
        return y
    if not -x_ndim <= axis < x_ndim:
        raise InferError(f"axis must be in [{-x_ndim}, {x_ndim}) for ranks {x_ndim} and {len(y)}, got {axis}")
    start = axis if axis >= 0 else x_ndim - len(y) + axis + 1
    if start < 0:
        raise InferError(f"axis {axis} puts the rank-{len(y)} operand before dim 0 of the rank-{x_ndim} one")
    if start + len(y) > x_ndim:
        while y and y[-1] == 1:
            y = y[:-1]
        if start + len(y) > x_ndim:
            raise InferError(f"a rank-{len(y)} operand placed at dim {start} runs past the last of "
                             f"{x_ndim} dims")
    return y + (1,) * (x_ndim - start - len(y))


def numpy_operand_shapes(x_shape: Sequence[int], y_shape: Sequence[int],
                         axis: int = -1) -> tuple[Shape, Shape]:
    """X's and Y's shapes reshaped for numpy broadcasting (only the lower-rank one changes).

    Raises:
        InferError: as ``paddle_axis_to_numpy``.
    """
    x, y = tuple(int(d) for d in x_shape), tuple(int(d) for d in y_shape)
    if x == y:
        return x, y
    if len(y) <= len(x):
        return x, paddle_axis_to_numpy(y, len(x), axis)
    return paddle_axis_to_numpy(x, len(y), axis), y


def broadcast_shape(x_shape: Sequence[int], y_shape: Sequence[int], axis: int = -1) -> Shape:
    """Out's shape for elementwise X, Y under Paddle's ``axis`` rule; -1 dims carried through.

    Raises:
        InferError: naming both shapes, the axis and the first dim that does not broadcast.
    """
    x, y = tuple(int(d) for d in x_shape), tuple(int(d) for d in y_shape)
    if x == y:
        return x
    try:
        xs, ys = numpy_operand_shapes(x, y, axis)
        rank = max(len(xs), len(ys))
        xs, ys = (1,) * (rank - len(xs)) + xs, (1,) * (rank - len(ys)) + ys
        return tuple(_broadcast_dim(i, a, b) for i, (a, b) in enumerate(zip(xs, ys)))
    except InferError as e:
        raise InferError(f"cannot broadcast X {list(x)} with Y {list(y)} (axis={axis}): {e}") from None


def _broadcast_dim(index: int, a: int, b: int) -> int:
    """Paddle's rule for one aligned dim: equal, or one side 1 or -1 (unknown); 0 only with 0 or 1."""
    if a == b:
        return a
    if not ((a <= 1 and a != 0) or (b <= 1 and b != 0)):
        raise InferError(f"dim {index} of the aligned shapes is {a} against {b}")
    if a > 1 or b > 1:
        return max(a, b)
    return 0 if 0 in (a, b) else -1


# -- shared inference pieces ----------------------------------------------------------------------
def _dtype_attr(ctx: InferContext, name: str, *, unset_ok: bool) -> DType | None:
    """The DType an INT attr holds as its wire value; None for -1 where ``unset_ok``."""
    value = ctx.attr(name)
    if value == -1 and unset_ok:
        return None
    try:
        return DType.from_any(value)
    except IRError:
        valid = ", ".join(f"{d.value} ({d.name})" for d in DType)
        return ctx.fail(f"attr {name!r} = {value} is not a dtype wire value; expected one of {valid}"
                        + (", or -1 for unset" if unset_ok else ""))


def _check_single_value(ctx: InferContext, slot: str) -> None:
    """A dispensable tensor standing for a scalar attr must hold one value (shape [] or [1])."""
    if ctx.has_input(slot):
        shape = ctx.input(slot).shape
        ctx.check(len(shape) <= 1 and all(d in (1, -1) for d in shape),
                  f"input {slot!r} must hold one value (shape [] or [1]), got shape {list(shape)}")


def _same_as_x_with_scalars(*scalar_slots: str, check: InferFn | None = None) -> InferFn:
    """Inference for X -> Out ops whose scalar attrs may come from single-value tensors instead."""

    def infer(ctx: InferContext) -> None:
        for slot in scalar_slots:
            _check_single_value(ctx, slot)
        if check is not None:
            check(ctx)
        x = ctx.input("X")
        ctx.set_output("Out", x.shape, x.dtype)

    return infer


# -- elementwise binary ops and comparisons ---------------------------------------------------------
def _infer_elementwise(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(x.dtype == y.dtype, f"X is {x.dtype.name} but Y is {y.dtype.name}; both operands need "
                                  f"one dtype (cast one of them)")
    try:
        shape = broadcast_shape(x.shape, y.shape, ctx.attr("axis") if ctx.schema.attr_spec("axis") else -1)
    except InferError as e:
        ctx.fail(str(e))
    ctx.set_output("Out", shape, DType.bool if ctx.schema.type in COMPARE else x.dtype)


# -- reductions -----------------------------------------------------------------------------------
_REDUCE_ATTRS = (
    AttrSpec("dim", AttrType.INTS, (0,)),
    AttrSpec("keep_dim", AttrType.BOOLEAN, False),
    AttrSpec("reduce_all", AttrType.BOOLEAN, False),
    AttrSpec("in_dtype", AttrType.INT, -1),
    AttrSpec("out_dtype", AttrType.INT, -1),
)


def _infer_reduce(ctx: InferContext) -> None:
    """Paddle's ReduceInferDim: negative dims count from the end; an empty ``dim``,
    ``reduce_all`` or dims covering X reduce everything (to shape [] without keep_dim). A
    ``DimTensor`` (a halfway extension: dims computed at run time, none repeated) replaces
    ``dim``; where its value is unknown, so are the output's dims."""
    x = ctx.input("X")
    rank = len(x.shape)
    dims = ctx.attr("dim")
    if ctx.has_input("DimTensor"):
        value = ctx.input_value("DimTensor")
        if value is None:
            count = ctx.input("DimTensor").shape
            ctx.check(len(count) == 1 and 0 < count[0] <= rank,
                      f"DimTensor must be a 1-D tensor of 1 to {rank} dims, got shape {list(count)}")
            ctx.set_output("Out", [-1] * (rank if ctx.attr("keep_dim") else rank - count[0]), _reduced_dtype(ctx, x))
            return
        dims = [int(d) for d in np.asarray(value).reshape(-1)]
    low, high = (-1, 1) if rank == 0 else (-rank, rank)
    bad = [d for d in dims if not low <= d < high]
    ctx.check(not bad, f"attr 'dim' = {list(dims)}: {bad} out of range [{low}, {high}) for X of rank {rank}")
    reduced = {d + rank if d < 0 else d for d in dims}
    if ctx.attr("reduce_all") or not dims:
        reduced = set(range(rank))
    keep = ctx.attr("keep_dim")
    shape = [1 if i in reduced else d for i, d in enumerate(x.shape) if keep or i not in reduced]
    ctx.set_output("Out", shape, _reduced_dtype(ctx, x))


def reduced_axes(rank: int, dims: Sequence[int], reduce_all: bool) -> tuple[int, ...]:
    """The sorted axes a reduce op's ``dim`` names (every axis for ``reduce_all`` or no dims)."""
    if reduce_all or not len(dims):
        return tuple(range(rank))
    return tuple(sorted({int(d) % rank for d in dims})) if rank else ()


def _reduced_dtype(ctx: InferContext, x: TensorInfo) -> DType:
    """out_dtype, else X's (a sum of bools or int32 widens to int64)."""
    _dtype_attr(ctx, "in_dtype", unset_ok=True)
    out_dtype = _dtype_attr(ctx, "out_dtype", unset_ok=True)
    if out_dtype is None:
        widen = ctx.op_type == "reduce_sum" and x.dtype in (DType.bool, DType.int32)
        out_dtype = DType.int64 if widen else x.dtype
    return out_dtype


# -- the rest -------------------------------------------------------------------------------------
def _check_clip_bounds(ctx: InferContext) -> None:
    if not ctx.has_input("Min") and not ctx.has_input("Max"):
        low, high = ctx.attr("min"), ctx.attr("max")
        ctx.check(low <= high, f"attr 'min' ({low}) must not exceed attr 'max' ({high})")


def _infer_sum(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    ctx.check(bool(xs), "input slot 'X' needs at least one var")
    shape = list(xs[0].shape)
    for i, x in enumerate(xs[1:], start=1):
        ctx.check(x.dtype == xs[0].dtype, f"X[{i}] is {x.dtype.name} but X[0] is {xs[0].dtype.name}")
        ctx.check(len(x.shape) == len(shape) and all(a == b or -1 in (a, b) for a, b in zip(x.shape, shape)),
                  f"X[{i}] has shape {list(x.shape)}, X[0] {list(xs[0].shape)}; all inputs need one shape")
        shape = [b if a == -1 else a for a, b in zip(shape, x.shape)]
    ctx.set_output("Out", shape, xs[0].dtype)


def _infer_cast(ctx: InferContext) -> None:
    x = ctx.input("X")
    in_dtype = _dtype_attr(ctx, "in_dtype", unset_ok=False)
    out_dtype = _dtype_attr(ctx, "out_dtype", unset_ok=False)
    assert in_dtype is not None and out_dtype is not None  # unset_ok=False: never None
    ctx.check(in_dtype == x.dtype, f"attr 'in_dtype' is {int(in_dtype)} ({in_dtype.name}) but X is "
                                   f"{x.dtype.name}; set in_dtype to {int(x.dtype)}")
    ctx.set_output("Out", x.shape, out_dtype)


def _infer_mean(ctx: InferContext) -> None:
    ctx.set_output("Out", (), ctx.input("X").dtype)


_SCHEMAS = [
    OpSchema("clip", inputs=[Slot("X"), Slot("Min", dispensable=True), Slot("Max", dispensable=True)],
             outputs=[Slot("Out")],
             attrs=[AttrSpec("min", AttrType.FLOAT), AttrSpec("max", AttrType.FLOAT)],
             infer=_same_as_x_with_scalars("Min", "Max", check=_check_clip_bounds),
             keep_dtype_slots=("Min", "Max"), inplace={"X": "Out"},
             doc="Out = min(max(X, min), max); tensors Min/Max, where given, replace the attrs"),
    OpSchema("scale", inputs=[Slot("X"), Slot("ScaleTensor", dispensable=True), Slot("BiasTensor", dispensable=True)],
             outputs=[Slot("Out")],
             attrs=[AttrSpec("scale", AttrType.FLOAT, 1.0), AttrSpec("bias", AttrType.FLOAT, 0.0),
                    AttrSpec("bias_after_scale", AttrType.BOOLEAN, True)],
             infer=_same_as_x_with_scalars("ScaleTensor", "BiasTensor"),
             keep_dtype_slots=("ScaleTensor", "BiasTensor"), inplace={"X": "Out"},
             doc="Out = scale * X + bias (bias_after_scale) or scale * (X + bias); ScaleTensor and "
                 "BiasTensor replace scale and bias"),
    OpSchema("pow", inputs=[Slot("X"), Slot("FactorTensor", dispensable=True)], outputs=[Slot("Out")],
             attrs=[AttrSpec("factor", AttrType.FLOAT, 1.0)],
             infer=_same_as_x_with_scalars("FactorTensor"), keep_dtype_slots=("FactorTensor",),
             inplace={"X": "Out"}, doc="Out = X ** factor; FactorTensor replaces factor"),
    OpSchema("sum", inputs=[Slot("X", duplicable=True)], outputs=[Slot("Out")], infer=_infer_sum,
             doc="Out = the elementwise sum of the X tensors (one shape and dtype)"),
    OpSchema("cast", inputs=[Slot("X")], outputs=[Slot("Out")],
             attrs=[AttrSpec("in_dtype", AttrType.INT), AttrSpec("out_dtype", AttrType.INT)],
             infer=_infer_cast,
             doc="Out = X converted to out_dtype; the kernel dtype is X's, which in_dtype must name"),
    OpSchema("mean", inputs=[Slot("X")], outputs=[Slot("Out")], infer=_infer_mean,
             doc="Out = the mean of all of X, a 0-d tensor"),
]


def _elementwise_schema(row: Elementwise) -> OpSchema:
    """X (, Y) -> Out: binary rows broadcast Y into X (from dim ``axis`` where the row has it)."""
    attrs = [AttrSpec("axis", AttrType.INT, -1)] if row.axis else []
    inputs = [Slot("X"), Slot("Y")][:row.arity]
    same_dtype = row.out_dtype is None
    infer = _infer_elementwise if row.arity == 2 else same_as("X") if same_dtype else _infer_logical_not
    broadcast = ", Y broadcast into X" + (" from dim axis" if row.axis else "")
    doc = f"Out = {row.doc}" + (broadcast if row.arity == 2 else "")
    return OpSchema(row.name, inputs=inputs, outputs=[Slot("Out")], attrs=[*attrs, *row.attrs], infer=infer,
                    dtype_slots=tuple(s.name for s in inputs), inplace={"X": "Out"} if same_dtype else {}, doc=doc)


def _infer_logical_not(ctx: InferContext) -> None:
    ctx.set_output("Out", ctx.input("X").shape, DType.bool)


def _register() -> None:
    for row in [*BINARY.values(), *UNARY.values(), *COMPARE.values()]:
        register_op(_elementwise_schema(row))
    for op_type, reduction in REDUCE.items():
        register_op(OpSchema(op_type, inputs=[Slot("X"), Slot("DimTensor", dispensable=True)], outputs=[Slot("Out")],
                             attrs=_REDUCE_ATTRS, infer=_infer_reduce, keep_dtype_slots=("DimTensor",),
                             doc=f"Out = {reduction.doc} of X over dims dim (or DimTensor's, computed at run time)"))
    for schema in _SCHEMAS:
        register_op(schema)


_register()
