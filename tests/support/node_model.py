"""A one-node ONNX model for op tests: ``node_model("Gather", feeds, consts, axis=1)``."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["node_model"]


def node_model(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], outputs: int = 1,
               opset: int = 18, **attrs: object) -> onnx.ModelProto:
    """A model of one ``op_type`` node reading the graph inputs ``feeds`` then the initializers
    ``consts`` (a name starting with ``_`` is an absent optional input), writing ``outputs``
    outputs ``out0``...; the arrays give the inputs' types and shapes."""
    names = [*feeds, *consts]
    node = helper.make_node(op_type, [n if not n.startswith("_") else "" for n in names],
                            [f"out{i}" for i in range(outputs)], **attrs)
    graph = helper.make_graph(
        [node], "one_op",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info(f"out{i}") for i in range(outputs)],
        [numpy_helper.from_array(v, n) for n, v in consts.items() if not n.startswith("_")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
