"""Applying float16 decisions: casts at dtype boundaries, float16 copies of parameters.

Every float var ``v`` has a *home* dtype (the dtype its own name holds afterwards) and is read in
at most one other dtype, through one *alternate* var shared by all the readers that want it::

    producer(float16) -> v.fp16 -> cast -> v (float32, fetched)      home differs from produced
    producer(float16) -> v ------> cast -> v.fp32 -> exp             a reader wants float32
    parameter w (float32) + w.fp16 (float16, in the scope)          parameters are converted

The home is what the producer makes, except for float32 feed and fetch targets when I/O types are
kept: they stay float32 under their own names, so users feed and fetch the names they know.
Alternates are named ``<var>.fp16`` / ``<var>.fp32`` (``_N`` appended if taken).

A new cast never reads the output of another cast: where ``v`` is written by a cast, the new one
casts that cast's input (or, if it already has the wanted dtype, readers take it directly), and a
cast left without readers is removed. Readers in ``keep_dtype_slots`` (batch_norm statistics,
shape and index tensors), flexible readers (``shape``) and ``fetch`` ops read the home var.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
from attrs import frozen

from ...ir.block import Block
from ...ir.dtypes import DType
from ...ir.operator import Operator
from ...ir.schema import get_schema
from ...ir.scope import Scope
from ...ir.variable import Variable
from .policy import IO_OPS, Plan, State
from .report import CastEntry, Float16Report, ParamEntry
from .values import Losses

__all__ = ["Edges", "VarPlan", "plan_vars", "rewrite"]

_SUFFIX = {DType.float16: "fp16", DType.float32: "fp32"}


@frozen
class Edges:
    """The program's inputs and outputs, and whether they keep their float32 types."""

    feeds: tuple[str, ...]
    fetches: tuple[str, ...]
    keep_io_types: bool


@frozen
class VarPlan:
    """How one float var ends up: ``home`` dtype, the dtype its writer makes, and the readers
    (op, slot, index) that read the other dtype through the alternate var."""

    name: str
    home: DType
    produced: DType
    readers: tuple[tuple[Operator, str, int], ...]

    @property
    def alternate(self) -> DType | None:
        if self.home is not self.produced:
            return self.produced
        return _other(self.home) if self.readers else None


def _other(dtype: DType) -> DType:
    return DType.float32 if dtype is DType.float16 else DType.float16


def plan_vars(block: Block, plan: Plan, edges: Edges) -> list[VarPlan]:
    """A VarPlan for every float var that changes dtype or gets an alternate (sources first,
    then in program order)."""
    found = []
    for name, state in plan.states.items():
        var = block.find_var(name)
        produced = _produced(name, var, state, edges)
        io = name in edges.feeds or name in edges.fetches
        home = DType.float32 if io and edges.keep_io_types and var.dtype is DType.float32 else produced
        readers = tuple(use for use in block.uses(name) if _wants(plan, use) not in (None, home))
        if home is not var.dtype or home is not produced or readers:
            found.append(VarPlan(name, home, produced, readers))
    return found


def _produced(name: str, var: Variable, state: State, edges: Edges) -> DType:
    if var.persistable:
        return var.tensor_dtype
    if name in edges.feeds and edges.keep_io_types and var.dtype is DType.float32:
        return DType.float32
    return state.dtype


def _wants(plan: Plan, use: tuple[Operator, str, int]) -> DType | None:
    """The dtype a reader needs in that slot; None if it reads the home var whatever it is."""
    op, slot, _ = use
    if op.type in IO_OPS:
        return None
    dtype = plan.dtype_of(op)
    if dtype is None or slot in get_schema(op.type).keep_dtype_slots:
        return None
    return dtype


def rewrite(block: Block, scope: Scope, var_plans: Sequence[VarPlan], params: Sequence[str],
            float16_copies: Mapping[str, tuple[np.ndarray, Losses]], report: Float16Report) -> None:
    """Apply ``var_plans`` to ``block`` (and new parameters to ``scope``), recording them in
    ``report``. ``float16_copies`` holds the float32 parameters' values converted to float16."""
    converted = []
    for vp in var_plans:
        var = block.var(vp.name)
        alternate = vp.alternate
        if alternate is None:
            var.dtype = vp.home
        elif vp.name in params:
            copy = float16_copies[vp.name] if alternate is DType.float16 else (
                scope.get(vp.name).astype(np.float32), Losses())
            _convert_parameter(block, scope, var, alternate, vp, copy, report)
            converted.append(vp.name)
        elif vp.home is not vp.produced:
            _split_output(block, var, vp, report)
        else:
            _add_reader_copy(block, var, alternate, vp, report)
    for name in converted:
        if not block.uses(name) and not block.producers(name):
            block.remove_var(name)
            report.params_removed.append(name)
    _retype_user_casts(block)


