"""Constant folding at import: nodes computable from initializers and static shapes alone.

A node folds when every input it has is a constant, or when it asks only for static facts of a
run-time value (``Shape``, ``Size`` of a tensor whose dims are known). ``Constant``,
``ConstantOfShape`` and ``Shape`` are computed here; any other op is evaluated by ONNX's own
reference implementation (``onnx.reference``), so folding agrees with the ONNX spec for every
op it knows. Random ops never fold (their value is not a constant).

Ops whose output size comes from their input values (ConstantOfShape, Expand, Tile, Range, Pad)
have it checked against the size limit (``halfway.ir.limits``) before anything is computed;
every folded value is checked after.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import AttributeProto, NodeProto, TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from .context import GraphContext

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
    planned = _planned_shape(ctx, node, attrs)
    if planned is not None:
        ctx.check_size(planned, _planned_dtype(ctx, node, attrs))
    values = _values(ctx, node, attrs)
    for value in values:
        ctx.check_size(value.shape, value.dtype)
    return values


def _values(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> list[np.ndarray]:
    if node.op_type == "Shape":
        shape = ctx.shape(node.input[0])
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return [np.array(shape[start:end], dtype=np.int64)]
    if node.op_type == "Size":
        return [np.array(int(np.prod(ctx.shape(node.input[0]))), dtype=np.int64)]
    if node.op_type == "ConstantOfShape":
        value = attrs.get("value", np.zeros(1, np.float32))
        dims = ctx.consts[node.input[0]].astype(np.int64).reshape(-1)
        return [np.full(tuple(dims), value.reshape(-1)[0], dtype=value.dtype)]
    if node.op_type == "Constant" and "value" in attrs:
        return [attrs["value"]]
    return _reference(ctx, node)


def _planned_shape(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> list[int] | None:
    """The output shape of an op whose size comes from its input values, before computing it (the
    inputs read are the ops' required ones, constants as ``foldable`` holds)."""
    op = node.op_type

    def const(index: int) -> np.ndarray:
        return ctx.consts[node.input[index]]

    if op == "ConstantOfShape":
        return _ints(const(0))
    if op == "Expand":
        shape, target = list(const(0).shape), _ints(const(1))
        rank = max(len(shape), len(target))
        shape, target = [1] * (rank - len(shape)) + shape, [1] * (rank - len(target)) + target
        return [max(a, b) for a, b in zip(shape, target)]
    if op == "Tile":
        return [d * r for d, r in zip(const(0).shape, _ints(const(1)))]
    if op == "Range":
        start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in map(const, range(3)))
        if delta == 0 or not all(math.isfinite(v) for v in (start, limit, delta)):
            return ctx.fail(f"Range from {start} to {limit} by {delta} has no end")
        return [max(math.ceil((limit - start) / delta), 0)]
    if op == "Pad" and ctx.opset >= 11:
        pads, rank = _ints(const(1)), const(0).ndim
        if len(pads) == 2 * rank:
            return [d + pads[i] + pads[i + rank] for i, d in enumerate(const(0).shape)]
    return None


def _planned_dtype(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> np.dtype:
    if node.op_type == "ConstantOfShape":
        value: np.ndarray = attrs.get("value", np.zeros(1, np.float32))
        return value.dtype
    return ctx.consts[node.input[0]].dtype


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


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
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)
