"""Schemas of the transformer ops: scaled_dot_product_attention, cached_attention, rotary_embedding
and linear_attention (ONNX's LinearAttention: a state updated token by token, no softmax).

``scaled_dot_product_attention`` is the op attention subgraphs fuse into (BERT's and GPT's
MatMul -> Scale -> Add(mask) -> Softmax -> MatMul, PyTorch's ``scaled_dot_product_attention``,
ONNX's ``Attention``): a fusion pass matches such a chain, brings Q, K and V to the head-major
layout [batch, heads, sequence, head size] and replaces the chain by this one op. The importer's
ONNX ``Attention`` does the same with reshapes, transposes and concats around it.

Float16 classes (``FLOAT16_CLASSES``, gathered by the float16 transpile's lists): attention runs
float16 always — two matrix products dominate it, its float16 kernel stores float16 and computes
in float32, softmax included, so the scores never round to float16. cached_attention follows its
input (FOLLOW): its caches are the program's state, made in the program's dtype, which a cast
around the op would sever from the vars it writes. rotary_embedding follows its input too: its
kernel computes in float32, and it is cheap.
"""

from __future__ import annotations

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op
from .family import Float16

__all__ = ["FLOAT16_CLASSES"]

FLOAT16_CLASSES: dict[str, tuple[Float16, str]] = {
    "scaled_dot_product_attention": (
        Float16.ALWAYS, "attention: two matrix products; the float16 kernel computes scores and softmax in float32"),
}
"""Op type -> (float16 class, why) of the ops here not classed FOLLOW."""


def _known(*dims: int) -> bool:
    return all(d >= 0 for d in dims)


def _agree(a: int, b: int) -> bool:
    return a == b or not _known(a, b)


def _broadcasts(dim: int, to: int) -> bool:
    return dim in (1, to) or not _known(dim, to)


def _heads_first(shape: tuple[int, ...], heads: int) -> tuple[int, ...]:
    """[B, S, H * D] with ``heads`` H -> the head-major [B, H, S, D] (D -1 where unknown)."""
    batch, length, hidden = shape
    return batch, heads, length, hidden // heads if _known(hidden) else -1


def _layout(ctx: InferContext) -> tuple[int, int]:
    """q_num_heads and kv_num_heads, checked: both 0 (Q, K, V and Out [B, H, S, D]) or both set
    (Q, K, V and Out [B, S, H * D])."""
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    ctx.check((q_heads, kv_heads) == (0, 0) or min(q_heads, kv_heads) > 0,
              f"attrs q_num_heads {q_heads} and kv_num_heads {kv_heads} must both be 0 (head-major Q, K, V) "
              f"or both positive (Q, K, V as [batch, sequence, heads * head size])")
    return q_heads, kv_heads


def _head_major(ctx: InferContext, q_heads: int, kv_heads: int) -> list[tuple[int, ...]]:
    """Q, K and V as [B, H, S, D], from either layout."""
    shapes = []
    for slot, heads in (("Q", q_heads), ("K", kv_heads), ("V", kv_heads)):
        shape = ctx.input(slot).shape
        if not heads:
            ctx.check(len(shape) == 4, f"{slot} must be [batch, heads, sequence, head size], has shape {list(shape)}")
            shapes.append(shape)
            continue
        ctx.check(len(shape) == 3 and (not _known(shape[-1]) or shape[-1] % heads == 0),
                  f"{slot} must be [batch, sequence, {heads} heads * head size], has shape {list(shape)}")
        shapes.append(_heads_first(shape, heads))
    return shapes


