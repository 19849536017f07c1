"""simplify_shapes: shape arithmetic left for run time becomes attrs where ``probe_dims`` proves
which run-time dims are equal, and the ops that only computed it die.

Exporters write ``x.view(x.size()[:-1] + (heads, head_dim))`` as

    x ─ shape ─ cast ─ slice ─┐
                 [12, 64] ────┴─ concat ─ reshape2(x, Shape=·)

halfway imports it as written (the batch and sequence dims are symbolic), and the executor
computes the shape arithmetic on the host when it prepares the program for given feed shapes.
This pass knows the dims of every var as known sizes and symbols (``halfway.passes.dims``: the
``shape`` may be of another var whose dims equal x's), and rewrites, in one sweep:

0. the readers of a small integer value that equals, at every size, one computed before read
   that one (exports take the shape of each feed; two feeds of one batch and sequence have one);

1. a ``reshape2`` or ``expand_v2`` whose output has its input's dims -> removed (its readers read
   the input);
2. ``reshape2(x, [-1, K]) -> fc | matmul_v2 (2-D weight) -> reshape2(·, x's leading dims + [N])``
   (a Linear layer over the last dim of an N-D x, as TorchScript and dynamo export it) -> one
   fc with ``in_num_col_dims = rank(x) - 1`` (or matmul_v2) of x itself;
3. a ``reshape2`` whose ``Shape`` tensor gives dims that are known sizes or its input's dim at
   the same position, with at most one other -> ``reshape2`` with the ``shape`` attr (0 copies
   the input dim, -1 is the rest).

The shape arithmetic left without readers is removed by ``dce``. A literal 0 in a target shape
stays a tensor (ONNX's 0 may be a real 0, allowzero).
"""

from __future__ import annotations

from collections import Counter

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.ops.families import UNARY
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import Dim, DimTable, probe_dims
from .rewire import Guard, bypass, remove_unused_vars, sole_writer, written_between
from .rewrite import Decline

__all__ = ["simplify_shapes"]

_ROW_BINARY = frozenset({"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div"})


@register_pass("simplify_shapes", needs_scope=True)
def simplify_shapes(program: Program, scope: Scope | None, options: None = None) -> PassResult:
    """Reshapes and expands to run-time shapes -> removed, folded into a Linear, or attr reshapes."""
    block = program.global_block()
    table = probe_dims(block, scope)
    guard = Guard.of(program, (), "simplify_shapes")
    stats: Counter[str] = Counter({"values_reused": _reuse_values(block, table, guard)})
    for op in block.ops:
        if op.block is not block or op.type not in ("reshape2", "expand_v2"):
            continue
        if _drop_identity(op, table, guard):
            stats["identities_removed"] += 1
        elif op.type == "reshape2" and _fold_linear(block, op, table, guard):
            stats["linear_reshapes_folded"] += 1
        elif op.type == "reshape2" and _attr_reshape(op, table):
            stats["reshapes_simplified"] += 1
    return PassResult(program, modified=sum(stats.values()) > 0,
                      stats={k: stats[k] for k in ("values_reused", "identities_removed", "linear_reshapes_folded",
                                                   "reshapes_simplified")})


def _reuse_values(block: Block, table: DimTable, guard: Guard) -> int:
    """Case 0: the readers of a small integer value equal at every size to one computed before
    (the shape of another feed with the same dims) read that one; returns how many vars."""
    seen: dict[tuple[object, ...], str] = {}
    reused = 0
    for op in block.ops:
        for name in op.output_names():
            entries = table.vector(name)
            if entries is None or None in entries or guard.kept(name) or sole_writer(block, name) is not op:
                continue
            first = seen.setdefault((entries, block.var(name).dtype, table.dims_of(name)), name)
            if first != name and block.uses(name):
                for reader in {id(r): r for r, _, _ in block.uses(name)}.values():
                    reader.rename_input(name, first)
                reused += 1
    return reused


def _drop_identity(op: Operator, table: DimTable, guard: Guard) -> bool:
    """Case 1: remove ``op`` when its output's dims are its input's."""
    x, out = op.input("X")[0], op.output("Out")[0]
    dims = table.dims_of(x)
    if dims is None or dims != table.dims_of(out):
        return False
    try:
        return bypass(op, x, out, guard)
    except Decline:
        return False


