"""Bad ONNX input gets one clear HalfwayError naming the file and the node, and leaves the
caller's model as it was."""

from __future__ import annotations

import os

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


def test_slice_steps_computed_at_run_time_import_and_fold_with_fixed_shapes(tmp_path):
    """Slice steps computed at run time (the shape of x) import as a strided_slice of every dim
    reading them; fixed input shapes fold them away."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape_of_x"),
             helper.make_node("Slice", ["x", "zero", "s", "zero", "s"], ["y"], name="slice_by_shape")]
    model = _model(nodes, inputs=(("x", ["batch"]),), inits=[("zero", np.zeros(1, np.int64))])
    x = np.arange(5, dtype=np.float32)
    program, feeds, fetches, scope = halfway.load(_saved(tmp_path, model))
    np.testing.assert_array_equal(halfway.Executor().run(program, {feeds[0]: x}, fetches, scope)[0], x[0:5:5])
    program, feeds, fetches, scope = load(model, input_shapes={"x": [3]})
    assert [op.type for op in program.global_block().ops] == ["feed", "strided_slice", "fetch"]


def _reshape_to_fed_shape():
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_to_fed")], "g",
                              [helper.make_tensor_value_info("x", F, [2, 6]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", F, None)])
    program, feeds, fetches, scope = load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    feed = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "shape": np.array([3, 4], np.int64)}
    return program, fetches, scope, feed


def test_a_shape_read_from_a_fed_value_runs_on_numpy():
    program, fetches, scope, feed = _reshape_to_fed_shape()
    np.testing.assert_array_equal(halfway.Executor().run(program, feed, fetches, scope)[0], feed["x"].reshape(3, 4))


@pytest.mark.opencl
def test_a_shape_read_from_a_fed_value_is_refused_where_buffers_are_sized_at_prepare():
    program, fetches, scope, feed = _reshape_to_fed_shape()
    with pytest.raises(halfway.HalfwayError, match=r"reshape2.*output 'y'.*depends on fed values; the opencl"):
        halfway.Executor(halfway.OpenCLPlace()).run(program, feed, fetches, scope)


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
             helper.make_node("StringNormalizer", ["a"], ["b"], name="strings_1"),
             helper.make_node("Custom", ["b"], ["c"], name="mine", domain="com.example"),
             helper.make_node("StringNormalizer", ["c"], ["y"], name="strings_2")]
    model = _model(nodes)
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError, match=r"model.onnx: 3 node\(s\) use ops halfway cannot import: "
                                                 r"strings_1 \(StringNormalizer\), mine \(com.example.Custom\), "
                                                 r"strings_2 \(StringNormalizer\)"):
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
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="area", mode="area")
    model = _model([node], inputs=(("x", [1, 1, 6, 6]),), inits=[("scales", np.array([1, 1, 2, 2], np.float32))])
    with pytest.raises(ConversionError, match=r"<ModelProto>: node 'area' \(Resize\): mode 'area' is not one of"):
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


# -- malformed initializers and inputs ------------------------------------------------------------------
def _add_of(tensor):
    """y = x + w, with w the given TensorProto (named 'w')."""
    model = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")])
    model.graph.initializer.append(tensor)
    return model


def _tensor(data_type=F, dims=(4,), raw=None, floats=None):
    tensor = TensorProto(name="w", data_type=data_type, dims=list(dims))
    if raw is not None:
        tensor.raw_data = raw
    if floats is not None:
        tensor.float_data.extend(floats)
    return tensor


@pytest.mark.parametrize("tensor, match", [
    (_tensor(raw=b"\0" * 12), r"initializer 'w' is FLOAT of dims \[4\]: its raw data should be 16 bytes, but it is 12"),
    (_tensor(dims=(2, 4), raw=b"\0" * 16), "its raw data should be 32 bytes"),
    (_tensor(data_type=TensorProto.DOUBLE, raw=b"\0" * 16), "DOUBLE of dims .4.: its raw data should be 32 bytes"),
    (_tensor(floats=[1.0, 2.0]), r"FLOAT of dims \[4\] \(4 elements\), but its float_data holds 2 values"),
    (_tensor(data_type=0, raw=b"\0" * 16), "initializer 'w' has data type 0, which is not an ONNX tensor type"),
    (_tensor(data_type=99, raw=b"\0" * 16), "initializer 'w' has data type 99, which is not an ONNX tensor type"),
    (_tensor(data_type=TensorProto.STRING), "initializer 'w' has data type STRING"),
    (_tensor(dims=(-4,), raw=b""), r"initializer 'w' has dims \[-4\], which hold a negative size"),
])
def test_malformed_initializers_are_named(tmp_path, tensor, match):
    with pytest.raises(ConversionError, match=f"model.onnx: .*{match}"):
        halfway.load(_saved(tmp_path, _add_of(tensor)))


def test_segmented_initializers_are_refused():
    tensor = _tensor(raw=b"\0" * 16)
    tensor.segment.begin, tensor.segment.end = 0, 4
    with pytest.raises(ConversionError, match="initializer 'w' is a segment"):
        load(_add_of(tensor))


@pytest.mark.parametrize("elem_type", [0, 99, TensorProto.STRING])
def test_graph_inputs_of_unknown_element_types_are_named(elem_type):
    model = _model([helper.make_node("Relu", ["x"], ["y"])])
    model.graph.input[0].type.tensor_type.elem_type = elem_type
    with pytest.raises(ConversionError, match=f"graph input 'x' has element type {elem_type}"):
        load(model)


def _external(tmp_path, data: bytes, **entries):
    model = _add_of(_tensor())
    tensor = model.graph.initializer[0]
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "w.bin", **entries}.items():
        tensor.external_data.add(key=key, value=str(value))
    (tmp_path / "w.bin").write_bytes(data)
    return _saved(tmp_path, model)


def test_external_data_of_the_right_size_loads(tmp_path):
    values = np.arange(6, dtype=np.float32)
    program, _, _, scope = load(_external(tmp_path, values.tobytes(), offset=8, length=16))
    np.testing.assert_array_equal(scope["w"], values[2:])


@pytest.mark.parametrize("size, entries, match", [
    (12, {}, "its raw data should be 16 bytes, but it is 12"),
    (20, {}, "its raw data should be 16 bytes, but it is 20"),
    (16, {"offset": 8, "length": 16}, "external file 'w.bin' is 16 bytes; the tensor's data would end at byte 24"),
    (16, {"location": "../w.bin"}, r"external file '../w.bin', which is outside the model's folder"),
    (16, {"location": "/etc/hostname"}, "expected a path relative to the model's folder"),
    (16, {"offset": "x"}, "external data offset 'x' is not a byte count"),
])
def test_bad_external_data_is_named(tmp_path, size, entries, match):
    (tmp_path / "sub").mkdir()
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    path = _external(tmp_path / "sub", b"\0" * size, **entries)
    with pytest.raises(halfway.HalfwayError, match=match) as info:
        halfway.load(path)
    assert "model.onnx" in str(info.value)


def test_a_model_proto_with_external_data_is_left_alone(tmp_path):
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[("w", np.ones((1, 4), np.float32))])
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    onnx.save(model, tmp_path / "model.onnx")
    proto = onnx.load(tmp_path / "model.onnx", load_external_data=False)
    before = proto.SerializeToString()
    with pytest.raises(halfway.SerdeError, match=r"<ModelProto>: tensors \['w'\] keep their data in external "
                                                 "files, which a ModelProto has no folder to find"):
        load(proto)
    assert proto.SerializeToString() == before


def test_model_files_that_are_not_regular_files_are_refused(tmp_path):
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    (tmp_path / "zero.onnx").symlink_to("/dev/zero")
    for path in (fifo, tmp_path / "zero.onnx"):
        with pytest.raises(halfway.SerdeError, match="not a regular file"):
            halfway.load(path)


def test_input_shapes_must_map_names_to_dims():
    model = _model([helper.make_node("Relu", ["x"], ["y"])])
    with pytest.raises(ConversionError, match="input_shapes must map input names to shapes, got list"):
        load(model, input_shapes=[2, 8])
    with pytest.raises(ConversionError, match=r"input_shapes\['x'\] must be a list of dims"):
        load(model, input_shapes={"x": [2, "a"]})


# -- what the ONNX spec requires ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_ops_with_one_input_are_refused(op):
    with pytest.raises(ConversionError, match=f"node 'n' \\({op}\\): {op}-13 takes 2 inputs, the node has 1"):
        load(_model([helper.make_node(op, ["x"], ["y"], name="n")]))


@pytest.mark.parametrize("node, inputs, inits, match", [
    (helper.make_node("Gather", ["x", "i"], ["y"]), (("x", [5, 2]),), [("i", np.array([100, -100]))],
     r"indices \[100, -100\] are out of range for axis 0 of size 5"),
    (helper.make_node("Gather", ["x", "i"], ["y"], axis=2), (("x", [5, 2]),), [("i", np.array([0]))],
     "axis 2 is out of range for rank 2"),
    (helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]), (("x", [5, 2]),),
     [("s", np.array([0])), ("e", np.array([1])), ("a", np.array([3]))], "axes entry 3 is out of range for rank 2"),
    (helper.make_node("Unsqueeze", ["x", "a"], ["y"]), (("x", [5, 2]),), [("a", np.array([-4]))],
     "axes entry -4 is out of range for rank 3"),
    (helper.make_node("Squeeze", ["x", "a"], ["y"]), (("x", [5, 2]),), [("a", np.array([0]))],
     r"cannot squeeze axes \[0\] of shape \[5, 2\]"),
    (helper.make_node("ReduceMax", ["x"], ["y"], keepdims=2), (("x", [5, 2]),), [], "keepdims is 2; it must be 0 or 1"),
    (helper.make_node("ReduceMax", ["x"], ["y"], axes=[2]), (("x", [5, 2]),), [], "axes entry 2 is out of range"),
    (helper.make_node("LRN", ["x"], ["y"], size=0), (("x", [1, 2, 3, 3]),), [], "size 0 must be positive"),
    (helper.make_node("LRN", ["x"], ["y"]), (("x", [1, 2, 3, 3]),), [], r"LRN-13 requires the attrs \['size'\]"),
    (helper.make_node("Softmax", ["x"], ["y"], axis=1.5), (("x", [1, 2]),), [],
     "attr 'axis' is FLOAT, but Softmax-13 declares it INT"),
])
def test_nodes_that_break_the_spec_are_named(node, inputs, inits, match):
    node.name = "n"
    with pytest.raises(ConversionError, match=r"node 'n' \(\w+\): " + match):
        load(_model([node], inputs=inputs, inits=inits))


def _ort_refuses(model: onnx.ModelProto) -> bool:
    ort = pytest.importorskip("onnxruntime")
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:
        return True
    return False


def _typed_io(node, x_type, y_type, shape=(2, 3, 4), inits=(), opset=13):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_type, list(shape))],
                              [helper.make_tensor_value_info("y", y_type, None)],
                              [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("model, match", [
    (_typed_io(helper.make_node("Pad", ["x", "pads"], ["y"], name="n"), F, F,
               inits=[("pads", np.zeros(6, np.float64))]),
     r"input 'pads' \(pads\) is tensor\(double\), which Pad-13 does not allow there: tensor\(int64\)"),
    (_typed_io(helper.make_node("Unsqueeze", ["x", "a"], ["y"], name="n"), F, F, inits=[("a", np.zeros(1))]),
     r"input 'a' \(axes\) is tensor\(double\)"),
    (_typed_io(helper.make_node("Gemm", ["x", "b"], ["y"], name="n"), F, F, shape=(2, 3),
               inits=[("b", np.ones((3, 4), np.int32))]),
     r"inputs 'x' \(tensor\(float\)\) and 'b' \(tensor\(int32\)\) share the type T of Gemm-13"),
    (_typed_io(helper.make_node("Conv", ["x", "w"], ["y"], name="n"), F, F, shape=(1, 1, 3, 3),
               inits=[("w", np.ones((1, 1, 1, 1), np.int32))]),
     r"input 'w' \(W\) is tensor\(int32\), which Conv-13 does not allow"),
    (_typed_io(helper.make_node("Transpose", ["x"], ["y"], name="n", perm=[0, -1, 1]), F, F),
     r"Transpose perm \[0, -1, 1\] is not a permutation of the 3 dims"),
    (_typed_io(helper.make_node("Softmax", ["x"], ["y"], name="n", axis=10**9), F, F, shape=(2, 3), opset=11),
     r"Softmax axis 1000000000 is outside \[-2, 1\]"),
    (_typed_io(helper.make_node("Transpose", ["x"], ["y"], name="n"), TensorProto.INT32, F),
     "graph output 'y' is declared FLOAT, but the graph computes it as int32"),
    (_typed_io(helper.make_node("Transpose", ["x"], ["y"], name="n"), TensorProto.DOUBLE, F),
     "graph output 'y' is declared FLOAT, but the graph computes it as float64"),
], ids=["pads-double", "axes-double", "gemm-mixed", "conv-int32", "perm-negative", "softmax-axis", "output-int32",
        "output-double"])
def test_types_and_dims_onnx_runtime_refuses_are_refused(model, match):
    """Invalid graphs the fuzz test found halfway importing: ONNX Runtime refuses each of them."""
    assert _ort_refuses(model)
    with pytest.raises(ConversionError, match=match):
        load(model)


@pytest.mark.parametrize("opset", [99, 10**6])
def test_opsets_newer_than_onnx_knows_are_refused(opset):
    with pytest.raises(ConversionError, match=f"opset {opset} is newer than the newest"):
        load(_model([helper.make_node("Relu", ["x"], ["y"])], opset=opset))


# -- sizes ----------------------------------------------------------------------------------------------
def _filled(shape, opset=13):
    node = helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill")
    return _model([node, helper.make_node("Add", ["x", "c"], ["y"])], inits=[("s", np.array(shape, np.int64))],
                  opset=opset)


@pytest.mark.parametrize("shape", [[25000, 25000], [100000, 100000], [10**9]])
def test_huge_constants_are_refused_before_allocating(shape):
    with pytest.raises(ConversionError, match=r"node 'fill' \(ConstantOfShape\): an output: a float32 tensor of "
                                              rf"shape \[{', '.join(map(str, shape))}\] would take"):
        load(_filled(shape))


def test_the_size_limit_is_the_users_to_raise(monkeypatch):
    with pytest.raises(ConversionError, match="more than the limit of 1,024 .HALFWAY_MAX_TENSOR_BYTES"):
        load(_filled([300, 4]), max_tensor_bytes=1024)
    monkeypatch.setenv("HALFWAY_MAX_TENSOR_BYTES", "1024")
    with pytest.raises(ConversionError, match="limit of 1,024"):
        load(_filled([300, 4]))
    program, _, _, scope = load(_filled([300, 4]), max_tensor_bytes=8192)
    assert scope["c"].shape == (300, 4)


@pytest.mark.parametrize("node, inits", [
    (helper.make_node("Expand", ["v", "s"], ["c"]), [("v", np.ones(1, np.float32)), ("s", np.array([10**6, 10**6]))]),
    (helper.make_node("Tile", ["v", "s"], ["c"]), [("v", np.ones(1, np.float32)), ("s", np.array([10**12]))]),
    (helper.make_node("Range", ["a", "b", "d"], ["c"]),
     [("a", np.array(0.0, np.float32)), ("b", np.array(1e12, np.float32)), ("d", np.array(1.0, np.float32))]),
    (helper.make_node("Pad", ["v", "s"], ["c"]), [("v", np.ones(1, np.float32)), ("s", np.array([0, 10**12]))]),
])
def test_folds_that_would_be_huge_are_refused_first(node, inits):
    node.name = "big"
    model = _model([node, helper.make_node("Add", ["x", "c"], ["y"])], inits=inits)
    with pytest.raises(ConversionError, match=r"node 'big' \(\w+\): an output: a float32 tensor of shape"):
        load(model)


def test_huge_run_time_outputs_are_refused_at_import():
    node = helper.make_node("Pad", ["x", "p"], ["y"], name="pad")
    with pytest.raises(ConversionError, match=r"node 'pad' \(Pad\): .*an output: a float32 tensor of shape \[1, 1000000004\]"):
        load(_model([node], inits=[("p", np.array([0, 0, 0, 10**9]))]))


# -- 0-d values -----------------------------------------------------------------------------------------
def test_a_0d_initializer_saves_and_loads(tmp_path):
    model = _model([helper.make_node("Mul", ["x", "two"], ["y"])], inits=[("two", np.array(2.0, np.float32))])
    program, feeds, fetches, scope = load(model)
    assert scope["two"].shape == ()
    halfway.save_inference_model(tmp_path / "m", feeds, fetches, program, scope)
    prog2, _, _, scope2 = halfway.load_inference_model(tmp_path / "m")
    assert scope2["two"].shape == () and scope2["two"] == 2.0
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    (out,) = halfway.Executor().run(prog2, {"x": x}, fetches, scope2)
    np.testing.assert_array_equal(out, x * 2)


def test_a_0d_constant_output_keeps_its_shape():
    model = _model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["c"], ["z"])],
                   outputs=("y", "z"), inits=[("c", np.array(3.0, np.float32))])
    program, feeds, fetches, scope = load(model)
    results = halfway.Executor().run(program, {"x": np.ones((1, 4), np.float32)}, fetches, scope)
    assert results[1].shape == () and results[1] == 3.0