def _infer_attention(ctx: InferContext) -> None:
    q_split, kv_split = _layout(ctx)
    q_shape, k_shape, v_shape = _head_major(ctx, q_split, kv_split)
    q = ctx.input("Q")
    (batch, q_heads, q_len, depth), (_, kv_heads, kv_len, _), v_depth = q_shape, k_shape, v_shape[3]
    ctx.check(all(_agree(a, b) for a, b in zip(k_shape[:3], v_shape[:3])) and _agree(depth, k_shape[3])
              and _agree(batch, k_shape[0]),
              f"K {list(ctx.input('K').shape)} and V {list(ctx.input('V').shape)} must share batch, heads and "
              f"sequence, and K the head size of Q {list(q.shape)}")
    ctx.check(not _known(q_heads, kv_heads) or (kv_heads > 0 and q_heads % kv_heads == 0),
              f"Q's {q_heads} heads must be a multiple of K's and V's {kv_heads}")
    scores = (batch, q_heads, q_len, kv_len)
    if ctx.has_input("Mask"):
        mask = ctx.input("Mask").shape
        ctx.check(len(mask) <= 4 and all(_broadcasts(m, s) for m, s in zip(mask[-2::-1], scores[-2::-1]))
                  and (not mask or not _known(mask[-1], kv_len) or mask[-1] <= kv_len),
                  f"Mask {list(mask)} must broadcast to the scores {list(scores)} (its last dim may be shorter)")
    if ctx.has_input("KeyLengths"):
        lengths = ctx.input("KeyLengths")
        ctx.check(len(lengths.shape) == 1 and _agree(lengths.shape[0], batch) and not lengths.dtype.is_floating,
                  f"KeyLengths must be [batch = {batch}] integers, is {lengths.dtype.name} {list(lengths.shape)}")
    merged = q_heads * v_depth if _known(v_depth) else -1
    ctx.set_output("Out", (batch, q_len, merged) if q_split else (batch, q_heads, q_len, v_depth), q.dtype)
    ctx.set_output("Scores", scores, q.dtype)


register_op(OpSchema(
    "scaled_dot_product_attention",
    inputs=[Slot("Q"), Slot("K"), Slot("V"), Slot("Mask", dispensable=True), Slot("KeyLengths", dispensable=True)],
    outputs=[Slot("Out"), Slot("Scores", dispensable=True)],
    attrs=[AttrSpec("scale", AttrType.FLOAT, 0.0), AttrSpec("is_causal", AttrType.BOOLEAN, False),
           AttrSpec("causal_offset", AttrType.INT, 0), AttrSpec("softcap", AttrType.FLOAT, 0.0),
           AttrSpec("scores_stage", AttrType.INT, 0, choices=(0, 1, 2, 3)),
           AttrSpec("q_num_heads", AttrType.INT, 0), AttrSpec("kv_num_heads", AttrType.INT, 0),
           AttrSpec("zero_nan", AttrType.BOOLEAN, False)],
    infer=_infer_attention, dtype_slots=("Q",), keep_dtype_slots=("Mask", "KeyLengths"),
    doc="Out = softmax(softcap(Q K^T * scale) + mask) V per batch and head.\n\n"
        "Q [B, Hq, Sq, D]; K [B, Hkv, Skv, D] and V [B, Hkv, Skv, Dv] with Hq a multiple of Hkv (grouped-query "
        "attention: query head h reads key/value head h // (Hq / Hkv)); Out [B, Hq, Sq, Dv]. scale 0 stands for "
        "1 / sqrt(D); softcap c > 0 maps the scaled scores s to c * tanh(s / c) before the mask. Mask broadcasts "
        "to [B, Hq, Sq, Skv]: bool (True = attend) or a float added to the scores; a last dim shorter than Skv "
        "masks the keys past it out (ONNX's padded key/value cache). KeyLengths [B] (integer) masks key j out of "
        "batch b's rows where j >= KeyLengths[b] (a padded batch). is_causal masks key j out of query i's row "
        "where j > i + causal_offset (0: upper-left aligned, Skv - Sq: lower-right, the length of a key cache "
        "before this step: ONNX's past keys). A row with every key masked out is NaN, as ONNX's reference "
        "computes it; with zero_nan every NaN of Out is 0 instead (PyTorch's exports zero them: "
        "where(isnan(out), 0, out)). Scores (dispensable, [B, Hq, Sq, Skv]) holds the scores at scores_stage: "
        "0 the scaled product, 1 after softcap, 2 after the mask, 3 the softmax. With q_num_heads and kv_num_heads set "
        "(both > 0), Q, K and V are sequence-major [B, S, H * D] (ONNX's 3-D Attention: no head split or merge "
        "around the op) with those head counts, and Out is [B, Sq, Hq * Dv]; Mask and Scores keep their "
        "[B, Hq, Sq, Skv] layout.",
))


