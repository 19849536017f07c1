"""ONNX Runtime GenAI's model-builder decoders: their com.microsoft ops rewritten as the ONNX
opset-23 ops the importer converts, before the import (``halfway.api.llm.onnx_decoder``).

- ``SimplifiedLayerNormalization`` (ONNX Runtime's, in the default domain) -> ``RMSNormalization``;
- ``SkipSimplifiedLayerNormalization`` -> an ``Add`` of the input, the skip (and the bias), whose
  sum is its fourth output, then ``RMSNormalization``;
- com.microsoft ``RotaryEmbedding`` -> ONNX's (the inputs reordered: X, cos, sin, positions);
- ``GroupQueryAttention`` -> with ``do_rotary``, ONNX ``RotaryEmbedding`` of the queries and keys
  at the graph input ``position_ids`` (added: GQA counts positions from ``seqlens_k``, the
  runtime feeds them), then causal ``Attention`` over ``past_key`` / ``past_value`` (packed QKV
  split first); ``seqlens_k`` and ``total_sequence_length`` are left unread. ONNX's Attention
  has no sliding window: ``attention_windows`` reads each GQA's ``local_window_size`` (a query at
  position p sees keys p - w < j <= p, as ONNX Runtime computes it) for the caller to give
  ``cache_attention``, which applies it to the cached attention;
- ``MatMulNBits`` -> ``MatMul`` by its weight dequantized at load (``dequantize``: 2- to 8-bit
  blocks, zero points packed or not, the scales' dtype, ``g_idx``'s block of each row).

The model's default opset becomes at least 23. What the rewrite does not know is a
``ConversionError`` naming the node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from .context import ConversionError

__all__ = ["has_contrib_ops", "lower_contrib_ops", "attention_windows", "dequantize"]

OPSET = 23
CONTRIB = "com.microsoft"


def has_contrib_ops(model: ModelProto) -> bool:
    return any(node.domain == CONTRIB or node.op_type == "SimplifiedLayerNormalization" for node in model.graph.node)


def attention_windows(model: ModelProto) -> tuple[int, ...]:
    """Each ``GroupQueryAttention``'s sliding window, in graph order (0: none; the op's -1)."""
    return tuple(max(0, int(_attrs(node).get("local_window_size", -1))) for node in model.graph.node
                 if (node.domain, node.op_type) == (CONTRIB, "GroupQueryAttention"))


def dequantize(packed: np.ndarray, scales: np.ndarray, zeros: np.ndarray | None, n: int, k: int, bits: int,
               block: int, groups: np.ndarray | None = None) -> np.ndarray:
    """``MatMulNBits``' weight [K, N] in the scales' dtype: ``packed`` [N, blocks, block * bits / 8]
    (uint8, the low bits first), ``scales`` [N * blocks], ``zeros`` uint8 packed as the values, or
    of the scales' dtype, or None (the middle value, 2^(bits - 1)); ``groups`` [K] (``g_idx``, an
    act-order model's) the block whose scale and zero point each row k takes, else k // block."""
    blocks = -(-k // block)
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    mask = np.uint8((1 << bits) - 1)
    values = ((packed.reshape(n, blocks, -1)[..., None] >> shifts) & mask).reshape(n, blocks, -1)[..., :block]
    if zeros is None:
        zero = np.full((n, blocks), 1 << (bits - 1), np.float32)
    elif zeros.dtype == np.uint8:
        per_row = -(-blocks * bits // 8)
        zero = ((zeros.reshape(n, per_row)[..., None] >> shifts) & mask).reshape(n, -1)[:, :blocks].astype(np.float32)
    else:
        zero = zeros.reshape(n, blocks).astype(np.float32)
    scale = scales.reshape(n, blocks).astype(np.float32)
    group = np.arange(k) // block if groups is None else groups
    weight = (values.reshape(n, -1)[:, :k].astype(np.float32) - zero[:, group]) * scale[:, group]
    return np.ascontiguousarray(weight.T.astype(scales.dtype))


class _Lowering:
    """The rewrite of one graph: its new nodes and initializers."""

    def __init__(self, model: ModelProto) -> None:
        self.model = model
        self.constants = {t.name: t for t in model.graph.initializer}
        self.nodes: list[NodeProto] = []
        self.added: list[TensorProto] = []
        self.positions = False

    def fail(self, node: NodeProto, message: str) -> ConversionError:
        return ConversionError(f"{node.name or node.op_type} ({node.domain}.{node.op_type}): {message}")

    def emit(self, op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> None:
        self.nodes.append(helper.make_node(op, inputs, outputs, **attrs))

    def temp(self, node: NodeProto, hint: str) -> str:
        return f"{node.output[0]}.{hint}"

    def constant(self, node: NodeProto, index: int) -> np.ndarray:
        name = _at(node.input, index)
        if name not in self.constants:
            raise self.fail(node, f"input {index} ({name!r}) must be an initializer")
        return numpy_helper.to_array(self.constants[name])


def _attrs(node: NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _at(names: Any, index: int) -> str:
    """``names[index]``, or "" past its end (an optional input or output left out)."""
    return str(names[index]) if index < len(names) else ""


def _input(node: NodeProto, index: int) -> str:
    return _at(node.input, index)


def _rms(low: _Lowering, node: NodeProto) -> None:
    a = _attrs(node)
    low.emit("RMSNormalization", list(node.input[:2]), [node.output[0]], axis=a.get("axis", -1),
             epsilon=a.get("epsilon", 1e-5))


def _skip_rms(low: _Lowering, node: NodeProto) -> None:
    total = _at(node.output, 3) or low.temp(node, "sum")
    summed = [node.input[0], node.input[1]] + ([node.input[3]] if _input(node, 3) else [])
    if len(summed) == 3:
        low.emit("Add", summed[:2], [low.temp(node, "skip")])
        summed = [low.temp(node, "skip"), summed[2]]
    low.emit("Add", summed, [total])
    low.emit("RMSNormalization", [total, node.input[2]], [node.output[0]], epsilon=_attrs(node).get("epsilon", 1e-5))


def _rotary(low: _Lowering, node: NodeProto) -> None:
    a = _attrs(node)
    if a.get("scale", 1.0) != 1.0 or a.get("is_packed_batching", 0):
        raise low.fail(node, "a scale other than 1 or packed batching is not converted")
    low.emit("RotaryEmbedding", [node.input[0], node.input[2], node.input[3], node.input[1]], [node.output[0]],
             interleaved=a.get("interleaved", 0), num_heads=a.get("num_heads", 0),
             rotary_embedding_dim=a.get("rotary_embedding_dim", 0))


def _gqa(low: _Lowering, node: NodeProto) -> None:
    a = _attrs(node)
    heads, kv_heads = a["num_heads"], a["kv_num_heads"]
    q, k, v = node.input[:3]
    if not k:
        q, k, v = (low.temp(node, n) for n in "qkv")
        low.emit("Split", [node.input[0]], [q, k, v], axis=-1, num_outputs=3)
        if heads != 2 * kv_heads:
            raise low.fail(node, "packed QKV is converted for equal query and key/value widths only")
    if a.get("do_rotary", 0):
        low.positions = True
        rotated = []
        for name, count in ((q, heads), (k, kv_heads)):
            out = f"{name}.rotated.{node.output[0]}"
            low.emit("RotaryEmbedding", [name, _input(node, 7), _input(node, 8), "position_ids"], [out],
                     interleaved=a.get("rotary_interleaved", 0), num_heads=count)
            rotated.append(out)
        q, k = rotated
    attrs = {"is_causal": 1, "q_num_heads": heads, "kv_num_heads": kv_heads, "softcap": float(a.get("softcap", 0.0))}
    if a.get("scale"):
        attrs["scale"] = float(a["scale"])
    low.emit("Attention", [q, k, v, "", _input(node, 3), _input(node, 4)], list(node.output[:3]), **attrs)


def _matmul_nbits(low: _Lowering, node: NodeProto) -> None:
    a = _attrs(node)
    n, k, block = a["N"], a["K"], a["block_size"]
    zeros = low.constant(node, 3) if _input(node, 3) else None
    groups = _groups(low, node, k, -(-k // block)) if _input(node, 4) else None
    weight = dequantize(low.constant(node, 1), low.constant(node, 2), zeros, n, k, a.get("bits", 4), block, groups)
    name = f"{node.input[1]}.dequantized"
    low.added.append(numpy_helper.from_array(weight, name))
    product = low.temp(node, "product") if _input(node, 5) else node.output[0]
    low.emit("MatMul", [node.input[0], name], [product])
    if _input(node, 5):
        low.emit("Add", [product, node.input[5]], [node.output[0]])


def _groups(low: _Lowering, node: NodeProto, k: int, blocks: int) -> np.ndarray:
    """``g_idx``: one block index in [0, blocks) per row of the weight."""
    groups = low.constant(node, 4).astype(np.int64).reshape(-1)
    if groups.shape != (k,):
        raise low.fail(node, f"g_idx must hold {k} block indices (one per row of the weight), got {groups.size}")
    if groups.min() < 0 or groups.max() >= blocks:
        raise low.fail(node, f"g_idx must hold block indices in [0, {blocks}), got [{groups.min()}, {groups.max()}]")
    return groups


_RULES: dict[tuple[str, str], Callable[[_Lowering, NodeProto], None]] = {
    ("", "SimplifiedLayerNormalization"): _rms,
    (CONTRIB, "SimplifiedLayerNormalization"): _rms,
    (CONTRIB, "SkipSimplifiedLayerNormalization"): _skip_rms,
    (CONTRIB, "RotaryEmbedding"): _rotary,
    (CONTRIB, "GroupQueryAttention"): _gqa,
    (CONTRIB, "MatMulNBits"): _matmul_nbits,
}
"""(domain, op type) -> its rewrite."""


def lower_contrib_ops(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with its GenAI contrib ops rewritten (module docstring).

    Raises:
        ConversionError: a contrib op the rewrite does not know, or one of its cases it does not
            convert, naming the node.
    """
    low = _Lowering(model)
    for node in model.graph.node:
        rule = _RULES.get((node.domain, node.op_type))
        if rule is None and node.domain == CONTRIB:
            known = ", ".join(op for _, op in _RULES)
            raise low.fail(node, f"no rewrite of this com.microsoft op (rewritten: {known})")
        if rule is None:
            low.nodes.append(node)
        else:
            rule(low, node)
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(low.nodes)
    read = {name for node in low.nodes for name in node.input} | {o.name for o in model.graph.output}
    kept = [t for t in model.graph.initializer if t.name in read]
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept + low.added)
    if low.positions and all(i.name != "position_ids" for i in out.graph.input):
        out.graph.input.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "sequence"]))
    _set_opset(out)
    return out


def _set_opset(model: ModelProto) -> None:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = max(opset.version, OPSET)