def _fold_linear(block: Block, op: Operator, table: DimTable, guard: Guard) -> bool:
    """Case 2: ``op`` is the outer reshape2 of a row-wise chain (a Linear layer, its bias, an
    activation) applied to a flattened x."""
    chain = _row_chain(block, op.input("X")[0], guard)
    if chain is None:
        return False
    flatten, rows = chain
    x, flat, out = flatten.input("X")[0], flatten.output("Out")[0], op.output("Out")[0]
    x_dims, flat_dims, row_dims, out_dims = (table.dims_of(n) for n in (x, flat, op.input("X")[0], out))
    if x_dims is None or flat_dims is None or row_dims is None or out_dims is None or len(x_dims) < 3:
        return False
    if flat_dims[1:] != x_dims[-1:] or out_dims != x_dims[:-1] + row_dims[1:]:
        return False
    if any(block.uses(n) for n in (*op.output("XShape"), *flatten.output("XShape"))) or written_between(
            block, x, flatten, rows[0]):
        return False
    lead = list(block.var(x).shape or ())[:-1]
    for row in rows:
        _widen(row, len(x_dims), lead)
    rows[0].rename_input(flat, x)
    spent = [*op.output_names(), *flatten.output_names(), *rows[-1].output("Out")]
    block.remove_op(op)
    block.remove_op(flatten)
    rows[-1].set_output("Out", [out])
    remove_unused_vars(block, spent, guard)
    return True


def _row_chain(block: Block, name: str, guard: Guard) -> tuple[Operator, list[Operator]] | None:
    """The flattening reshape2 and the row-wise ops (first to last) that compute ``name`` from it,
    each the only reader of the one before; None when ``name`` is not computed that way."""
    rows: list[Operator] = []
    while True:
        if guard.kept(name) or len(block.uses(name)) != 1:
            return None
        writer = sole_writer(block, name)
        if writer is None:
            return None
        if writer.type == "reshape2" and rows:
            return writer, rows[::-1]
        if not _row_wise(block, writer):
            return None
        rows.append(writer)
        name = writer.input("Input" if writer.type == "fc" else "X")[0]


def _row_wise(block: Block, op: Operator) -> bool:
    """An op of a 2-D input computing each row from that row alone: an fc over its rows, a
    matmul_v2 by a 2-D weight, an elementwise op with a 1-D parameter on the last dim, an
    activation."""
    if op.type in UNARY:
        return True
    if op.type == "fc":
        return bool(op.attr("in_num_col_dims") == 1)
    if op.type not in _ROW_BINARY and op.type != "matmul_v2" or len(block.var(op.input("X")[0]).shape or ()) != 2:
        return False
    y = block.var(op.input("Y")[0])
    if op.type == "matmul_v2":
        return not op.attr("trans_x") and not op.attr("trans_y") and bool(y.persistable) and len(y.shape or ()) == 2
    return bool(y.persistable) and len(y.shape or ()) == 1 and op.attr("axis") in (-1, 1)


def _widen(op: Operator, rank: int, lead: list[int]) -> None:
    """Make the row-wise ``op`` read the rank-``rank`` x instead of its rows."""
    if op.type == "fc":
        op.set_attr("in_num_col_dims", rank - 1)
    elif op.type in _ROW_BINARY:
        op.set_attr("axis", -1)
    block = op.block
    assert block is not None
    var = block.var(op.output("Out")[0])
    var.shape = (*lead, *(var.shape or ())[-1:])


def _attr_reshape(op: Operator, table: DimTable) -> bool:
    """Case 3: a reshape2 to a Shape tensor -> the ``shape`` attr, where that can say it."""
    if not op.input("Shape") or op.input("ShapeTensor"):
        return False
    target = _target(table.vector(op.input("Shape")[0]), table.dims_of(op.input("X")[0]))
    if target is None:
        return False
    op.set_input("Shape", [])
    op.set_attr("shape", target)
    return True


def _target(vector: tuple[Dim | None, ...] | None, x_dims: tuple[Dim, ...] | None) -> list[int] | None:
    """The reshape2 ``shape`` attr equal to the target ``vector`` for an input of ``x_dims``, or None."""
    if vector is None or x_dims is None:
        return None
    target: list[int] = []
    for position, dim in enumerate(vector):
        if isinstance(dim, int):
            if dim == 0:
                return None  # ONNX's 0 may mean a literal 0 (allowzero); Paddle's copies
            target.append(dim)
        elif dim is not None and position < len(x_dims) and x_dims[position] == dim:
            target.append(0)
        else:
            target.append(-1)
    return target if target.count(-1) <= 1 else None
