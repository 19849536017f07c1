"""Exporters of scaled_dot_product_attention, rotary_embedding and linear_attention (LinearAttention,
opset 27).

Attention: ONNX's Attention from opset 23, else its decomposition softmax(Q K^T * scale + mask) V
(a bool mask through Where with -inf; grouped-query K and V heads repeated for their query heads),
or, with ``contrib``, ONNX Runtime's MultiHeadAttention on Q, K and V brought to [B, S, H * D].
Sequence-major attention (q_num_heads set: [B, S, H * D]) is Attention's 3-D form and
MultiHeadAttention's own layout; the decomposition splits its heads first and merges them after.
``zero_nan`` is a Where(IsNaN) after any of these. Rotary embeddings: RotaryEmbedding from opset 23,
else Slice, Mul, Sub, Add and Concat over the rotated entries.
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
    (heads_q, _), (heads_kv, depth), (_, v_depth) = (_heads(ctx, op, slot) for slot in ("Q", "K", "V"))
    scale, merged = _scale(ctx, op, q), out
    if op.attr("q_num_heads"):
        q, k, v = _heads_first(ctx, q, heads_q), _heads_first(ctx, k, heads_kv), _heads_first(ctx, v, heads_kv)
        out = ctx.temp(f"{merged}.heads")
    if min(heads_q, heads_kv) >= 0 and heads_q != heads_kv:
        k, v = _repeated(ctx, k, heads_q, heads_kv, depth), _repeated(ctx, v, heads_q, heads_kv, v_depth)
    keys = ctx.node("Transpose", [k], perm=[0, 1, 3, 2])
    scores = ctx.node("Mul", [ctx.node("MatMul", [q, keys]), ctx.scalar(scale, op.input("Q")[0])])
    if mask is not None and ctx.dtype(op.input("Mask")[0]) is DType.bool:
        scores = ctx.node("Where", [mask, scores, ctx.scalar(-np.inf, op.input("Q")[0])])
    elif mask is not None:
        scores = ctx.node("Add", [scores, mask])
    ctx.node("MatMul", [ctx.node("Softmax", [scores], axis=-1), v], [out])
    if out != merged:
        _heads_last(ctx, out, merged)


def _repeated(ctx: ExportContext, name: str, heads: int, kv_heads: int, depth: int) -> str:
    """Head-major K or V of ``kv_heads`` heads with each repeated for its ``heads // kv_heads``
    query heads (grouped-query attention below opset 23)."""
    if depth < 0:
        ctx.fail(f"grouped-query attention below opset 23 needs a known head size, {name!r} has none")
    lifted = ctx.node("Unsqueeze", [name, ctx.ints([2])])
    wide = ctx.node("Expand", [lifted, ctx.ints([1, 1, heads // kv_heads, 1, 1])])
    return ctx.node("Reshape", [wide, ctx.ints([0, heads, -1, depth])])


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
    """RotaryEmbedding from opset 23 (tables without position ids brought to X's batch), else its
    decomposition."""
    if ctx.opset < 23:
        _rotary_decomposed(ctx, op)
        return
    x, cos, sin = op.input("X")[0], op.input("Cos")[0], op.input("Sin")[0]
    if not op.input("PositionIds"):
        cos, sin = (_batch_of(ctx, table, x) for table in (cos, sin))
    ctx.node("RotaryEmbedding", [x, cos, sin] + list(op.input("PositionIds")), [op.output("Out")[0]],
             interleaved=int(op.attr("interleaved")), rotary_embedding_dim=op.attr("rotary_dim") or None,
             num_heads=op.attr("num_heads") or None)


def _batch_of(ctx: ExportContext, table: str, x: str) -> str:
    """A [1, S, R / 2] table (one for the batch) expanded to X's batch, as RotaryEmbedding reads it."""
    if ctx.shape(table)[0] != 1:
        return table
    batch = ctx.node("Slice", [ctx.node("Shape", [x]), ctx.ints([0]), ctx.ints([1])])
    rest = ctx.node("Slice", [ctx.node("Shape", [table]), ctx.ints([1]), ctx.ints([3])])
    return ctx.node("Expand", [table, ctx.node("Concat", [batch, rest], axis=0)])


def _rotary_decomposed(ctx: ExportContext, op: Operator) -> None:
    """X's first rotary_dim entries of each head rotated by the tables' angles (Slice, Mul, Sub, Add,
    Concat; the pairs of the interleaved form through a [.., R / 2, 2] Reshape), in float32."""
    x, out, heads = op.input("X")[0], op.output("Out")[0], op.attr("num_heads")
    last = ctx.shape(x)[-1]
    size = (last // heads if heads else last) if last >= 0 else -1
    if size < 0:
        ctx.fail(f"the decomposition needs a known head size, X {x!r} has shape {list(ctx.shape(x))}")
    width = op.attr("rotary_dim") or size
    cos, sin = (ctx.node("Unsqueeze", [_rows(ctx, op, slot), ctx.ints([2 if heads else 1])]) for slot in ("Cos", "Sin"))
    value = ctx.cast(x, DType.float32)
    if heads:
        value = ctx.node("Reshape", [value, ctx.ints([0, 0, heads, size])])
    turn = _pairs_rotated if op.attr("interleaved") else _halves_rotated
    rotated = turn(ctx, _last(ctx, value, 0, width), cos, sin, width)
    if width < size:
        rotated = ctx.node("Concat", [rotated, _last(ctx, value, width, size)], axis=-1)
    if heads:
        rotated = ctx.node("Reshape", [rotated, ctx.ints([0, 0, -1])])
    ctx.node("Cast", [rotated], [out], to=onnx_type(ctx.dtype(x)))


def _rows(ctx: ExportContext, op: Operator, slot: str) -> str:
    """A table as [b, S, R / 2] float32: its rows picked by PositionIds where the op has them."""
    table = ctx.cast(op.input(slot)[0], DType.float32)
    if op.input("PositionIds"):
        table = ctx.node("Gather", [table, ctx.int64(op.input("PositionIds")[0])], axis=0)
    return table


def _last(ctx: ExportContext, value: str, start: int, stop: int) -> str:
    return ctx.node("Slice", [value, ctx.ints([start]), ctx.ints([stop]), ctx.ints([-1])])


def _rotated(ctx: ExportContext, x1: str, x2: str, cos: str, sin: str) -> tuple[str, str]:
    """(x1 cos - x2 sin, x1 sin + x2 cos)."""
    first = ctx.node("Sub", [ctx.node("Mul", [x1, cos]), ctx.node("Mul", [x2, sin])])
    return first, ctx.node("Add", [ctx.node("Mul", [x1, sin]), ctx.node("Mul", [x2, cos])])


def _halves_rotated(ctx: ExportContext, value: str, cos: str, sin: str, width: int) -> str:
    halves = _rotated(ctx, _last(ctx, value, 0, width // 2), _last(ctx, value, width // 2, width), cos, sin)
    return ctx.node("Concat", list(halves), axis=-1)


def _pairs_rotated(ctx: ExportContext, value: str, cos: str, sin: str, width: int) -> str:
    pairs = ctx.node("Reshape", [value, ctx.ints([0, 0, 0, width // 2, 2])])
    cos, sin = (ctx.node("Unsqueeze", [table, ctx.ints([-1])]) for table in (cos, sin))
    turned = _rotated(ctx, _last(ctx, pairs, 0, 1), _last(ctx, pairs, 1, 2), cos, sin)
    return ctx.node("Reshape", [ctx.node("Concat", list(turned), axis=-1), ctx.ints([0, 0, 0, width])])


@exports("linear_attention")
def linear_attention(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 27:
        ctx.fail(f"LinearAttention needs opset 27 (asked for {ctx.opset})")
    inputs = [op.input(slot)[0] if op.input(slot) else "" for slot in ("Q", "K", "V", "PastState", "Decay", "Beta")]
    while not inputs[-1]:
        inputs.pop()
    outputs = [op.output("Out")[0]] + ([op.output("PresentState")[0]] if op.output("PresentState") else [])
    ctx.node("LinearAttention", inputs, outputs, q_num_heads=op.attr("q_num_heads"),
             kv_num_heads=op.attr("kv_num_heads"), scale=op.attr("scale") or None, update_rule=op.attr("update_rule"))
