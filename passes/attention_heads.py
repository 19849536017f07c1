"""fuse_attention_heads: the head split and merge around an attention -> its sequence-major form.

    x_q ─ reshape2 [B, S, H, D] ─ transpose2 (0, 2, 1, 3) ─┐
    x_k ─ reshape2 ─ transpose2 ───────────────────────────┼─ sdpa ─ transpose2 (0, 2, 1, 3) ─ reshape2 [B, S, H * D] ─ y
    x_v ─ reshape2 ─ transpose2 ───────────────────────────┘
                                              becomes    x_q, x_k, x_v ─ sdpa(q_num_heads=H, kv_num_heads=Hkv) ─ y

The projections [B, S, H * D] feed the attention as they are and its output is the merged
[B, S, H * D] (``q_num_heads`` / ``kv_num_heads``: ONNX's 3-D Attention), so the eight layout ops
go. One in-place rule, rooted at the merge's reshape2, rewrites all four or nothing, and says why
it declines:

1. the merge is not ``transpose2`` (0, 2, 1, 3) then a reshape2 keeping [B, S] and joining the
   rest, or the attention is sequence-major already (PyTorch's zeroing of NaN outputs,
   ``where(isnan(out), z, out)``, may stand between the attention and the merge: it stays, on
   the merged layout, with z one element);
2. Q, K or V is not the ``transpose2`` (0, 2, 1, 3) of a reshape2 splitting [B, S, H * D] into
   [B, S, H, D] with a known head count H (``reshape2`` with a constant ``shape``);
3. a split or merge value (an XShape included) has other readers, is fed, fetched or used by
   another block, or a split's source is written again before the attention.

K and V split into one head count: the attention's schema has them share their heads.

First (a phase of its own), a rotary_embedding between a head split and the attention moves
before the split, sequence-major (``num_heads``): it rotates each head alike in either layout, and
the split is then the attention's own again::

    x ─ reshape2 ─ transpose2 ─ rotary_embedding ─ sdpa     becomes     x ─ rotary_embedding(num_heads=H) ─ reshape2 ─ transpose2 ─ sdpa

A reshape's ``shape`` keeps a dim when it holds 0 or that dim; a -1 there is the dim as well when
the other entries are those dims and the joined dims multiply to the known size.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .pattern import pattern
from .rewire import Guard, remove_unused_vars, sole_writer, spare, written_between
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules

__all__ = ["ROTARY_RULES", "RULES", "fuse_attention_heads"]

_HEADS_SWAP = [0, 2, 1, 3]


def _keeps_lead(shape: Sequence[int], source: Sequence[int], joined: int) -> bool:
    """Whether a reshape2 of ``source`` to ``shape`` keeps its first two dims, given the other
    dims of ``shape`` multiply to ``joined`` (-1 unknown) and those of ``source`` to the rest."""
    rest = 1
    for dim in source[2:]:
        rest = rest * dim if rest >= 0 and dim >= 0 else -1
    kept = [s == 0 or (s == d >= 0) for s, d in zip(shape[:2], source[:2])]
    if all(kept):
        return True
    return sum(kept) == 1 and -1 in shape[:2] and joined == rest >= 0


def _split_heads(ctx: RewriteContext, guard: Guard, sdpa: Operator, slot: str) -> tuple[str, int, list[Operator]]:
    """Case 2 and 3 for one of Q, K, V (or the X of a rotary_embedding ``sdpa``): its [B, S, H * D]
    source, H, and the two split ops."""
    block = ctx.block
    name = sdpa.input(slot)[0]
    perm = sole_writer(block, name)
    if perm is None or perm.type != "transpose2" or list(perm.attr("axis")) != _HEADS_SWAP:
        raise Decline(f"{slot} {name} is not written by one transpose2 {tuple(_HEADS_SWAP)}")
    split = sole_writer(block, perm.input("X")[0])
    if split is None or split.type != "reshape2" or split.input("Shape") or split.input("ShapeTensor"):
        raise Decline(f"{slot}'s transpose2 does not read a reshape2 of a constant shape")
    source, shape = split.input("X")[0], [int(s) for s in split.attr("shape")]
    dims = block.var(source).shape or ()
    if len(shape) == 4 and shape[2] == -1 and shape[3] > 0 and len(dims) == 3 and dims[2] % shape[3] == 0:
        shape[2] = dims[2] // shape[3]  # [0, 0, -1, D] of a known hidden size (dims[2] < 0 stays unknown)
    if len(dims) != 3 or len(shape) != 4 or shape[2] <= 0:
        raise Decline(f"{slot}'s reshape2 of {source} {list(dims)} to {shape} is no head split into a known "
                      f"head count")
    if shape[3] == 0 or not _keeps_lead(shape, dims, shape[2] * shape[3] if shape[3] > 0 else -1):
        raise Decline(f"{slot}'s reshape2 of {source} {list(dims)} to {shape} does not keep [batch, sequence]")
    spare(block, guard, perm, sdpa)
    spare(block, guard, split, perm)
    if written_between(block, source, split, sdpa):
        raise Decline(f"{source} is written again between {slot}'s head split and the attention")
    return source, shape[2], [split, perm]


def _check_merge(block: Block, guard: Guard, sdpa: Operator, perm: Operator, merge: Operator) -> None:
    """Case 1 (and 3) for the output."""
    if sdpa.attr("q_num_heads"):
        raise Decline("the attention is sequence-major already")
    if list(perm.attr("axis")) != _HEADS_SWAP:
        raise Decline(f"the attention's output is transposed by {list(perm.attr('axis'))}, not {_HEADS_SWAP}")
    shape, dims = [int(s) for s in merge.attr("shape")], block.var(perm.output("Out")[0]).shape or ()
    if len(shape) != 3 or len(dims) != 4 or not _keeps_lead(shape, dims, shape[2]):
        raise Decline(f"the reshape2 of the output {list(dims)} to {shape} is no head merge")
    out = merge.output("Out")[0]
    if sole_writer(block, out) is not merge:
        raise Decline(f"{out} has other writers than the head merge")
    spare(block, guard, perm, merge)
    if any(guard.kept(n) or block.uses(n) for n in merge.output("XShape")):
        raise Decline(f"the XShape of the head merge {out} is read, fed or fetched")


def _absorb_heads(ctx: RewriteContext, *, merge: Operator, perm: Operator, sdpa: Operator,
                  nan: Operator | None = None, zero: Operator | None = None, z: str | None = None) -> bool:
    """The rule (module docstring); ``zero`` is PyTorch's where(isnan(out), z, out) between the
    attention and the merge, elementwise, so it runs on the merged layout as well."""
    block, guard = ctx.block, ctx.state
    _check_merge(block, guard, sdpa, perm, merge)
    if z is not None and (len(block.var(z).shape or ()) > 3 or any(d != 1 for d in block.var(z).shape or ())):
        raise Decline(f"the value {z} that replaces NaN outputs is not one element")
    (q, q_heads, q_ops), (k, k_heads, k_ops), (v, _, v_ops) = (
        _split_heads(ctx, guard, sdpa, slot) for slot in ("Q", "K", "V"))
    last, out = zero or sdpa, merge.output("Out")[0]
    spent = [last.output("Out")[0], *perm.output_names(), *merge.output("XShape")]
    for op in (merge, perm, *q_ops, *k_ops, *v_ops):
        spent += [n for n in op.output_names() if n not in spent and n != out]
        block.remove_op(op)
    for slot, source in (("Q", q), ("K", k), ("V", v)):
        sdpa.set_input(slot, [source])
    if nan is not None:
        for name in (sdpa.output("Out")[0], nan.output("Out")[0]):
            block.var(name).set_shape(block.var(out).shape or ())
    last.set_output("Out", [out])
    sdpa.set_attr("q_num_heads", q_heads)
    sdpa.set_attr("kv_num_heads", k_heads)
    remove_unused_vars(block, spent, guard)
    return True


def _rotate_first(ctx: RewriteContext, *, rotary: Operator) -> bool:
    """rotary(transpose2(reshape2(x))) -> transpose2(reshape2(rotary(x, num_heads=H))) (the
    module docstring's first phase)."""
    block, guard = ctx.block, ctx.state
    if rotary.attr("num_heads"):
        raise Decline("the rotary embedding is sequence-major already")
    source, heads, (split, perm) = _split_heads(ctx, guard, rotary, "X")
    rotated, out = ctx.new_var(f"{source}.rotated", like=source), rotary.output("Out")[0]
    spent = perm.output("Out")[0]
    block.remove_op(split)
    block.remove_op(perm)
    rotary.set_input("X", [source])
    rotary.set_output("Out", [rotated])
    rotary.set_attr("num_heads", heads)
    split.set_input("X", [rotated])
    perm.set_output("Out", [out])
    block.insert_ops(rotary.index + 1, [split, perm])
    remove_unused_vars(block, [spent], guard)
    return True


ROTARY_RULES = Rules([
    # rotary_embedding(transpose2(reshape2(x))) -> transpose2(reshape2(rotary_embedding(x, num_heads=H)))
    Rule(pattern("rotary:rotary_embedding(X=_, Cos=_, Sin=_, ...)"), _rotate_first,
         "rotary of a head split -> head split of a sequence-major rotary", in_place=True),
])

RULES = Rules([
    # reshape2(transpose2(sdpa(transpose2(reshape2(x_q)), ...))) -> sdpa(x_q, x_k, x_v) sequence-major
    Rule(pattern("merge:reshape2(X=perm:transpose2(X=sdpa:scaled_dot_product_attention(Q=_, K=_, V=_, ...)))"),
         _absorb_heads, "attention head split + merge -> sequence-major attention", in_place=True),
    # the same with where(isnan(out), z, out) before the merge (PyTorch's sdpa exports)
    Rule(pattern("merge:reshape2(X=perm:transpose2(X=zero:where(Condition=nan:isnan(X=sdpa:scaled_dot_product_attention("
                 "Q=_, K=_, V=_, ...)), X=z, Y=sdpa)))"),
         _absorb_heads, "attention head split + zeroed NaN + merge -> sequence-major attention", in_place=True),
])


@register_pass("fuse_attention_heads")
def fuse_attention_heads(program: Program, scope: Scope | None = None, options: None = None) -> PassResult:
    """Sequence-major attention where the head split and merge around it allow (module docstring)."""
    guard = Guard.of(program, (), "fuse_attention_heads")
    fired = apply_rules(program, ROTARY_RULES, name="fuse_attention_heads (rotary)", state=guard).counts
    fired += apply_rules(program, RULES, name="fuse_attention_heads", state=guard).counts
    return PassResult(program, modified=fired.total() > 0,
                      stats={rule.name: fired[rule.name] for rule in ROTARY_RULES + RULES})
