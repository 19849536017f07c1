"""Exporters of scaled_dot_product_attention and rotary_embedding (RotaryEmbedding, opset 23).
Attention: ONNX's Attention from opset 23, else its decomposition softmax(Q K^T * scale + mask) V (a bool mask through Where with -inf), or, with
``contrib``, ONNX Runtime's MultiHeadAttention on Q, K and V brought to [B, S, H * D].
Sequence-major attention (q_num_heads set: [B, S, H * D]) is Attention's 3-D form and
MultiHeadAttention's own layout; the decomposition splits its heads first and merges them after.
``zero_nan`` is a Where(IsNaN) after any of these.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.dtypes import DType
from ...ir.operator import Operator
from .context import CONTRIB_DOMAIN, ExportContext, onnx_type
from .registry import exports

__all__: list[str] = []


def _extras(op: Operator) -> list[str]:
    """What only ONNX's Attention (opset 23 on) expresses."""
    return ([slot for slot in ("KeyLengths",) if op.input(slot)] + [slot for slot in ("Scores",) if op.output(slot)]
            + [attr for attr in ("softcap", "causal_offset") if op.attr(attr)])


def _heads(ctx: ExportContext, op: Operator, slot: str) -> tuple[int, int]:
    """(heads, head size) of Q, K or V in either layout; -1 where unknown."""
    shape = ctx.shape(op.input(slot)[0])
    heads = op.attr("q_num_heads" if slot == "Q" else "kv_num_heads")
    if not heads:
        return shape[1], shape[3]
    return heads, shape[2] // heads if shape[2] >= 0 else -1


def _scale(ctx: ExportContext, op: Operator, q: str) -> float:
    scale = float(op.attr("scale"))
    if scale:
        return scale
    depth = _heads(ctx, op, "Q")[1]
    if depth < 0:
        ctx.fail(f"scale 0 (1 / sqrt(head size)) needs a known head size, Q {q!r} has shape {list(ctx.shape(q))}")
    return 1.0 / math.sqrt(depth)


def _decomposed(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None, out: str) -> None:
    if op.attr("is_causal"):
        ctx.fail("causal attention needs opset 23 (ONNX's Attention)")
    (heads_q, _), (heads_kv, _) = _heads(ctx, op, "Q"), _heads(ctx, op, "K")
    if min(heads_q, heads_kv) >= 0 and heads_q != heads_kv:
        ctx.fail(f"grouped-query attention ({heads_q} query heads, {heads_kv} key heads) needs opset 23")
    scale, merged = _scale(ctx, op, q), out
    if op.attr("q_num_heads"):
        q, k, v = (_heads_first(ctx, name, heads_q) for name in (q, k, v))
        out = ctx.temp(f"{merged}.heads")
    keys = ctx.node("Transpose", [k], perm=[0, 1, 3, 2])
    scores = ctx.node("Mul", [ctx.node("MatMul", [q, keys]), ctx.scalar(scale, op.input("Q")[0])])
    if mask is not None and ctx.dtype(op.input("Mask")[0]) is DType.bool:
        scores = ctx.node("Where", [mask, scores, ctx.scalar(-np.inf, op.input("Q")[0])])
    elif mask is not None:
        scores = ctx.node("Add", [scores, mask])
    ctx.node("MatMul", [ctx.node("Softmax", [scores], axis=-1), v], [out])
    if out != merged:
        _heads_last(ctx, out, merged)


def _heads_first(ctx: ExportContext, name: str, heads: int) -> str:
    """[B, S, H * D] -> [B, H, S, D]."""
    split = ctx.node("Reshape", [name, ctx.ints([0, 0, heads, -1])])
    return ctx.node("Transpose", [split], perm=[0, 2, 1, 3])


def _heads_last(ctx: ExportContext, name: str, out: str | None = None) -> str:
    """[B, H, S, D] -> [B, S, H * D] (into ``out`` when given)."""
    moved = ctx.node("Transpose", [name], perm=[0, 2, 1, 3])
    return ctx.node("Reshape", [moved, ctx.ints([0, 0, -1])], [out] if out else None)


def _multi_head(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None, out: str) -> None:
    """ONNX Runtime's MultiHeadAttention: Q, K and V as [B, S, H * D], a float mask as its
    attention_bias, the output brought back to [B, H, S, D] (sequence-major attention: no change
    of layout)."""
    (heads, _), (_, depth) = _heads(ctx, op, "Q"), _heads(ctx, op, "V")
    sequence_major = bool(op.attr("q_num_heads"))
    if not sequence_major:
        q, k, v = _heads_last(ctx, q), _heads_last(ctx, k), _heads_last(ctx, v)
    inputs = [q, k, v, "", "", mask or ""]
    while inputs[-1] == "":
        inputs.pop()
    merged = ctx.node("MultiHeadAttention", inputs, [out] if sequence_major else None, domain=CONTRIB_DOMAIN,
                      num_heads=heads, scale=_scale(ctx, op, op.input("Q")[0]))
    if sequence_major:
        return
    split = ctx.node("Reshape", [merged, ctx.ints([0, 0, heads, depth])])
    ctx.node("Transpose", [split], [out], perm=[0, 2, 1, 3])


