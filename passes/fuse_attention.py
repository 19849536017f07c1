"""fuse_attention: the attention chain exporters write -> one scaled_dot_product_attention.

    q ─────────────────────┐                      q ──────────────┐
    k ─ transpose2(k^T) ─ matmul_v2 ─ mul(scale) ─ add(mask) ─ softmax ─ matmul_v2(v) ─ out
                                                       becomes    k ─ [transpose2] ─ sdpa(Q, K, V, Mask) ─ out
                                                                  v ──────────────┘

The chain, from its root (the product of the probabilities with V) upwards:

1. ``matmul_v2(softmax(scores), V)`` with softmax over the last axis, V [B, H, S, Dv];
2. up to two additive masks ``elementwise_add(scores, mask)`` (T5 adds its position bias, then
   the padding mask): one mask is the op's Mask, two are summed first (one add on the mask, not
   on the scores); a mask must broadcast to the scores without widening them;
3. an optional scalar ``elementwise_mul`` or ``elementwise_div`` of the scores by a constant;
4. ``matmul_v2(Q, K^T)`` (no trans_x), where Q and K^T may each be scaled by a scalar constant
   first (PyTorch's sdpa decomposition scales both by sqrt(scale)); K^T is a transpose2 whose
   permutation, with its last two axes swapped, gives K's head-major layout (one transpose2
   stays where that is not the identity: BERT's (0, 2, 3, 1) of [B, S, H, D] becomes the
   (0, 2, 1, 3) the other heads have), or any var, which one transpose2 swaps back (none when
   the product has trans_y).

Every constant scale folds into the op's ``scale`` (the product of the multipliers over the
divisor). Symbolic dims are fine: nothing relies on a batch or sequence size. What declines says
why: a constant that is no scalar, a mask that widens the scores, a softmax over another axis.
The exports of PyTorch's sdpa zero the NaN probabilities of fully masked rows
(``where(isnan(p), 0, p) @ V``); a first rule moves that zeroing after the product (a softmax
row is NaN throughout or nowhere, so the values are the same), which leaves the chain above.
Then (a second phase) the zeroing of the attention's NaN outputs, ``where(isnan(out), 0, out)``
with the zero one element, becomes the op's ``zero_nan``: two passes over the output fewer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..ir.operator import Operator
from ..ir.ops.math import broadcast_shape
from ..ir.schema import InferError
from .pattern import OpPattern, Pattern, VarPattern, op, pattern, var
from .rewrite import Decline, RewriteContext, Rule, Rules, copy_op, register_rules

__all__ = ["RULES", "ZERO_NAN_RULES"]

_SCALE = "elementwise_mul|elementwise_div"


def _scaled(node: OpPattern | VarPattern, prefix: str) -> list[OpPattern | VarPattern]:
    """``node`` multiplied by a captured constant (``{prefix}_mul``, ``{prefix}_c``), and ``node``."""
    return [op("elementwise_mul", f"{prefix}_mul", X=node, Y=var(f"{prefix}_c", persistable=True)), node]


def _patterns() -> list[Pattern]:
    """Every shape of the chain (module docstring), most specific first."""
    keys: list[OpPattern | VarPattern] = [op("transpose2", "kt_op", X=var("k")), var("kt")]
    found = []
    for q_side, k_side in itertools.product(_scaled(var("q"), "q"), [s for k in keys for s in _scaled(k, "k")]):
        scores = op("matmul_v2", "qk", X=q_side, Y=k_side)
        for scaled in (op(_SCALE, "scale", X=scores, Y=var("s_c", persistable=True)), scores):
            one = op("elementwise_add", "add1", X=scaled, Y=var("mask1"))
            two = op("elementwise_add", "add2", X=one, Y=var("mask2"))
            for masked in (two, one, scaled):
                probs = op("softmax", "sm", X=masked)
                found.append(Pattern(op("matmul_v2", "pv", X=probs, Y=var("v"))))
    return found


def _scalar(ctx: RewriteContext, name: str | None) -> float:
    if name is None:
        return 1.0
    value = ctx.value(name)
    if value is None or value.size != 1:
        raise Decline(f"the scale {name} is not a scalar constant in the scope")
    return float(np.asarray(value).reshape(()))


def _scale(ctx: RewriteContext, q_c: str | None, k_c: str | None, scale: Operator | None, s_c: str | None) -> float:
    factor = _scalar(ctx, q_c) * _scalar(ctx, k_c)
    s = _scalar(ctx, s_c)
    factor = factor / s if scale is not None and scale.type == "elementwise_div" else factor * s
    if factor == 0 or not np.isfinite(factor):
        raise Decline(f"the scale of the scores folds to {factor}")
    return factor


def _check_mask(ctx: RewriteContext, add: Operator, mask: str, scores: Sequence[int]) -> None:
    shape, dtype = ctx.var(mask).shape or (), ctx.var(mask).dtype
    if add.attr("axis") != -1 or dtype is None or not dtype.is_floating or len(shape) > 4:
        raise Decline(f"the mask {mask} ({getattr(dtype, 'name', dtype)} {list(shape)}, axis {add.attr('axis')}) is not a float "
                      f"of rank <= 4 added along the last axes")
    for m, s in zip(shape[::-1], scores[::-1]):
        if m != 1 and m != s and (s == 1 or (m >= 0 and s >= 0)):
            raise Decline(f"the mask {mask} {list(shape)} widens the scores {list(scores)}")


def _key(ctx: RewriteContext, qk: Operator, kt_op: Operator | None, k: str | None,
         kt: str | None) -> tuple[str, list[Operator]]:
    """K in [B, H, S, D] and the transpose2 (if any) that makes it."""
    if kt_op is not None:
        assert k is not None
        perm = list(kt_op.attr("axis"))
        if len(perm) != 4 or qk.attr("trans_y"):
            raise Decline(f"the keys' transpose {perm} is not 4-D or the product transposes it again")
        source, perm = k, perm[:2] + [perm[3], perm[2]]
    else:
        assert kt is not None
        if qk.attr("trans_y"):
            return kt, []
        source, perm = kt, [0, 1, 3, 2]
    if perm == [0, 1, 2, 3]:
        return source, []
    shape = ctx.var(source).shape or ()
    out = ctx.new_var("attention.keys", like=source, shape=[shape[p] for p in perm] if len(shape) == 4 else None)
    return out, [Operator("transpose2", {"X": source}, {"Out": out}, {"axis": perm})]


def _attention(ctx: RewriteContext, *, pv: Operator, sm: Operator, qk: Operator, q: str, v: str,
               kt_op: Operator | None = None, k: str | None = None, kt: str | None = None,
               q_mul: Operator | None = None, q_c: str | None = None, k_mul: Operator | None = None,
               k_c: str | None = None, scale: Operator | None = None, s_c: str | None = None,
               add1: Operator | None = None, mask1: str | None = None, add2: Operator | None = None,
               mask2: str | None = None) -> list[Operator] | Decline:
    if sm.attr("axis") not in (-1, 3):
        return ctx.decline(f"the softmax is over axis {sm.attr('axis')}, not the keys")
    if qk.attr("trans_x") or pv.attr("trans_x") or pv.attr("trans_y"):
        return ctx.decline("a product transposes its queries or probabilities")
    scores = ctx.var(qk.output("Out")[0]).shape or ()
    if any(len(ctx.var(n).shape or ()) != 4 for n in (q, v)) or len(scores) != 4:
        return ctx.decline("Q, V or the scores are not 4-D [batch, heads, sequence, size]")
    factor = _scale(ctx, q_c, k_c, scale, s_c)
    for add, mask in ((add1, mask1), (add2, mask2)):
        if add is not None and mask is not None:
            _check_mask(ctx, add, mask, scores)
    key, ops = _key(ctx, qk, kt_op, k, kt)
    inputs = {"Q": q, "K": key, "V": v}
    if mask1 is not None and mask2 is not None:
        try:
            summed_shape = broadcast_shape(ctx.var(mask1).shape or (), ctx.var(mask2).shape or ())
        except InferError as e:
            return ctx.decline(f"the masks do not broadcast together: {e}")
        summed = ctx.new_var("attention.mask", like=mask1, shape=summed_shape)
        ops.append(Operator("elementwise_add", {"X": mask1, "Y": mask2}, {"Out": summed}, {"axis": -1}))
        inputs["Mask"] = summed
    elif mask1 is not None:
        inputs["Mask"] = mask1
    ops.append(Operator("scaled_dot_product_attention", inputs, {"Out": pv.output("Out")},
                        {"scale": factor, "is_causal": False}))
    return ops


def _zero_nan_after(ctx: RewriteContext, *, pv: Operator, nan: Operator, p: str, z: str,
                    v: str) -> list[Operator] | Decline:
    """where(isnan(P), 0, P) @ V -> where(isnan(P @ V), 0, P @ V) for P a softmax, whose rows are
    NaN throughout or nowhere: the same values, and P is read once, by the product."""
    zero = ctx.value(z)
    if zero is None or zero.size != 1 or float(zero.reshape(())) != 0.0:
        return ctx.decline(f"{z} is not a zero scalar constant")
    writers = ctx.block.producers(p)
    if len(writers) != 1 or writers[0][0].type != "softmax":
        return ctx.decline(f"{p} is not a softmax's output")
    out = pv.output("Out")[0]
    raw = ctx.new_var("attention.out", like=out)
    flags = ctx.new_var("attention.nan", like=out, dtype=ctx.var(nan.output("Out")[0]).dtype)
    return [copy_op(pv, inputs={"X": p}, outputs={"Out": raw}),
            Operator("isnan", {"X": raw}, {"Out": flags}),
            Operator("where", {"Condition": flags, "X": z, "Y": raw}, {"Out": out})]


def _zero_nan(ctx: RewriteContext, *, zero: Operator, nan: Operator, sdpa: Operator, z: str) -> Operator | Decline:
    """where(isnan(sdpa(...)), 0, sdpa(...)) -> sdpa(..., zero_nan)."""
    value = ctx.value(z)
    if value is None or value.size != 1 or float(value.reshape(())) != 0.0:
        return ctx.decline(f"{z} is not a zero scalar constant")
    if sdpa.output("Scores"):
        return ctx.decline("the attention writes its Scores, which keep their NaNs")
    return copy_op(sdpa, outputs={"Out": zero.output("Out")}, attrs={"zero_nan": True})


RULES = Rules([
    # matmul_v2(where(isnan(p), 0, p), V) -> where(isnan(matmul_v2(p, V)), 0, matmul_v2(p, V))
    Rule(pattern("pv:matmul_v2(X=where(Condition=nan:isnan(X=p), X=z:param, Y=p), Y=v)"), _zero_nan_after,
         "zeroed NaN probabilities @ V -> zeroed NaN outputs"),
] + [
    # matmul_v2(softmax(mask + scale * matmul_v2(Q, K^T)), V) -> scaled_dot_product_attention
    Rule(p, _attention, "attention -> scaled_dot_product_attention") for p in _patterns()
])

ZERO_NAN_RULES = Rules([
    # where(isnan(sdpa), 0, sdpa) -> sdpa(zero_nan)
    Rule(pattern("zero:where(Condition=nan:isnan(X=sdpa:scaled_dot_product_attention(Q=_, K=_, V=_, ...)), X=z, "
                 "Y=sdpa)"), _zero_nan, "attention + zeroed NaN outputs -> attention(zero_nan)"),
])

register_rules("fuse_attention", [RULES, ZERO_NAN_RULES], "Fuse the attention chain (Q K^T, scale, masks, softmax, "
               "times V) into one scaled_dot_product_attention, with the zeroing of its NaN outputs.", needs_scope=True)
