"""fuse_cached_attention: what a decoder computes between its fused projection and its cached
attention, into the attention (its schema: rotary tables, a packed Q).

    qkv ─ split ─ q ─ rotary_embedding(cos, sin, ids) ─┐
               ├─ k ─ rotary_embedding(cos, sin, ids) ─┤
               └─ v ───────────────────────────────────┴─ cached_attention
                                                    becomes     qkv ─ cached_attention(packed, cos, sin, ids)

A decode step of a small batch is bound by its launches (each costs the host microseconds): the
attention then reads the projection where it lies and launches one kernel where five ran. Two
phases, each rule declining with its reason:

1. the query's and key's rotations into the attention: both read the same tables (and position
   ids) with the same attributes, in the attention's layout (sequence-major rotations of its
   head counts, or head-major ones of a head-major attention), and the attention rotates nothing
   yet;
2. the split of the projection into Q, K and V: a sequence-major attention reading the three
   pieces, in order, of one split along the last axis into the query's, key's and value's widths
   (each piece read by the attention alone).
"""

from __future__ import annotations

from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .pattern import pattern
from .rewire import Guard, remove_unused_vars
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op

__all__ = ["ROTARY_RULES", "PACKED_RULES"]

_SHARED = ("Cos", "Sin", "PositionIds")


def _check_layout(ctx: RewriteContext, attention: Operator, rotary: Operator, heads_attr: str, what: str) -> None:
    sequence_major = len(ctx.var(rotary.input("X")[0]).shape or ()) == 3
    heads = attention.attr(heads_attr)
    if sequence_major != bool(heads) or (sequence_major and rotary.attr("num_heads") != heads):
        raise Decline(f"the {what} rotation's layout (num_heads {rotary.attr('num_heads')}) is not the attention's "
                      f"({heads_attr} {heads})")


def _into_attention(ctx: RewriteContext, *, attention: Operator, q_turn: Operator, k_turn: Operator, q: str,
                    k: str) -> Operator:
    if attention.input("Cos"):
        raise Decline("the attention rotates its query and key already")
    for slot in _SHARED:
        if q_turn.input(slot) != k_turn.input(slot):
            raise Decline(f"the query and key rotations read other {slot}: {list(q_turn.input(slot))} and "
                          f"{list(k_turn.input(slot))}")
    for name in ("interleaved", "rotary_dim"):
        if q_turn.attr(name) != k_turn.attr(name):
            raise Decline(f"the query and key rotations differ in {name}")
    _check_layout(ctx, attention, q_turn, "q_num_heads", "query")
    _check_layout(ctx, attention, k_turn, "kv_num_heads", "key")
    tables = {slot: q_turn.input(slot) or None for slot in _SHARED}
    return copy_op(attention, inputs={"Q": [q], "K": [k], **tables},
                   attrs={"interleaved": q_turn.attr("interleaved"), "rotary_dim": q_turn.attr("rotary_dim")})


ROTARY_RULES = Rules([
    # cached_attention(rotary(q), rotary(k)) -> cached_attention(q, k) rotating them
    Rule(pattern("attention:cached_attention(Q=q_turn:rotary_embedding(X=q, ...), "
                 "K=k_turn:rotary_embedding(X=k, ...), ...)"),
         _into_attention, "query and key rotations -> cached_attention"),
])


def _split_of(ctx: RewriteContext, attention: Operator) -> Operator:
    """The split whose three pieces are the attention's Q, K and V (phase 2), or Decline."""
    block = ctx.block
    pieces = [attention.input(slot)[0] if attention.input(slot) else "" for slot in ("Q", "K", "V")]
    makers = {op for name in pieces for op, _, _ in block.producers(name)} if all(pieces) else set()
    split = next(iter(makers)) if len(makers) == 1 else None
    if split is None or split.type != "split" or list(split.output("Out")) != pieces:
        raise Decline("Q, K and V are not the pieces, in order, of one split")
    return split


def _read_packed(ctx: RewriteContext, *, attention: Operator) -> bool:
    if not attention.attr("q_num_heads"):
        raise Decline("the attention is head-major")
    split = _split_of(ctx, attention)
    block, whole = ctx.block, split.input("X")[0]
    shape = ctx.var(whole).shape or ()
    depth, v_depth = (int((ctx.var(attention.input(slot)[0]).shape or (0,) * 4)[3]) for slot in ("KCache", "VCache"))
    heads, kv_heads = attention.attr("q_num_heads"), attention.attr("kv_num_heads")
    widths = [heads * depth, kv_heads * depth, kv_heads * v_depth]
    if split.input("AxisTensor") or split.input("SectionsTensorList") or split.attr("axis") not in (-1, len(shape) - 1):
        raise Decline("the split is not along the last axis, or its axis or sections are tensors")
    if [(ctx.var(n).shape or (0,))[-1] for n in split.output("Out")] != widths:
        raise Decline(f"the split's pieces are not the query's, key's and value's widths {widths}")
    if any(len(block.uses(n)) != 1 or ctx.state.kept(n) for n in split.output("Out")):
        raise Decline("a piece of the split is read elsewhere, or fetched")
    pieces = list(split.output("Out"))
    attention.set_input("Q", [whole])
    attention.set_input("K", [])
    attention.set_input("V", [])
    attention.set_attr("packed", True)
    block.remove_op(split)
    remove_unused_vars(block, pieces, ctx.state)
    return True


PACKED_RULES = Rules([
    # cached_attention(split(qkv)) -> cached_attention(qkv, packed)
    Rule(pattern("attention:cached_attention(Q=_, ...)", attrs={"attention": {"packed": False}}), _read_packed,
         "split projection -> packed cached_attention", in_place=True),
])


@register_pass("fuse_cached_attention")
def fuse_cached_attention(program: Program, scope: Scope | None = None, options: None = None) -> PassResult:
    """A decoder's rotations and its projection's split into its cached attention (module docstring)."""
    guard = Guard.of(program, (), "fuse_cached_attention")
    fired = apply_rules(program, ROTARY_RULES, name="fuse_cached_attention (rotary)", state=guard).counts
    fired += apply_rules(program, PACKED_RULES, name="fuse_cached_attention", state=guard).counts
    return PassResult(program, modified=fired.total() > 0,
                      stats={rule.name: fired[rule.name] for rule in ROTARY_RULES + PACKED_RULES})
