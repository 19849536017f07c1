"""fuse_cached_rotary: a decoder's rotary embeddings of the query and key into the cached
attention that reads them.

    q ─ rotary_embedding(cos, sin, ids) ─┐
    k ─ rotary_embedding(cos, sin, ids) ─┴─ cached_attention      becomes     q, k ─ cached_attention(cos, sin, ids)

cached_attention takes the tables and rotates Q and K itself (its schema), so a decode step
launches one kernel where it launched three: each launch costs the host microseconds, and a
decode step of a small batch is bound by them. The rule declines, saying why, unless both
rotations read the same tables (and position ids) with the same attributes, in the attention's
layout (sequence-major rotations of its head counts, or head-major ones of a head-major
attention), and the attention rotates nothing yet.
"""

from __future__ import annotations

from ..ir.operator import Operator
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES"]

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


RULES = Rules([
    # cached_attention(rotary(q), rotary(k)) -> cached_attention(q, k) rotating them
    Rule(pattern("attention:cached_attention(Q=q_turn:rotary_embedding(X=q, ...), "
                 "K=k_turn:rotary_embedding(X=k, ...), ...)"),
         _into_attention, "query and key rotations -> cached_attention"),
])

register_rules("fuse_cached_rotary", RULES, "a decoder's query and key rotary embeddings into its cached attention")