def _packed(ctx: InferContext, q_heads: int, kv_heads: int) -> list[tuple[int, ...]]:
    """Q, K and V as [B, H, S, D] from a packed Q [B, S, Hq * D + Hkv * D + Hkv * Dv] (D and Dv the caches')."""
    shape, depth, v_depth = ctx.input("Q").shape, ctx.input("KCache").shape[-1], ctx.input("VCache").shape[-1]
    ctx.check(q_heads > 0 and not ctx.has_input("K") and not ctx.has_input("V"),
              "a packed Q takes q_num_heads and kv_num_heads, and no K or V")
    width = (q_heads + kv_heads) * depth + kv_heads * v_depth if _known(depth, v_depth) else -1
    ctx.check(len(shape) == 3 and _agree(shape[-1], width),
              f"a packed Q must be [batch, sequence, {q_heads} + {kv_heads} heads * {depth} + {kv_heads} heads * "
              f"{v_depth}], has shape {list(shape)}")
    batch, length = shape[:2]
    return [(batch, q_heads, length, depth), (batch, kv_heads, length, depth), (batch, kv_heads, length, v_depth)]


def _infer_cached_attention(ctx: InferContext) -> None:
    q_split, kv_split = _layout(ctx)
    operands = _packed(ctx, q_split, kv_split) if ctx.attr("packed") else _head_major(ctx, q_split, kv_split)
    (batch, q_heads, q_len, depth), (_, kv_heads, kv_len, k_depth), v_shape = operands
    q, caches = ctx.input("Q"), (ctx.input("KCache"), ctx.input("VCache"))
    if not ctx.attr("packed"):
        ctx.check(_agree(kv_len, q_len) and _agree(k_depth, depth) and _agree(v_shape[1], kv_heads)
                  and _agree(v_shape[2], kv_len),
                  f"K {list(ctx.input('K').shape)} and V {list(ctx.input('V').shape)} must hold the {q_len} new "
                  f"tokens of Q {list(q.shape)} for {kv_heads} key/value heads, K of Q's head size")
    ctx.check(not _known(q_heads, kv_heads) or (kv_heads > 0 and q_heads % kv_heads == 0),
              f"Q's {q_heads} heads must be a multiple of K's and V's {kv_heads}")
    kc, vc = (info.shape for info in caches)
    ctx.check(len(kc) == len(vc) == 4 and all(_agree(a, b) for a, b in zip(kc[:3], vc[:3]))
              and all(_agree(a, b) for a, b in zip(kc, (batch, kv_heads, kc[2], depth))) and _agree(vc[3], v_shape[3]),
              f"KCache {list(kc)} and VCache {list(vc)} must be [batch = {batch}, kv heads = {kv_heads}, max length, "
              f"head size] of K and V")
    ctx.check(all(info.dtype == q.dtype for info in caches),
              f"KCache and VCache must be of Q's dtype {q.dtype.name}, are {caches[0].dtype.name} and "
              f"{caches[1].dtype.name}")
    past = ctx.input("Past")
    ctx.check(len(past.shape) == 1 and _agree(past.shape[0], batch) and past.dtype in (DType.int32, DType.int64),
              f"Past must be [batch = {batch}] int32 or int64, is {past.dtype.name} {list(past.shape)}")
    if ctx.has_input("KeyMask"):
        mask = ctx.input("KeyMask")
        ctx.check(len(mask.shape) == 2 and _agree(mask.shape[0], batch) and _agree(mask.shape[1], kc[2])
                  and not mask.dtype.is_floating,
                  f"KeyMask must be [batch = {batch}, max length = {kc[2]}] bool or integers, is {mask.dtype.name} "
                  f"{list(mask.shape)}")
    if ctx.has_input("Cos") or ctx.has_input("Sin"):
        ctx.check(ctx.has_input("Cos") and ctx.has_input("Sin"), "Cos and Sin come together")
        _check_tables(ctx, ctx.attr("rotary_dim"), depth)
    merged = q_heads * v_shape[3] if _known(q_heads, v_shape[3]) else -1
    ctx.set_output("Out", (batch, q_len, merged) if q_split else (batch, q_heads, q_len, v_shape[3]), q.dtype)
    ctx.set_output("KCacheOut", kc, q.dtype)
    ctx.set_output("VCacheOut", vc, q.dtype)


