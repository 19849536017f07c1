"""simplify_shapes: a reshape to a run-time shape made of known sizes and its input's own dims
becomes a plain reshape (the shape arithmetic dies); other run-time shapes stay, and every program
matches ONNX Runtime at several input shapes."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway

F = TensorProto.FLOAT
RNG = np.random.default_rng(4)


def _model(nodes, inits, inputs=(("x", ["batch", "seq", 4]),)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _split_heads(source: str = "x", last: str = "heads"):
    """y = relu(x viewed as [B, S, 2, 2]), the shape built from ``source``'s Shape."""
    nodes = [helper.make_node("Shape", [source], ["s"]),
             helper.make_node("Slice", ["s", "zero", "two"], ["lead"]),
             helper.make_node("Concat", ["lead", last], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["h"]),
             helper.make_node("Relu", ["h"], ["y"])]
    return nodes, [("zero", np.array([0], np.int64)), ("two", np.array([2], np.int64)),
                   ("heads", np.array([2, 2], np.int64))]


def _simplified(model):
    """The model imported and run through simplify_shapes and dce, checked against ONNX Runtime at
    three shapes (every input of one shape); returns the ops."""
    program, feeds, fetches, scope = halfway.load(model)
    result = halfway.PassManager("simplify_shapes,dce").run(program, scope)
    prepared = halfway.Executor().prepare(result.program, feeds, fetches, result.scope)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch, length in [(2, 3), (1, 7), (3, 1)]:
        feed = {name: RNG.standard_normal((batch, length, 4)).astype(np.float32) for name in feeds}
        np.testing.assert_allclose(prepared.run(feed)[0], session.run(None, feed)[0], rtol=1e-6)
    return [op for op in result.program.global_block().ops if op.type not in ("feed", "fetch")]


def test_a_view_of_the_inputs_own_dims_becomes_an_attr_reshape():
    ops = _simplified(_model(*_split_heads()))
    assert [op.type for op in ops] == ["reshape2", "relu"]
    assert list(ops[0].attr("shape")) == [0, 0, 2, 2] and not ops[0].input("Shape")


@pytest.mark.parametrize("z_dims, attr", [(["batch", "seq", 4], True), (["rows", "cols", 4], False)])
def test_a_shape_of_another_input_is_x_s_where_the_model_names_its_dims_alike(z_dims, attr):
    """ONNX dims of one name are one size: z's shape then says x's; dims of other names may differ."""
    nodes, inits = _split_heads(source="z")
    nodes = [*nodes[:-1], helper.make_node("Add", ["h", "zero_f"], ["hz"]), helper.make_node("Relu", ["hz"], ["y"])]
    model = _model(nodes, [*inits, ("zero_f", np.zeros(1, np.float32))], inputs=(("x", ["batch", "seq", 4]),
                                                                                  ("z", z_dims)))
    ops = _simplified(model)
    reshape = next(op for op in ops if op.type == "reshape2")
    if attr:
        assert list(reshape.attr("shape")) == [0, 0, 2, 2] and "shape" not in {op.type for op in ops}
    else:
        assert reshape.input("Shape") and "shape" in {op.type for op in ops}


def test_a_reshape_to_its_inputs_own_shape_goes():
    # [B, S, 0]: ONNX's 0 (allowzero=0) copies x's last dim, so the reshape changes nothing
    ops = _simplified(_model(*_split_heads(last="zero")))
    assert [op.type for op in ops] == ["relu"]
