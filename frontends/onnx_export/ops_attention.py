"""Exporters of scaled_dot_product_attention and rotary_embedding (RotaryEmbedding, opset 23).
Attention: ONNX's Attention from opset 23, else its decomposition softmax(Q K^T * scale + mask) V (a bool mask through Where with -inf), or, with
``contrib``, ONNX Runtime's MultiHeadAttention on Q, K and V brought to [B, S, H * D].
"""

from __future__ import annotations

import math

import numpy as np

from halfway.frontends.onnx_export.context import CONTRIB_DOMAIN, ExportContext, onnx_type
from halfway.frontends.onnx_export.registry import exports
from halfway.ir.dtypes import DType
from halfway.ir.operator import Operator

__all__: list[str] = []


def _extras(op: Operator) -> list[str]:
    """What only ONNX's Attention (opset 23 on) expresses."""
    return ([slot for slot in ("KeyLengths",) if op.input(slot)] + [slot for slot in ("Scores",) if op.output(slot)]
            + [attr for attr in ("softcap", "causal_offset") if op.attr(attr)])


def _scale(ctx: ExportContext, op: Operator, q: str) -> float:
    scale = float(op.attr("scale"))
    if scale:
        return scale
    depth = ctx.shape(q)[3]
    if depth < 0:
        ctx.fail(f"scale 0 (1 / sqrt(head size)) needs a known head size, Q {q!r} has shape {list(ctx.shape(q))}")
    return 1.0 / math.sqrt(depth)


def _decomposed(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None, out: str) -> None:
    if op.attr("is_causal"):
        ctx.fail("causal attention needs opset 23 (ONNX's Attention)")
    heads_q, heads_kv = ctx.shape(q)[1], ctx.shape(k)[1]
    if min(heads_q, heads_kv) >= 0 and heads_q != heads_kv:
        ctx.fail(f"grouped-query attention ({heads_q} query heads, {heads_kv} key heads) needs opset 23")
    keys = ctx.node("Transpose", [k], perm=[0, 1, 3, 2])
    scores = ctx.node("Mul", [ctx.node("MatMul", [q, keys]), ctx.scalar(_scale(ctx, op, q), q)])
    if mask is not None and ctx.dtype(op.input("Mask")[0]) is DType.bool:
        scores = ctx.node("Where", [mask, scores, ctx.scalar(-np.inf, q)])
    elif mask is not None:
        scores = ctx.node("Add", [scores, mask])
    ctx.node("MatMul", [ctx.node("Softmax", [scores], axis=-1), v], [out])


def _heads_last(ctx: ExportContext, name: str) -> str:
    """[B, H, S, D] -> [B, S, H * D]."""
    moved = ctx.node("Transpose", [name], perm=[0, 2, 1, 3])
    return ctx.node("Reshape", [moved, ctx.ints([0, 0, -1])])


def _multi_head(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None, out: str) -> None:
    """ONNX Runtime's MultiHeadAttention: Q, K and V as [B, S, H * D], a float mask as its
    attention_bias, the output brought back to [B, H, S, D]."""
    heads, depth = ctx.shape(q)[1], ctx.shape(v)[3]
    inputs = [_heads_last(ctx, q), _heads_last(ctx, k), _heads_last(ctx, v), "", "", mask or ""]
    while inputs[-1] == "":
        inputs.pop()
    merged = ctx.node("MultiHeadAttention", inputs, domain=CONTRIB_DOMAIN, num_heads=heads,
                      scale=_scale(ctx, op, q))
    split = ctx.node("Reshape", [merged, ctx.ints([0, 0, heads, depth])])
    ctx.node("Transpose", [split], [out], perm=[0, 2, 1, 3])


def _contrib_fits(ctx: ExportContext, op: Operator, q: str, k: str, v: str, mask: str | None) -> bool:
    """MultiHeadAttention on ONNX Runtime's CPU: float32, as many key as query heads, known heads
    and head size, no causal mask, a float mask of 4 dims."""
    heads, depth = ctx.shape(q)[1], ctx.shape(v)[3]
    return (ctx.dtype(q) is DType.float32 and heads > 0 and depth > 0 and ctx.shape(k)[1] == heads
            and not op.attr("is_causal") and (mask is None or ctx.dtype(op.input("Mask")[0]) is DType.float32
                                              and ctx.rank(op.input("Mask")[0]) == 4))


def _causal_from(ctx: ExportContext, q: str, k: str, offset: int, mask: str | None) -> str:
    """A bool mask keeping key j for query i where j <= i + offset, merged with ``mask``."""
    sizes = [ctx.node("Slice", [ctx.node("Shape", [name]), ctx.ints([2]), ctx.ints([3])]) for name in (q, k)]
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
        mask, causal = _causal_from(ctx, q, k, offset, mask), False
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
             softcap=float(op.attr("softcap")) or None, qk_matmul_output_mode=op.attr("scores_stage") if scores else None)


@exports("scaled_dot_product_attention")
def attention(ctx: ExportContext, op: Operator) -> None:
    q, k, v, out = op.input("Q")[0], op.input("K")[0], op.input("V")[0], op.output("Out")[0]
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