register_op(OpSchema(
    "cached_attention",
    inputs=[Slot("Q"), Slot("K", dispensable=True), Slot("V", dispensable=True), Slot("KCache"), Slot("VCache"),
            Slot("Past"), Slot("KeyMask", dispensable=True), Slot("Cos", dispensable=True),
            Slot("Sin", dispensable=True), Slot("PositionIds", dispensable=True)],
    outputs=[Slot("Out"), Slot("KCacheOut"), Slot("VCacheOut")],
    attrs=[AttrSpec("scale", AttrType.FLOAT, 0.0), AttrSpec("softcap", AttrType.FLOAT, 0.0),
           AttrSpec("window", AttrType.INT, 0), AttrSpec("q_num_heads", AttrType.INT, 0),
           AttrSpec("kv_num_heads", AttrType.INT, 0), AttrSpec("interleaved", AttrType.BOOLEAN, False),
           AttrSpec("rotary_dim", AttrType.INT, 0), AttrSpec("packed", AttrType.BOOLEAN, False)],
    infer=_infer_cached_attention, dtype_slots=("Q",),
    keep_dtype_slots=("Past", "KeyMask", "Cos", "Sin", "PositionIds"),
    views={"KCacheOut": "KCache", "VCacheOut": "VCache"},
    doc="Causal attention of S new tokens per sequence over a key/value cache, appending their keys and values "
        "to it: a decoder's attention for prefill (S = the prompt's length) and decode (S = 1) alike.\n\n"
        "Q [B, Hq, S, D], K [B, Hkv, S, D] and V [B, Hkv, S, Dv] hold the new tokens (Hq a multiple of Hkv: query "
        "head h reads key/value head h // (Hq / Hkv), no head is copied); KCache [B, Hkv, L, D] and VCache "
        "[B, Hkv, L, Dv], of Q's dtype, hold L positions per sequence, and KCacheOut and VCacheOut are those vars "
        "themselves: the op writes the caches in place, persistable vars whose values outlive the run. Past [B] "
        "(int32 or int64) is how many positions of sequence b the cache holds before this step: its new token i "
        "is written at position Past[b] + i (dropped at L and beyond) and attends to the positions j <= Past[b] + "
        "i, within window (> 0: Past[b] + i - j < window) and where KeyMask [B, L] (dispensable, bool or integers: "
        "nonzero attends) is set: a right-padded batch needs no mask (each sequence has its own Past), a "
        "left-padded one masks its padding. Scores are Q K^T * scale (0: 1 / sqrt(D)), through c * tanh(s / c) "
        "when softcap c > 0; a row with no key to attend to is 0. Out is [B, Hq, S, Dv], or with q_num_heads and "
        "kv_num_heads set (both > 0) Q, K, V and Out are sequence-major [B, S, H * D] with those head counts.\n\n"
        "With Cos and Sin (and PositionIds), Q and K are first rotated as rotary_embedding rotates them, with "
        "interleaved and rotary_dim as its attributes (the keys the cache takes are the rotated ones): a decoder's "
        "rotary embeddings in the attention that reads them.\n\n"
        "With packed (sequence-major only), Q is a decoder's fused projection [B, S, Hq * D + Hkv * D + Hkv * Dv]: "
        "the query, key and value side by side, no K or V (D and Dv the caches'): the split after the "
        "projection never runs (``fuse_cached_attention`` makes both forms).",
))


