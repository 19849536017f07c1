"""Converters of ONNX's transformer ops: Attention, RotaryEmbedding and LinearAttention (one to one).

Attention becomes one ``scaled_dot_product_attention`` with the layout work around it: 3-D
[batch, sequence, hidden] Q, K and V split into heads ([B, H, S, D], a reshape and a transpose)
and Y merged back; past keys and values concatenated with the new ones into present_key /
present_value, which the op reads; ``qk_matmul_output`` is the op's Scores at the stage
``qk_matmul_output_mode`` names. ``softmax_precision`` needs nothing: the kernels compute the
softmax in float32 (float64 for float64 inputs) whatever the storage.
"""

from __future__ import annotations

from typing import Any

from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []


def _optional(node: NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


def _split_heads(ctx: GraphContext, name: str, heads: int, hint: str) -> str:
    """[B, S, H * D] -> [B, H, S, D]."""
    split, out = ctx.temp(f"{hint}.split"), ctx.temp(f"{hint}.heads")
    ctx.emit("reshape2", {"X": name}, {"Out": split}, {"shape": [0, 0, heads, -1]})
    ctx.emit("transpose2", {"X": split}, {"Out": out}, {"axis": [0, 2, 1, 3]})
    return out


def _merge_heads(ctx: GraphContext, name: str, out: str) -> None:
    """[B, H, S, D] -> [B, S, H * D]."""
    moved = ctx.temp(f"{out}.moved")
    ctx.emit("transpose2", {"X": name}, {"Out": moved}, {"axis": [0, 2, 1, 3]})
    ctx.emit("reshape2", {"X": moved}, {"Out": out}, {"shape": [0, 0, -1]})


def _with_past(ctx: GraphContext, node: NodeProto, past: str, new: str, index: int) -> str:
    """The present keys (or values): ``past`` then ``new`` along the sequence, as output ``index``."""
    if not past:
        if ctx.is_used(node, index):
            ctx.fail(f"output {node.output[index]!r} (present key or value) needs the past one as an input")
        return new
    present = node.output[index] if index < len(node.output) and node.output[index] else ctx.temp(f"{new}.present")
    ctx.emit("concat", {"X": [past, new]}, {"Out": present}, {"axis": 2})
    return present


@converts("Attention", makes="scaled_dot_product_attention")
def attention(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """A causal mask over a past cache starts the diagonal at the past's length (ONNX aligns the
    new keys with the queries): the op's causal_offset, which needs that length at import."""
    q, k, v = node.input[:3]
    mask, past_key, past_value, key_lengths = (_optional(node, i) for i in range(3, 7))
    out = node.output[0]
    three_d = len(ctx.shape(q)) == 3
    if three_d:
        kv_heads = attrs.get("kv_num_heads", 0)
        q = _split_heads(ctx, q, attrs.get("q_num_heads", 0), f"{out}.q")
        k, v = (_split_heads(ctx, name, kv_heads, f"{out}.{hint}") for name, hint in ((k, "k"), (v, "v")))
    k = _with_past(ctx, node, past_key, k, 1)
    v = _with_past(ctx, node, past_value, v, 2)
    causal = bool(attrs.get("is_causal", 0))
    offset = ctx.shape(past_key)[2] if past_key else 0
    if causal and offset < 0:
        ctx.fail(f"is_causal over past keys of unknown length ({past_key!r} is {list(ctx.shape(past_key))})")
    inputs = {"Q": q, "K": k, "V": v, "Mask": mask, "KeyLengths": key_lengths}
    result = ctx.temp(f"{out}.heads") if three_d else out
    outputs = {"Out": result}
    if ctx.is_used(node, 3):
        outputs["Scores"] = node.output[3]
    ctx.emit("scaled_dot_product_attention", {s: n for s, n in inputs.items() if n}, outputs,
             {"scale": float(attrs.get("scale", 0.0)), "is_causal": causal, "causal_offset": offset,
              "softcap": float(attrs.get("softcap", 0.0)), "scores_stage": attrs.get("qk_matmul_output_mode", 0)})
    if three_d:
        _merge_heads(ctx, result, out)


@converts("RotaryEmbedding", makes="rotary_embedding")
def rotary_embedding(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    inputs = {"X": node.input[0], "Cos": node.input[1], "Sin": node.input[2], "PositionIds": _optional(node, 3)}
    ctx.emit("rotary_embedding", {s: n for s, n in inputs.items() if n}, {"Out": node.output[0]},
             {"interleaved": bool(attrs.get("interleaved", 0)), "rotary_dim": attrs.get("rotary_embedding_dim", 0),
              "num_heads": attrs.get("num_heads", 0)})


@converts("LinearAttention", makes="linear_attention")
def linear_attention(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """chunk_size, a tuning hint, does not change the result and is not read."""
    slots = ("Q", "K", "V", "PastState", "Decay", "Beta")
    outputs = {slot: name for slot, name in zip(("Out", "PresentState"), node.output) if name}
    ctx.emit("linear_attention", {slot: name for slot, name in zip(slots, node.input) if name}, outputs,
             {"q_num_heads": attrs["q_num_heads"], "kv_num_heads": attrs["kv_num_heads"],
              "scale": float(attrs.get("scale", 0.0)), "update_rule": attrs.get("update_rule", "gated_delta")})
