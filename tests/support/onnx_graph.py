"""Small ONNX graphs written node by node, as exporters write them, for the fusion tests; and the
check that halfway's default passes leave them matching ONNX Runtime.

    g = Graph()
    x = g.input("x", np.float32, ["batch", 4, "seq", 8])
    y = g.node("Mul", x, g.const(np.float32(2)))
    program = check_passes(g.model([y]), {"x": value})     # the program after the default passes
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import halfway
from tests.support.onnx_zoo import ort_session

__all__ = ["Graph", "check_passes"]


class Graph:
    """Nodes, initializers and inputs of one graph in the making; values are named in order."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.count = 0

    def _name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def input(self, name: str, dtype: Any, dims: Sequence[int | str]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                         list(dims)))
        return name

    def const(self, value: Any, dtype: Any = None) -> str:
        name = self._name("c")
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, *values: int) -> str:
        return self.const(list(values), np.int64)

    def node(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        out = self._name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def model(self, outputs: Sequence[str], opset: int = 18) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "graph", self.inputs, [helper.make_empty_tensor_value_info(o)
                                                                     for o in outputs], self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check_passes(model: onnx.ModelProto, feeds: dict[str, np.ndarray], pipeline: str | None = None,
                 rtol: float = 1e-5) -> halfway.Program:
    """Import ``model``, run ``pipeline`` (the default one), and check the program against ONNX
    Runtime at ``feeds``, as imported and after the passes; returns the program after them."""
    program, feed_names, fetch_names, scope = halfway.load(model)
    result = halfway.PassManager(pipeline).run(program, scope, fetch=fetch_names)
    want = ort_session(model).run(fetch_names, feeds)
    for prog, values in ((program, scope), (result.program, result.scope)):
        got = halfway.Executor().run(prog, {n: feeds[n] for n in feed_names}, fetch_names, values)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.abs(w).max())))
    return result.program