def _infer_rotary(ctx: InferContext) -> None:
    x = ctx.input("X")
    rank, heads, rotary = len(x.shape), ctx.attr("num_heads"), ctx.attr("rotary_dim")
    ctx.check(rank == 4 or (rank == 3 and heads > 0),
              f"X must be [batch, heads, sequence, head size], or [batch, sequence, hidden] with num_heads, has "
              f"shape {list(x.shape)} and num_heads {heads}")
    hidden = x.shape[-1]
    head = hidden if rank == 4 else (hidden // heads if _known(hidden) else -1)
    ctx.check(rank == 4 or not _known(hidden) or hidden % heads == 0,
              f"X's last dim {hidden} must split into num_heads {heads}")
    _check_tables(ctx, rotary, head)
    ctx.set_output("Out", x.shape, x.dtype)


def _check_tables(ctx: InferContext, rotary: int, head: int) -> None:
    """The rotary tables Cos and Sin (and PositionIds) of rotary_dim ``rotary`` (0: all of a head of ``head``)."""
    width = rotary or head
    ctx.check(not _known(width, head) or (width % 2 == 0 and width <= head),
              f"rotary_dim {width} must be even and at most the head size {head}")
    want = 2 if ctx.has_input("PositionIds") else 3
    for slot in ("Cos", "Sin"):
        info = ctx.input(slot)
        ctx.check(len(info.shape) == want and _agree(info.shape[-1], width // 2 if _known(width) else -1),
                  f"{slot} must be [{'positions' if want == 2 else 'batch, sequence'}, rotary_dim / 2 = "
                  f"{width // 2 if _known(width) else '?'}], has shape {list(info.shape)}")


register_op(OpSchema(
    "rotary_embedding",
    inputs=[Slot("X"), Slot("Cos"), Slot("Sin"), Slot("PositionIds", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("interleaved", AttrType.BOOLEAN, False), AttrSpec("rotary_dim", AttrType.INT, 0),
           AttrSpec("num_heads", AttrType.INT, 0)],
    infer=_infer_rotary, keep_dtype_slots=("Cos", "Sin", "PositionIds"),
    doc="Rotary position embedding (RoPE) of X [B, H, S, D] (or [B, S, H * D] with num_heads): the first "
        "rotary_dim (0: all D) entries of each head, as pairs (x1, x2) — the two halves, or the even and odd "
        "entries when interleaved — become (x1 cos - x2 sin, x1 sin + x2 cos); the rest pass through. Cos and "
        "Sin are [B, S, rotary_dim / 2] (or [1, S, rotary_dim / 2], one table for the batch), or "
        "[positions, rotary_dim / 2] rows picked by PositionIds [B, S].",
))


_UPDATE_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True), "gated_delta": (True, True)}
"""linear_attention's update_rule -> (whether it reads Decay, whether it reads Beta)."""


def linear_attention_inputs(rule: str) -> tuple[bool, bool]:
    """Whether ``rule`` reads Decay (the state's gating) and Beta (the delta correction)."""
    return _UPDATE_RULES[rule]


def _infer_linear_attention(ctx: InferContext) -> None:
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    ctx.check(kv_heads > 0 and q_heads > 0 and q_heads % kv_heads == 0,
              f"attr q_num_heads {q_heads} must be a positive multiple of kv_num_heads {kv_heads}")
    q, k, v = (ctx.input(slot) for slot in ("Q", "K", "V"))
    for slot, info in (("Q", q), ("K", k), ("V", v)):
        ctx.check(len(info.shape) == 3, f"{slot} must be [batch, sequence, heads * head size], has shape "
                                        f"{list(info.shape)}")
    batch, length, head, value_head = q.shape[0], q.shape[1], _heads_first(q.shape, q_heads)[3], \
        _heads_first(v.shape, kv_heads)[3]
    ctx.check(_agree(k.shape[2], kv_heads * head if _known(head) else -1),
              f"K's last dim {k.shape[2]} must be kv_num_heads {kv_heads} * Q's head size {head}")
    decays, betas = linear_attention_inputs(ctx.attr("update_rule"))
    for slot, wanted in (("Decay", decays), ("Beta", betas)):
        ctx.check(ctx.has_input(slot) == wanted, f"update_rule {ctx.attr('update_rule')!r} "
                                                 f"{'reads' if wanted else 'takes no'} {slot}")
    state = [batch, kv_heads, head, value_head]
    if ctx.has_input("PastState"):
        past = ctx.input("PastState")
        ctx.check(len(past.shape) == 4 and all(map(_agree, past.shape, state)),
                  f"PastState must be {state} [batch, kv heads, head size, value head size], has shape "
                  f"{list(past.shape)}")
    ctx.set_output("Out", [batch, length, q_heads * value_head if _known(value_head) else -1], q.dtype)
    ctx.set_output("PresentState", state, ctx.input("PastState").dtype if ctx.has_input("PastState") else q.dtype)


register_op(OpSchema(
    "linear_attention",
    inputs=[Slot("Q"), Slot("K"), Slot("V"), Slot("PastState", dispensable=True), Slot("Decay", dispensable=True),
            Slot("Beta", dispensable=True)],
    outputs=[Slot("Out"), Slot("PresentState", dispensable=True)],
    attrs=[AttrSpec("q_num_heads", AttrType.INT), AttrSpec("kv_num_heads", AttrType.INT),
           AttrSpec("scale", AttrType.FLOAT, 0.0),
           AttrSpec("update_rule", AttrType.STRING, "gated_delta", choices=tuple(_UPDATE_RULES))],
    infer=_infer_linear_attention,
    doc="ONNX's LinearAttention over Q, K, V [B, T, H * D]: per token the state S [B, Hkv, Dk, Dv] (PastState, "
        "else 0) is scaled by exp(Decay) (gated rules), K's outer product with V (less S's reading of K, times "
        "Beta, for delta rules) added, and Q reads it (scaled, 1/sqrt(Dk) for scale 0), a state serving "
        "q_num_heads / kv_num_heads query heads; PresentState is the last state.",
))
