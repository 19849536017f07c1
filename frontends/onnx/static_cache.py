"""Static-cache decoders (ONNX opset 24): their ``TensorScatter`` cache writes and the
``Attention`` over the whole caches rewritten, before the import, as the past/present form
``cache_attention`` caches (``halfway.api.llm.onnx_decoder``).

    past_k ─ TensorScatter(update k_new, write_indices) ─ present_k ─┐
    q ──────────────────────────────── Attention(Q, K, V, attn_mask, nonpad_kv_seqlen) ─ y
                          becomes
    q, k_new, v_new, past_k, past_v ─ Attention(is_causal, past_key, past_value) ─ y, present_k, present_v

The scatter's write index of each sequence is what the runtime's past length is, and the mask
over the caches (``attn_mask``, ``nonpad_kv_seqlen``) the causal one it applies from there: the
rewritten attention says so with ``is_causal`` over the past, which ``cache_attention`` turns
into its ``Past``. A scatter in ``circular`` mode, along another axis, or read by anything but one
attention's K or V and the graph's outputs is left alone (and the decoder then refused by
``cache_attention``, naming what it found).
"""

from __future__ import annotations

from onnx import ModelProto, NodeProto, helper

__all__ = ["has_static_cache", "lower_static_cache"]


def _default(node: NodeProto) -> bool:
    return node.domain in ("", "ai.onnx")


def has_static_cache(model: ModelProto) -> bool:
    return any(node.op_type == "TensorScatter" and _default(node) for node in model.graph.node)


def _linear_scatter(node: NodeProto) -> bool:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = attrs.get("mode", b"linear")
    return attrs.get("axis", -2) in (2, -2) and (mode.decode() if isinstance(mode, bytes) else mode) == "linear"


def _readers(model: ModelProto) -> dict[str, list[NodeProto]]:
    found: dict[str, list[NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _rewritten(attention: NodeProto, k: NodeProto, v: NodeProto) -> NodeProto:
    """``attention`` over the new keys and values of the scatters ``k`` and ``v`` and their pasts."""
    kept = [a for a in attention.attribute if a.name in ("scale", "softcap", "q_num_heads", "kv_num_heads")]
    node = helper.make_node("Attention", [attention.input[0], k.input[1], v.input[1], "", k.input[0], v.input[0]],
                            [attention.output[0], k.output[0], v.output[0]], name=attention.name, is_causal=1)
    node.attribute.extend(kept)
    return node


def lower_static_cache(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with each attention over two scattered caches in the past/present form
    (module docstring); other nodes as they are."""
    scatters = {n.output[0]: n for n in model.graph.node if n.op_type == "TensorScatter" and _default(n)
                and _linear_scatter(n)}
    readers = _readers(model)
    replaced: dict[int, NodeProto] = {}
    dropped: set[int] = set()
    for node in model.graph.node:
        if node.op_type != "Attention" or not _default(node) or len(node.input) < 3:
            continue
        k, v = scatters.get(node.input[1]), scatters.get(node.input[2])
        if k is None or v is None or any(readers[s.output[0]] != [node] for s in (k, v)):
            continue
        replaced[id(node)] = _rewritten(node, k, v)
        dropped |= {id(k), id(v)}
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(replaced.get(id(n), n) for n in model.graph.node if id(n) not in dropped)
    return out
