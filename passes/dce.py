"""``dce``: remove the ops and vars of block 0 that computing the fetch targets does not need.

One reverse sweep over block 0 with a live set that starts as the fetch targets (the fetch ops'
sources, plus ``fetch_names``; a program without fetch ops must give ``fetch_names``) and the
names ops of other blocks read. An op is kept when it writes a live var or must run anyway;
then what it writes stops being live, unless it also reads it, and what it reads becomes live.

Ops that run anyway: feed and fetch ops, ops with sub-blocks (the sub-blocks are left as they
are), ops of ``SIDE_EFFECT_OPS``, and ops writing a persistable var they do not read (an
in-place update such as batch_norm's ``MeanOut`` = ``Mean`` is no side effect).

Then the vars of block 0 that no op of any block reads or writes are removed, except fed vars
(feed targets and ``layers.data`` vars), fetch targets, and vars holding no tensor (the feed and
fetch lists). Unused parameters go too; ``drop_params=True`` also removes their values from the
scope it is given (the caller's, so it is off by default; ``Scope.remove`` drops the scope's own
entries only, so under the PassManager, whose passes write to a layer over the caller's scope,
the caller's values stay).
"""

from __future__ import annotations

import attrs

from ..ir.block import Block
from ..ir.errors import PassError
from ..ir.operator import Operator
from ..ir.program import Program, sub_block_ops
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .rewire import Guard

__all__ = ["DCEOptions", "SIDE_EFFECT_OPS", "dce", "has_side_effects"]

SIDE_EFFECT_OPS = frozenset({"feed", "fetch", "print", "assert", "save", "save_combine", "load", "load_combine"})
"""Op types that are kept whether or not anything reads what they write."""


@attrs.frozen
class DCEOptions:
    """``fetch_names``: fetch targets besides the fetch ops' (required without fetch ops).
    ``drop_params``: also remove the values of removed parameters from the scope."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    drop_params: bool = False


@register_pass("dce", options=DCEOptions)
def dce(program: Program, scope: Scope | None, options: DCEOptions) -> PassResult:
    """Remove ops and vars that no fetch target depends on."""
    guard = Guard.of(program, options.fetch_names, "dce")
    if not guard.fetched:
        raise PassError("pass 'dce': the program has no fetch ops, so nothing would be live; name its "
                        "outputs: get_pass('dce', fetch_names=[...])")
    if options.drop_params and scope is None:
        raise PassError("pass 'dce': drop_params=True needs the Scope")
    block = program.global_block()
    dead = _dead_ops(block, set(guard.fetched) | guard.elsewhere)
    for op in dead:
        block.remove_op(op)
    removed = _remove_unreferenced_vars(program, guard)
    params = [name for name, persistable in removed if persistable]
    if options.drop_params and scope is not None:
        for name in params:
            scope.remove(name)
    stats = {"ops_removed": len(dead), "vars_removed": len(removed), "params_removed": len(params)}
    return PassResult(program, modified=bool(dead or removed), stats=stats)


def has_side_effects(op: Operator) -> bool:
    """Whether ``op`` must run even if nothing reads its outputs (see the module docstring)."""
    if op.type in SIDE_EFFECT_OPS or op.sub_blocks():
        return True
    block = op.block
    if block is None:
        return False
    reads = set(op.input_names())
    return any(block.find_var(n).persistable and n not in reads for n in op.output_names())


def _dead_ops(block: Block, live: set[str]) -> list[Operator]:
    """The ops of ``block`` that neither write a live var nor have side effects, in reverse order."""
    dead = []
    for op in reversed(block.ops):
        writes = set(op.output_names())
        if not (writes & live or has_side_effects(op)):
            dead.append(op)
            continue
        reads = set(op.input_names()).union(*(inner.input_names() for inner in sub_block_ops(op)))
        live -= writes
        live |= reads
    return dead


def _remove_unreferenced_vars(program: Program, guard: Guard) -> list[tuple[str, bool]]:
    """Remove the tensor vars of block 0 no op references and ``guard`` does not keep; returns
    (name, persistable) of each."""
    block = program.global_block()
    referenced = {n for op in program.all_ops() for n in op.input_names() + op.output_names()}
    removed = []
    for var in block.vars.values():
        if var.kind.has_tensor and var.name not in referenced and not guard.kept(var.name):
            block.remove_var(var.name)
            removed.append((var.name, var.persistable))
    return removed
