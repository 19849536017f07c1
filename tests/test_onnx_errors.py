"""Bad ONNX input gets one clear HalfwayError naming the file and the node, and leaves the
caller's model as it was."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

import halfway
from halfway.frontends.onnx import ConversionError, UnsupportedOpError, load

F = TensorProto.FLOAT


def _model(nodes, inputs=(("x", [1, 4]),), outputs=("y",), inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, F, None) for n in outputs],
                              [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _saved(tmp_path, model, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return path


def test_a_file_of_another_format_is_named(tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_text("this is not a model\n" * 20)
    with pytest.raises(halfway.SerdeError, match="notes.onnx: not an ONNX model"):
        halfway.load(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_files_are_named(tmp_path, keep):
    model = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                   inits=[("w", np.arange(4, dtype=np.float32))])
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:int(len(data) * keep)])
    with pytest.raises(halfway.SerdeError, match="cut.onnx"):
        halfway.load(path)


def test_an_input_nothing_defines_is_named_with_its_node(tmp_path):
    path = _saved(tmp_path, _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")]))
    with pytest.raises(ConversionError, match=r"model.onnx: node 'adder' \(Add\): input 'ghost' is not defined"):
        halfway.load(path)


def test_cycles_are_named(tmp_path):
    nodes = [helper.make_node("Relu", ["x", ], ["a"], name="start"),
             helper.make_node("Add", ["a", "c"], ["b"], name="loop_b"),
             helper.make_node("Relu", ["b"], ["c"], name="loop_c"),
             helper.make_node("Relu", ["c"], ["y"], name="end")]
    with pytest.raises(ConversionError, match=r"model.onnx: the graph has a cycle among node 'loop_b' \(Add\), "
                                              r"node 'loop_c' \(Relu\)"):
        halfway.load(_saved(tmp_path, _model(nodes)))


def test_a_dynamic_shape_that_cannot_fold_is_named(tmp_path):
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape_of_x"),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape_back")]
    model = _model(nodes, inputs=(("x", ["batch", 4]),))
    path = _saved(tmp_path, model)
    with pytest.raises(ConversionError, match=r"model.onnx: node 'reshape_back' \(Reshape\): shape \('s'\) must be "
                                              r"a constant.*depends on run-time values"):
        halfway.load(path)
    program, feeds, fetches, scope = load(model, input_shapes={"x": [3, 4]})  # fixed dims fold
    assert [op.type for op in program.global_block().ops] == ["feed", "reshape2", "fetch"]


def test_missing_external_data_is_named(tmp_path):
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[("w", np.ones((1, 4), np.float32))])
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    path = _saved(tmp_path, model)
    assert (tmp_path / "weights.bin").exists()
    out = load(path)  # present: loads
    np.testing.assert_array_equal(out[3]["w"], np.ones((1, 4), np.float32))
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(halfway.SerdeError, match=r"model.onnx: tensor 'w' keeps its data in external file "
                                                 r"'weights.bin', which is missing"):
        halfway.load(path)


def test_every_unsupported_op_is_listed_at_once(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("Erf", ["a"], ["b"], name="erf_1"),
             helper.make_node("Custom", ["b"], ["c"], name="mine", domain="com.example"),
             helper.make_node("Erf", ["c"], ["y"], name="erf_2")]
    model = _model(nodes)
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError, match=r"model.onnx: 3 node\(s\) use ops halfway cannot import: "
                                                 r"erf_1 \(Erf\), mine \(com.example.Custom\), erf_2 \(Erf\)"):
        halfway.load(_saved(tmp_path, model))


def test_unsupported_ops_computable_from_initializers_fold():
    nodes = [helper.make_node("Range", ["zero", "four", "one"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=F),
             helper.make_node("Add", ["x", "rf"], ["y"])]
    scalars = [(n, np.array(v, np.int64)) for n, v in (("zero", 0), ("four", 4), ("one", 1))]
    program, _, _, scope = load(_model(nodes, inits=scalars))
    assert [op.type for op in program.global_block().ops] == ["feed", "elementwise_add", "fetch"]
    np.testing.assert_array_equal(scope["rf"], np.arange(4, dtype=np.float32))


def test_unsupported_attrs_name_the_node():
    node = helper.make_node("MaxPool", ["x"], ["y"], name="dilated", kernel_shape=[2, 2], dilations=[2, 2])
    model = _model([node], inputs=(("x", [1, 1, 6, 6]),))
    with pytest.raises(ConversionError, match=r"<ModelProto>: node 'dilated' \(MaxPool\): pooling with dilations"):
        load(model)


def test_old_opsets_are_refused_with_the_fix():
    with pytest.raises(ConversionError, match="opset 6 is older than the oldest supported"):
        load(_model([helper.make_node("Relu", ["x"], ["y"])], opset=6))


def test_the_callers_model_is_not_changed():
    model = _model([helper.make_node("Gemm", ["x", "w"], ["y"], alpha=2.0, transB=1)],
                   inits=[("w", np.ones((3, 4), np.float32))])
    before = model.SerializeToString()
    program, feeds, fetches, scope = load(model)
    assert model.SerializeToString() == before
    scope["w.scaled"][...] = 0
    assert model.SerializeToString() == before
