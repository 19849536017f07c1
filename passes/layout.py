"""simplify_layout: chains of layout ops (unsqueeze2, transpose2, reshape2) that exporters write
one step at a time -> one op, or none.

Rules (in-place edits of block 0, applied until nothing matches):

1. ``unsqueeze2(unsqueeze2(x, a), b)`` -> ``unsqueeze2(x, a + b)`` (Paddle inserts the axes one
   at a time, each counted in the rank reached so far, so the lists concatenate), also where
   the inner one has other readers (it goes with its last);
2. ``transpose2(transpose2(x, p), q)`` -> ``transpose2(x, p[q])``, or removed when that is the
   identity;
3. ``reshape2(transpose2(reshape2(x)))`` that merges x's leading dims, permutes the others and
   splits the merged dim back (dynamo's ``k.transpose(-2, -1)`` of a [B*H, S, D] view) ->
   ``transpose2(x)``: ``probe_dims`` proves the merged and split dims are x's own;
4. ``transpose2(binary(transpose2(a, p), transpose2(b, p)), q)`` with ``p[q]`` the identity ->
   ``binary(a, b)`` (an elementwise op of two inputs of one rank commutes with the permutation;
   ConvNeXt's residual add between its channels-last blocks);
5. ``binary(x, expand_v2(c))`` (either side) whose output has x's dims, where c broadcasts to
   them -> ``binary(x, c)``: the op broadcasts c itself (T5's ``full_like`` before a minimum).

The inner ops left without readers are removed here (rules 1 to 3) or by ``dce`` (rule 4's
transposes, which may have other readers).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.ops.families import BINARY
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import DimTable, probe_dims
from .pattern import pattern
from .rewire import Guard, bypass, remove_unused_vars, sole_writer, spare, written_between
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules

__all__ = ["RULES", "simplify_layout"]


class _State:
    """What the rules share: the names to keep, and the dims ``probe_dims`` finds, probed when a
    rule first asks (the rules keep every var's value, so the dims hold for the whole pass)."""

    def __init__(self, guard: Guard, block: Block, scope: Scope | None) -> None:
        self.guard, self.block, self.scope = guard, block, scope

    @functools.cached_property
    def dims(self) -> DimTable:
        return probe_dims(self.block, self.scope)


def _in_block_0(ctx: RewriteContext) -> None:
    if ctx.block.idx != 0:
        raise Decline("the layout rules rewrite block 0 only (the dims are block 0's)")


def _retarget(block: Block, op: Operator, source: str) -> None:
    """``op`` reads ``source`` as X now: its XShape (if any) records ``source``'s shape."""
    op.set_input("X", [source])
    for xshape in op.output("XShape"):
        block.var(xshape).set_shape([0, *(block.var(source).shape or ())])


def _drop(block: Block, guard: Guard, *ops: Operator) -> None:
    spent = [n for op in ops for n in op.output_names()]
    for op in ops:
        block.remove_op(op)
    remove_unused_vars(block, spent, guard)


def _merge_unsqueezes(ctx: RewriteContext, *, outer: Operator, v: str) -> bool:
    """Rule 1: the outer unsqueeze2 reads the inner one's input; the inner one goes when that
    was its last reader."""
    _in_block_0(ctx)
    block, guard = ctx.block, ctx.state.guard
    inner = sole_writer(block, v)
    if inner is None or inner.type != "unsqueeze2" or inner.input("AxesTensor") or inner.input("AxesTensorList"):
        raise Decline(f"{v} is not written by one unsqueeze2 of constant axes")
    x = inner.input("X")[0]
    if written_between(block, x, inner, outer) or written_between(block, v, inner, outer):
        raise Decline(f"{x} or {v} is written between the two unsqueeze2 ops")
    outer.set_attr("axes", [*inner.attr("axes"), *outer.attr("axes")])
    _retarget(block, outer, x)
    if not any(guard.kept(n) or block.uses(n) for n in inner.output_names()):
        _drop(block, guard, inner)
    return True


def _merge_transposes(ctx: RewriteContext, *, outer: Operator, inner: Operator, x: str) -> bool:
    """Rule 2."""
    _in_block_0(ctx)
    block, guard = ctx.block, ctx.state.guard
    spare(block, guard, inner, outer)
    if written_between(block, x, inner, outer):
        raise Decline(f"{x} is written between the two transpose2 ops")
    perm = _composed(inner.attr("axis"), outer.attr("axis"))
    if perm == list(range(len(perm))):
        return bypass(outer, x, outer.output("Out")[0], guard)
    outer.set_attr("axis", perm)
    _retarget(block, outer, x)
    _drop(block, guard, inner)
    return True


def _composed(first: Sequence[int], then: Sequence[int]) -> list[int]:
    """The permutation of ``transpose(transpose(x, first), then)``."""
    return [int(first[i]) for i in then]


def _lift_transpose(ctx: RewriteContext, *, split: Operator, perm: Operator, merge: Operator, x: str) -> bool:
    """Rule 3."""
    _in_block_0(ctx)
    block, state = ctx.block, ctx.state
    spare(block, state.guard, merge, perm)
    spare(block, state.guard, perm, split)
    p = [int(a) for a in perm.attr("axis")]
    dims = [state.dims.dims_of(n) for n in (x, merge.output("Out")[0], split.output("Out")[0])]
    if any(d is None for d in dims) or not p or p[0] != 0:
        raise Decline("the dims are unknown, or the transpose2 moves the merged dim")
    x_dims, merged, out = dims
    lead = len(x_dims) - len(merged) + 1
    if lead < 2 or merged[1:] != x_dims[lead:] or len(out) != len(x_dims) or out[:lead] != x_dims[:lead]:
        raise Decline(f"the first reshape2 does not merge leading dims of {x} that the second splits back")
    if out[lead:] != tuple(merged[i] for i in p[1:]):
        raise Decline("the second reshape2 does not keep the transposed dims")
    if written_between(block, x, merge, split):
        raise Decline(f"{x} is written between the reshapes")
    perm.set_attr("axis", [*range(lead), *(lead - 1 + i for i in p[1:])])
    _retarget(block, perm, x)
    out_name, old = split.output("Out")[0], perm.output("Out")[0]
    _drop(block, state.guard, split, merge)
    perm.set_output("Out", [out_name])
    remove_unused_vars(block, [old], state.guard)
    return True


def _sink_transposes(ctx: RewriteContext, *, outer: Operator, binary: Operator, a: str, b: str) -> bool:
    """Rule 4."""
    _in_block_0(ctx)
    block, guard = ctx.block, ctx.state.guard
    spare(block, guard, binary, outer)
    writers = [sole_writer(block, n) for n in (a, b)]
    if any(w is None or w.type != "transpose2" for w in writers):
        raise Decline(f"{a} and {b} are not both written by one transpose2")
    first, second = writers
    assert first is not None and second is not None
    p = list(first.attr("axis"))
    if list(second.attr("axis")) != p or _composed(p, outer.attr("axis")) != list(range(len(p))):
        raise Decline("the inputs' permutations differ, or the outer transpose2 does not undo them")
    sources = [first.input("X")[0], second.input("X")[0]]
    if binary.attr("axis") != -1 or len({len(block.var(n).shape or ()) for n in sources}) != 1:
        raise Decline("the binary op broadcasts by axis, or its inputs differ in rank")
    if any(written_between(block, s, w, binary) for s, w in zip(sources, (first, second))):
        raise Decline("an input of a transpose2 is written before the binary op reads it")
    out, spent = outer.output("Out")[0], binary.output("Out")[0]
    binary.set_input("X", [sources[0]])
    binary.set_input("Y", [sources[1]])
    _drop(block, guard, outer)
    binary.set_output("Out", [out])
    remove_unused_vars(block, [spent], guard)
    return True


def _skip_expand(ctx: RewriteContext, *, binary: Operator, expand: Operator, x: str, c: str) -> bool:
    """Rule 5."""
    _in_block_0(ctx)
    block, state = ctx.block, ctx.state
    spare(block, state.guard, expand, binary)
    x_dims, c_dims, out_dims = (state.dims.dims_of(n) for n in (x, c, binary.output("Out")[0]))
    if x_dims is None or c_dims is None or out_dims != x_dims or binary.attr("axis") != -1:
        raise Decline("the dims are unknown, the output is wider than x, or the op broadcasts by axis")
    if len(c_dims) > len(x_dims) or any(d not in (1, e) for d, e in zip(c_dims[::-1], x_dims[::-1])):
        raise Decline(f"{c} does not broadcast to {x}'s dims")
    binary.rename_input(expand.output("Out")[0], c)
    _drop(block, state.guard, expand)
    return True


_BINARIES = "|".join(BINARY)

RULES = Rules([
    # unsqueeze2(unsqueeze2(x)) -> unsqueeze2(x)
    Rule(pattern("outer:unsqueeze2(X=v)"), _merge_unsqueezes,
         "unsqueeze2 + unsqueeze2 -> unsqueeze2", in_place=True),
    # transpose2(transpose2(x)) -> transpose2(x) or x
    Rule(pattern("outer:transpose2(X=inner:transpose2(X=x))"), _merge_transposes,
         "transpose2 + transpose2 -> transpose2", in_place=True),
    # reshape2(transpose2(reshape2(x))) -> transpose2(x)
    Rule(pattern("split:reshape2(X=perm:transpose2(X=merge:reshape2(X=x, ...)), ...)"), _lift_transpose,
         "reshape2 + transpose2 + reshape2 -> transpose2", in_place=True),
    # transpose2(binary(transpose2(a), transpose2(b))) -> binary(a, b)
    Rule(pattern(f"outer:transpose2(X=binary:{_BINARIES}(X=a, Y=b))"), _sink_transposes,
         "transpose2 of a binary op of transposes -> binary op", in_place=True),
    # binary(x, expand_v2(c)) -> binary(x, c)
    Rule(pattern(f"binary:{_BINARIES}(X=x, Y=expand:expand_v2(X=c, ...))"), _skip_expand,
         "binary op of an expand_v2 -> binary op", in_place=True),
    # binary(expand_v2(c), x) -> binary(c, x)
    Rule(pattern(f"binary:{_BINARIES}(X=expand:expand_v2(X=c, ...), Y=x)"), _skip_expand,
         "binary op of an expand_v2 (first) -> binary op", in_place=True),
])


@register_pass("simplify_layout", needs_scope=True)
def simplify_layout(program: Program, scope: Scope | None, options: None = None) -> PassResult:
    """Chains of unsqueeze2, transpose2 and reshape2 -> one op or none (module docstring)."""
    block = program.global_block()
    state = _State(Guard.of(program, (), "simplify_layout"), block, scope)
    before = len(block.ops)
    fired = apply_rules(program, RULES, name="simplify_layout", scope=scope, state=state).counts
    return PassResult(program, modified=fired.total() > 0,
                      stats={"ops_removed": before - len(block.ops), **{rule.name: fired[rule.name] for rule in RULES}})
