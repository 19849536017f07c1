"""fuse_gqa: grouped-query attention reads its key and value heads where they lie, not repeated.

    k ─ unsqueeze2(2) ─ expand_v2 [B, Hkv, n, S, D] ─ reshape2 [B, Hkv * n, S, D] ─┐
    v ─ unsqueeze2(2) ─ expand_v2 ─ reshape2 ─────────────────────────────────────┴─ sdpa
                                                          becomes     k, v ─ sdpa (query head h reads head h // n)

Transformers' ``repeat_kv`` repeats each key/value head n times, consecutively, to match the
query heads; ``scaled_dot_product_attention`` takes K and V of fewer heads as they are and reads
head h // n for query head h, the same values. The rule (one, rooted at the attention) declines,
saying why, unless for K and V alike:

1. the unsqueeze2 adds axis 2 of a [B, Hkv, S, D] value, the expand_v2 widens only that axis
   (to n, the same for K and V) and the reshape2 joins it with the heads: [B, Hkv * n, S, D];
   ``probe_dims`` proves the dims equal, symbolic batch and sequence included. Where the
   reshape's batch and sequence are its own symbols (a shape computed past what the probes
   follow), [?, Hkv * n, ?, D] is enough when Q's batch is the value's: the attention holds K's
   batch to Q's, and the elements left make the sequence S;
2. the attention is head-major (``q_num_heads`` 0).
"""

from __future__ import annotations

from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import Dim, DimTable, probe_dims
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op

__all__ = ["RULES", "fuse_gqa"]


def _repeats(table: DimTable, lift: Operator, widen: Operator, join: Operator, what: str, batch: Dim | None) -> int:
    """Case 1 for K or V: n, the times each head repeats (``batch``: Q's)."""
    if list(lift.attr("axes")) != [2]:
        raise Decline(f"the {what} repeat adds axis {list(lift.attr('axes'))}, not 2")
    source, lifted, wide, joined = (table.dims_of(n) for n in (lift.input("X")[0], lift.output("Out")[0],
                                                               widen.output("Out")[0], join.output("Out")[0]))
    if source is None or lifted is None or wide is None or joined is None or len(source) != 4:
        raise Decline(f"the dims of the {what} repeat are not known")
    heads, repeats = source[1], wide[2]
    if not isinstance(heads, int) or not isinstance(repeats, int) or lifted != (*source[:2], 1, *source[2:]):
        raise Decline(f"the {what} repeat of {list(source)} is no [batch, heads, sequence, size] with an axis 2 "
                      f"of known heads and repeats")
    if wide != (*source[:2], repeats, *source[2:]) or not _joins(source, joined, heads * repeats, batch):
        raise Decline(f"the {what} repeat widens {list(lifted)} to {list(wide)} and joins it to {list(joined)}: "
                      f"not only its axis 2, or not into the heads")
    return repeats


def _joins(source: tuple[Dim, ...], joined: tuple[Dim, ...], heads: int, batch: Dim | None) -> bool:
    """Whether ``joined`` is [B, heads, S, D] of the [B, Hkv, S, D] ``source`` (case 1)."""
    if joined == (source[0], heads, *source[2:]):
        return True
    return len(joined) == 4 and joined[1] == heads and joined[3] == source[3] and batch == source[0]


def _read_in_place(ctx: RewriteContext, *, sdpa: Operator, k_lift: Operator, k_widen: Operator, k_join: Operator,
                   v_lift: Operator, v_widen: Operator, v_join: Operator, k: str, v: str) -> Operator:
    if sdpa.attr("q_num_heads"):
        raise Decline("the attention is sequence-major: its heads are not repeated this way")
    q_dims = ctx.state.dims_of(sdpa.input("Q")[0])
    batch = q_dims[0] if q_dims else None
    k_times = _repeats(ctx.state, k_lift, k_widen, k_join, "key", batch)
    v_times = _repeats(ctx.state, v_lift, v_widen, v_join, "value", batch)
    if k_times != v_times:
        raise Decline(f"the keys repeat {k_times} times, the values {v_times}")
    return copy_op(sdpa, inputs={"K": [k], "V": [v]})


RULES = Rules([
    # sdpa(Q, repeat_kv(k), repeat_kv(v)) -> sdpa(Q, k, v)
    Rule(pattern("sdpa:scaled_dot_product_attention(Q=_, K=k_join:reshape2(X=k_widen:expand_v2(X=k_lift:unsqueeze2("
                 "X=k), ...), ...), V=v_join:reshape2(X=v_widen:expand_v2(X=v_lift:unsqueeze2(X=v), ...), ...), ...)"),
         _read_in_place, "repeated key/value heads -> grouped-query attention"),
])


@register_pass("fuse_gqa", needs_scope=True)
def fuse_gqa(program: Program, scope: Scope | None, options: None = None) -> PassResult:
    """Grouped-query attention reading its key/value heads without transformers' repeat_kv."""
    table = probe_dims(program.global_block(), scope)
    fired = apply_rules(program, RULES, name="fuse_gqa", scope=scope, state=table).counts
    return PassResult(program, modified=fired.total() > 0, stats={"attentions": fired.total()})
