"""ONNX ops that ONNX defines as functions of other ops (CausalConvWithState, MeanVarianceNormalization,
Swish, ...) and that halfway has no converter for are imported as ONNX's own function body: ``onnx.inliner``
expands them in a copy of the model before the import, as ONNX Runtime does for the ops it has no kernel
of. A node whose converter cannot take it (CenterCropPad of a shape computed at run time) is imported
as its function body too (``function_body``), its inputs typed as the import holds them. A function that needs the types of its inputs (a context-dependent one) is expanded where ONNX's
shape inference gives them; one that cannot be expanded, or whose body holds ops without a converter,
is left as it is, for the import to report by its own name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnx.inliner
from onnx import ModelProto, NodeProto, helper

from .registry import CONVERTERS

__all__ = ["inline_functions", "function_body"]


def inline_functions(model: ModelProto, opset: int) -> ModelProto:
    """``model`` with its nodes of function ops without a converter expanded (``model`` itself when
    there are none, or they do not expand)."""
    ops = sorted({(node.domain, node.op_type) for node in model.graph.node
                  if node.op_type not in CONVERTERS and _is_function(node, opset)})
    if not ops:
        return model
    try:
        typed = onnx.shape_inference.infer_shapes(model)
        for node in typed.graph.node:
            if (node.domain, node.op_type) in ops:
                _give_defaults(node, opset)
        expanding = [op for op in ops if _converts(_inlined(typed, [op]))]
        return _inlined(typed, expanding) if expanding else model
    except Exception:  # any failure of ONNX's inliner leaves the ops to the unsupported-op report
        return model


def _inlined(model: ModelProto, ops: list[tuple[str, str]]) -> ModelProto:
    return onnx.inliner.inline_selected_functions(model, ops, inline_schema_functions=True)


def _converts(model: ModelProto) -> bool:
    """Whether every node of the expanded graph has a converter: an op whose body holds ops halfway
    does not convert stays itself, so the import names it, not a part of it."""
    return all(node.op_type in CONVERTERS or node.op_type == "Constant" for node in model.graph.node)


def _schema(node: onnx.NodeProto, opset: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return None


def _is_function(node: onnx.NodeProto, opset: int) -> bool:
    schema = _schema(node, opset)
    return schema is not None and bool(getattr(schema, "has_function", False)
                                       or getattr(schema, "has_context_dependent_function", False))


def _give_defaults(node: onnx.NodeProto, opset: int) -> None:
    """Write the attrs the node leaves at their defaults: the inliner drops a function body's
    reference to an attr the node does not set (MeanVarianceNormalization's axes)."""
    schema = _schema(node, opset)
    given = {a.name for a in node.attribute}
    for name, attr in (schema.attributes.items() if schema is not None else ()):
        if name not in given and attr.default_value.name:
            node.attribute.append(attr.default_value)


def function_body(node: NodeProto, opset: int, inputs: Mapping[str, tuple[np.dtype, Sequence[int]]]) -> list[NodeProto] | None:
    """The nodes of ONNX's function body of ``node``, its ``inputs`` of these dtypes and dims (-1:
    unknown); None when its op is no function or the body does not expand."""
    if not _is_function(node, opset):
        return None
    call = NodeProto()
    call.CopyFrom(node)
    _give_defaults(call, opset)
    typed = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                           [d if d >= 0 else None for d in dims]) for name, (dtype, dims) in inputs.items()]
    graph = helper.make_graph([call], "call", typed, [helper.make_empty_tensor_value_info(o) for o in node.output if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain, opset)])
    try:
        expanded = _inlined(onnx.shape_inference.infer_shapes(model), [(node.domain, node.op_type)])
    except Exception:  # ONNX's inliner refused: the converter's own error stands
        return None
    nodes = list(expanded.graph.node)
    return nodes if all(n.op_type != node.op_type for n in nodes) else None