def _retype_user_casts(block: Block) -> None:
    """The program's own casts read their input as it now is (retyped, or a cast copy of it):
    ``in_dtype`` follows it. They keep their output dtype, but for a cast to its input's own
    dtype (which the decisions run float16 or float32): ``out_dtype`` follows its output var."""
    for op in block.ops:
        if op.type != "cast":
            continue
        source, target = block.find_var(op.input("X")[0]), block.find_var(op.output("Out")[0])
        if op.attr("in_dtype") == op.attr("out_dtype") and target.dtype in (DType.float16, DType.float32):
            op.set_attr("out_dtype", int(target.tensor_dtype))
        if source.kind.has_tensor and source.dtype is not None:
            op.set_attr("in_dtype", int(source.tensor_dtype))


def _alternate_name(block: Block, scope: Scope, name: str, dtype: DType, value: np.ndarray | None = None) -> str:
    """``<name>.fp16`` or the first ``<name>.fp16_N`` that neither the program nor the scope
    holds, or that the scope holds as exactly ``value`` (shared then, not copied again)."""
    base = f"{name}.{_SUFFIX[dtype]}"
    candidates = itertools.chain([base], (f"{base}_{n}" for n in itertools.count()))
    return next(c for c in candidates if not block.has_var(c)
                and (c not in scope or (value is not None and _holds(scope, c, value))))


def _declare_like(block: Block, var: Variable, name: str, dtype: DType, **flags: bool) -> Variable:
    return block.create_var(name, dtype=dtype, shape=var.shape or (), lod_level=var.lod_level, **flags)


def _point_readers(readers: Sequence[tuple[Operator, str, int]], old: str, new: str) -> None:
    for op, slot, index in readers:
        names = list(op.input(slot))
        if names[index] == old:
            names[index] = new
            op.set_input(slot, names)


def _cast(src: str, src_dtype: DType, dst: str, dst_dtype: DType) -> Operator:
    return Operator("cast", {"X": [src]}, {"Out": [dst]},
                    {"in_dtype": int(src_dtype), "out_dtype": int(dst_dtype)})


def _insert_after_writer(block: Block, name: str, op: Operator) -> None:
    writers = block.producers(name)
    block.insert_op(block.op_index(writers[-1][0]) + 1 if writers else 0, op)


def _convert_parameter(block: Block, scope: Scope, var: Variable, dtype: DType, vp: VarPlan,
                       copy: tuple[np.ndarray, Losses], report: Float16Report) -> None:
    converted, losses = copy
    name = _alternate_name(block, scope, vp.name, dtype, converted)
    if name not in scope:
        scope.set(name, converted)
    _declare_like(block, var, name, dtype, persistable=True, is_parameter=var.is_parameter)
    _point_readers(vp.readers, vp.name, name)
    report.params.append(ParamEntry(vp.name, name, int(converted.size), losses.to_zero, losses.to_subnormal))


def _holds(scope: Scope, name: str, value: np.ndarray) -> bool:
    """Whether the scope already holds exactly ``value`` under ``name`` (an earlier transpile
    of the same program on this scope made it): then it is shared, not copied again."""
    held = scope.find(name)
    if held is None or held.dtype != value.dtype or held.shape != value.shape:
        return False
    bits = np.dtype(f"u{value.itemsize}")  # bitwise: fast for float16, and NaNs compare equal
    return np.array_equal(np.ascontiguousarray(held).view(bits), value.view(bits))


def _split_output(block: Block, var: Variable, vp: VarPlan, report: Float16Report) -> None:
    """The writer makes ``produced`` into a new var; a cast writes the home var from it."""
    name = _alternate_name(block, Scope(), vp.name, vp.produced)
    _declare_like(block, var, name, vp.produced)
    writers = [op for op, _, _ in block.producers(vp.name)]
    for op in writers:
        op.rename_output(vp.name, name)
    _point_readers(vp.readers, vp.name, name)
    var.dtype = vp.home
    block.insert_op(block.op_index(writers[-1]) + 1, _cast(name, vp.produced, vp.name, vp.home))
    report.casts.append(CastEntry(vp.name, name, vp.produced.name, vp.home.name))


def _add_reader_copy(block: Block, var: Variable, dtype: DType, vp: VarPlan, report: Float16Report) -> None:
    """Readers wanting ``dtype`` read one cast of the var (or of the input of the cast writing it)."""
    var.dtype = vp.home
    src, src_dtype, upstream = vp.name, vp.home, _writing_cast(block, vp.name)
    if upstream is not None:
        src = upstream.input("X")[0]
        src_dtype = block.find_var(src).tensor_dtype
    if src_dtype is dtype:
        _point_readers(vp.readers, vp.name, src)
    else:
        name = _alternate_name(block, Scope(), vp.name, dtype)
        _declare_like(block, var, name, dtype)
        _point_readers(vp.readers, vp.name, name)
        _insert_after_writer(block, src, _cast(src, src_dtype, name, dtype))
        report.casts.append(CastEntry(src, name, src_dtype.name, dtype.name))
    if upstream is not None and not block.uses(vp.name):
        block.remove_op(upstream)
        block.remove_var(vp.name)


def _writing_cast(block: Block, name: str) -> Operator | None:
    writers = block.producers(name)
    if len(writers) == 1 and writers[0][0].type == "cast":
        return writers[0][0]
    return None
