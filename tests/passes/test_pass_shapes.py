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


@pytest.mark.parametrize("lead, folded", [((0, 1), True), ((1, 0), False)])
def test_a_linear_layer_on_flattened_rows_reads_x_itself(lead, folded):
    """x [B, S, 4] -> [B*S, 4] -> Gemm -> [x's dims ``lead``, 3]: one fc over x's last dim when
    ``lead`` is x's own leading dims; swapped ([S, B, 3]: the same count) it stays."""
    nodes = [helper.make_node("Reshape", ["x", "rows"], ["flat"]),
             helper.make_node("Gemm", ["flat", "w", "b"], ["g"]),
             helper.make_node("Shape", ["x"], ["s"]),
             *[helper.make_node("Slice", ["s", f"at{a}", f"at{a + 1}"], [f"d{a}"]) for a in (0, 1)],
             helper.make_node("Concat", [f"d{lead[0]}", f"d{lead[1]}", "three"], ["target"], axis=0),
             helper.make_node("Reshape", ["g", "target"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    inits = [("rows", np.array([-1, 4], np.int64)), ("three", np.array([3], np.int64)),
             ("w", RNG.standard_normal((4, 3)).astype(np.float32)), ("b", RNG.standard_normal(3).astype(np.float32)),
             *[(f"at{a}", np.array([a], np.int64)) for a in range(3)]]
    ops = _simplified(_model(nodes, inits))
    if folded:  # Gemm imports as matmul_v2 + elementwise_add (fuse_fc makes them one fc later)
        assert [op.type for op in ops] == ["matmul_v2", "elementwise_add", "relu"] and ops[0].input("X") == ("x",)
    else:
        assert [op.type for op in ops].count("reshape2") == 2


def test_the_shape_of_a_feed_with_the_same_dims_is_read_once():
    """range(seq of x) + range(seq of z), x and z both [batch, seq, 4]: one shape op is left."""
    nodes = [*[helper.make_node("Shape", [v], [f"s{v}"]) for v in "xz"],
             *[helper.make_node("Gather", [f"s{v}", "one"], [f"n{v}"]) for v in "xz"],
             *[helper.make_node("Range", ["zero", f"n{v}", "one"], [f"r{v}"]) for v in "xz"],
             helper.make_node("Add", ["rx", "rz"], ["sum"]), helper.make_node("Cast", ["sum"], ["y"], to=F)]
    inits = [("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64))]
    ops = _simplified(_model(nodes, inits, inputs=(("x", ["batch", "seq", 4]), ("z", ["batch", "seq", 4]))))
    assert [op.type for op in ops].count("shape") == 1 and [op.type for op in ops].count("range") == 2