def _contrib_fits(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None) -> bool:
    """MultiHeadAttention on ONNX Runtime's CPU: float32, as many key as query heads, known heads
    and head size, no causal mask, a float mask of 4 dims."""
    (heads, _), (kv_heads, _), (_, depth) = (_heads(ctx, op, slot) for slot in ("Q", "K", "V"))
    return (ctx.dtype(q) is DType.float32 and heads > 0 and depth > 0 and kv_heads == heads
            and not op.attr("is_causal") and (mask is None or ctx.dtype(op.input("Mask")[0]) is DType.float32
                                              and ctx.rank(op.input("Mask")[0]) == 4))


def _causal_from(ctx: ExportContext, q: str, k: str, offset: int, mask: str | None, axis: int) -> str:
    """A bool mask keeping key j for query i where j <= i + offset, merged with ``mask``; the
    sequence lengths are dim ``axis`` of Q and K."""
    sizes = [ctx.node("Slice", [ctx.node("Shape", [name]), ctx.ints([axis]), ctx.ints([axis + 1])]) for name in (q, k)]
    ones = ctx.node("Expand", [ctx.const(1, np.int64, "one"), ctx.node("Concat", sizes, axis=0)])
    causal = ctx.node("Cast", [ctx.node("Trilu", [ones, ctx.const(offset, np.int64, "offset")], upper=0)],
                      to=onnx_type(DType.bool))
    if mask is None:
        return causal
    if ctx.dtype(mask) is DType.bool:
        return ctx.node("And", [causal, mask])
    return ctx.node("Where", [causal, mask, ctx.const(-np.inf, ctx.dtype(q).numpy, "masked")])


def _onnx_attention(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None, out: str) -> None:
    """ONNX's Attention (opset 23; KeyLengths as nonpad_kv_seqlen from 24): a causal mask shifted by
    ``causal_offset`` is written out as a mask, the scores (``Scores``) as its qk_matmul_output."""
    causal, offset = bool(op.attr("is_causal")), op.attr("causal_offset")
    if causal and offset:
        mask, causal = _causal_from(ctx, q, k, offset, mask, 1 if op.attr("q_num_heads") else 2), False
    inputs = [q, k, v, mask or ""]
    if op.input("KeyLengths"):
        if ctx.opset < 24:
            ctx.fail(f"KeyLengths (nonpad_kv_seqlen) needs opset 24 (asked for {ctx.opset})")
        inputs += ["", "", op.input("KeyLengths")[0]]
    while inputs[-1] == "":
        inputs.pop()
    scores = op.output("Scores")
    outputs = [out, "", "", scores[0]] if scores else [out]
    ctx.node("Attention", inputs, outputs, scale=_scale(ctx, op, q), is_causal=int(causal),
             q_num_heads=op.attr("q_num_heads") or None, kv_num_heads=op.attr("kv_num_heads") or None,
             softcap=float(op.attr("softcap")) or None, qk_matmul_output_mode=op.attr("scores_stage") if scores else None)


@exports("scaled_dot_product_attention")
def attention(ctx: ExportContext, op: Operator) -> None:
    """The attention in the form the opset and ``contrib`` allow; with ``zero_nan``, that form's
    output through Where(IsNaN(out), 0, out)."""
    out = op.output("Out")[0]
    if not op.attr("zero_nan"):
        _attention(ctx, op, out)
        return
    raw = ctx.temp(f"{out}.nan")
    _attention(ctx, op, raw)
    ctx.node("Where", [ctx.node("IsNaN", [raw]), ctx.scalar(0.0, out), raw], [out])


def _attention(ctx: ExportContext, op: Operator, out: str) -> None:
    q, k, v = op.input("Q")[0], op.input("K")[0], op.input("V")[0]
    mask = op.input("Mask")[0] if op.input("Mask") else None
    if mask is not None and ctx.dtype(mask).is_floating:
        mask = ctx.cast(mask, ctx.dtype(q))
    extras = _extras(op)
    if ctx.contrib and not extras and _contrib_fits(ctx, op, q, k, v, mask):
        _multi_head(ctx, op, q, k, v, mask, out)
    elif ctx.opset >= 23:
        _onnx_attention(ctx, op, q, k, v, mask, out)
    elif extras:
        ctx.fail(f"{', '.join(extras)} of attention need opset 23 (ONNX's Attention), asked for {ctx.opset}")
    else:
        _decomposed(ctx, op, q, k, v, mask, out)


@exports("rotary_embedding")
def rotary_embedding(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 23:
        ctx.fail(f"RotaryEmbedding needs opset 23 (asked for {ctx.opset})")
    inputs = [op.input("X")[0], op.input("Cos")[0], op.input("Sin")[0]] + list(op.input("PositionIds"))
    ctx.node("RotaryEmbedding", inputs, [op.output("Out")[0]], interleaved=int(op.attr("interleaved")),
             rotary_embedding_dim=op.attr("rotary_dim") or None, num_heads=op.attr("num_heads") or None)
