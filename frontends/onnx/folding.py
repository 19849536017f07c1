"""Constant folding at import: nodes computable from initializers and static shapes alone.

A node folds when every input it has is a constant, or when it asks only for static facts of a
run-time value (``Shape``, ``Size`` of a tensor whose dims are known). ``Constant``,
``ConstantOfShape`` and ``Shape`` are computed here; any other op is evaluated by ONNX's own
reference implementation (``onnx.reference``), so folding agrees with the ONNX spec for every
op it knows. Random ops never fold (their value is not a constant).
"""

from __future__ import annotations

import numpy as np
from onnx import AttributeProto, NodeProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from halfway.frontends.onnx.context import GraphContext

__all__ = ["foldable", "fold"]

_RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli"})
_STATIC_FACTS = frozenset({"Shape", "Size"})
_SUBGRAPH_TYPES = (AttributeProto.GRAPH, AttributeProto.GRAPHS)


def foldable(ctx: GraphContext, node: NodeProto) -> bool:
    """Whether ``node`` can be computed now, at import."""
    if node.domain not in ("", "ai.onnx") or node.op_type in _RANDOM:
        return False
    if any(attr.type in _SUBGRAPH_TYPES for attr in node.attribute):
        return False
    if node.op_type in _STATIC_FACTS and ctx.has(node.input[0]) and not ctx.is_const(node.input[0]):
        return all(d >= 0 for d in ctx.shape(node.input[0]))
    return all(ctx.is_const(name) for name in node.input if name)


def fold(ctx: GraphContext, node: NodeProto) -> list[np.ndarray]:
    """The values of ``node``'s outputs (``foldable`` must hold)."""
    attrs = ctx.attrs(node)
    if node.op_type == "Shape":
        shape = ctx.shape(node.input[0])
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return [np.array(shape[start:end], dtype=np.int64)]
    if node.op_type == "Size":
        return [np.array(int(np.prod(ctx.shape(node.input[0]))), dtype=np.int64)]
    if node.op_type == "ConstantOfShape":
        value = attrs.get("value", np.zeros(1, np.float32))
        shape = ctx.consts[node.input[0]].astype(np.int64).reshape(-1)
        return [np.full(tuple(shape), value.reshape(-1)[0], dtype=value.dtype)]
    if node.op_type == "Constant" and "value" in attrs:
        return [attrs["value"]]
    return _reference(ctx, node)


def _reference(ctx: GraphContext, node: NodeProto) -> list[np.ndarray]:
    feeds = {name: ctx.consts[name] for name in node.input if name}
    graph = helper.make_graph([node], "fold", [helper.make_empty_tensor_value_info(n) for n in feeds],
                              [helper.make_empty_tensor_value_info(n) for n in node.output if n])
    try:
        results = ReferenceEvaluator(graph, opsets={"": ctx.opset}).run(None, feeds)
    except Exception as e:  # the reference implementation's own error, with the node named
        return ctx.fail(f"folding it from constant inputs failed: {type(e).__name__}: {e}")
    return [_array(r) for r in results]


def _array(value: object) -> np.ndarray:
    if hasattr(value, "SerializeToString"):
        return numpy_helper.to_array(value)
    return np.asarray(value)
