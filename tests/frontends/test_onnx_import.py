"""ONNX import: structure (names, feeds, folding, parameters, dtypes) and numbers against ONNX
Runtime on small hand-built models, for the conversions ONNX's node tests cover least
(Gemm forms, ceil-mode and SAME pooling, old Softmax, old-IR initializers, shape chains)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx import load
from tests.support.onnx_zoo import ort_session

RNG = np.random.default_rng(3)


def _model(nodes, inputs, outputs, inits=(), opset=13, ir_version=None):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              [numpy_helper.from_array(v, n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def _check_against_ort(model, feeds, rtol=1e-5, atol=1e-5):
    program, feed_names, fetch_names, scope = load(model)
    got = Executor().run(program, {n: feeds[n] for n in feed_names}, fetch_names, scope)
    want = ort_session(model).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return program


F = TensorProto.FLOAT


@pytest.mark.parametrize("trans_a,trans_b,alpha,beta,c_shape", [
    (0, 0, 1.0, 1.0, [4]), (1, 0, 0.5, 2.0, [3, 4]), (0, 1, 2.0, 0.0, [1, 4]), (1, 1, 1.0, 1.0, None)])
@pytest.mark.parametrize("const_b", [True, False])
def test_gemm_forms_match_onnxruntime(trans_a, trans_b, alpha, beta, c_shape, const_b):
    a = RNG.standard_normal((5, 3) if trans_a else (3, 5)).astype(np.float32)
    b = RNG.standard_normal((4, 5) if trans_b else (5, 4)).astype(np.float32)
    inits = [("b", b)] if const_b else []
    inputs = [("a", F, list(a.shape))] + ([] if const_b else [("b", F, list(b.shape))])
    names = ["a", "b"]
    if c_shape is not None:
        inits.append(("c", RNG.standard_normal(c_shape).astype(np.float32)))
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    model = _model([node], inputs, [("y", F, [3, 4])], inits)
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    _check_against_ort(model, feeds)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 0], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 2], "strides": [2, 1], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "count_include_pad": 1},
])
def test_pool_padding_forms_match_onnxruntime(op, attrs):
    if op == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    x = RNG.standard_normal((1, 2, 8, 7)).astype(np.float32)
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, [1, 2, 8, 7])], [("y", F, None)])
    _check_against_ort(model, {"x": x})


@pytest.mark.parametrize("padding", [{"auto_pad": "SAME_UPPER"}, {"auto_pad": "SAME_LOWER"},
                                     {"auto_pad": "VALID", "dilations": [1, 2]},
                                     {"pads": [0, 2, 1, 1], "dilations": [2, 1]}])
@pytest.mark.parametrize("group", [1, 4])
def test_conv_padding_groups_and_dilations_match_onnxruntime(padding, group):
    x = RNG.standard_normal((1, 4, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 4 // group, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "bias"], ["y"], group=group, strides=[2, 1], **padding)
    model = _model([node], [("x", F, [1, 4, 9, 8])], [("y", F, None)], [("w", w), ("bias", bias)])
    _check_against_ort(model, {"x": x})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [1, 2, -1])
def test_softmax_semantics_of_both_opsets(opset, axis):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [("x", F, [2, 3, 4])],
                   [("y", F, [2, 3, 4])], opset=opset)
    _check_against_ort(model, {"x": x})


def test_names_are_kept_and_only_used_constants_become_parameters():
    w = RNG.standard_normal((2, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["input", "weight"], ["hidden"], name="mm"),
             helper.make_node("Relu", ["hidden"], ["feed"], name="act")]
    model = _model(nodes, [("input", F, [4, 2])], [("feed", F, [4, 3])],
                   [("weight", w), ("unused", np.zeros(3, np.float32))])
    program, feeds, fetches, scope = load(model)
    block = program.global_block()
    assert feeds == ["input"] and block.has_var("hidden") and block.var("weight").persistable
    assert fetches != ["feed"] and fetches[0].startswith("feed")  # "feed" names the feed holder
    assert list(scope) == ["weight"]
    np.testing.assert_array_equal(scope["weight"], w)


def test_old_ir_initializers_listed_as_inputs_are_parameters_not_feeds():
    w = RNG.standard_normal((3,)).astype(np.float32)
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", F, [2, 3]), ("w", F, [3])],
                   [("y", F, [2, 3])], [("w", w)], opset=7, ir_version=3)
    program = _check_against_ort(model, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    assert program.feed_names() == ["x"]


def test_shape_chains_fold_into_static_attrs():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape on static shapes, and ConstantOfShape
    weights, leave only the data ops in the program."""
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("ConstantOfShape", ["w_shape"], ["w"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    model = _model(nodes, [("x", F, [2, 3, 4])], [("y", F, [2, 5])],
                   [("zero", np.array(0, np.int64)), ("axes", i64(0)), ("minus_one", i64(-1)), ("w_shape", i64(12, 5))])
    program = _check_against_ort(model, {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)})
    ops = [op.type for op in program.global_block().ops]
    assert ops == ["feed", "reshape2", "matmul_v2", "fetch"]
    reshape = program.global_block().ops[1]
    assert list(reshape.attr("shape")) == [2, -1]


def test_float16_models_import_as_float16_programs():
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float16)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float16)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, [("x", TensorProto.FLOAT16, [1, 3, 6, 6])], [("y", TensorProto.FLOAT16, None)],
                   [("w", w)])
    program = _check_against_ort(model, {"x": x}, rtol=1e-2, atol=1e-2)
    prepared = Executor().prepare(program, ["x"], program.fetch_names(), load(model)[3])
    assert {key.dtype.name for _, _, key in prepared.report.kernels} == {"float16"}


def test_loaded_onnx_programs_save_and_reload_as_paddle_models(tmp_path):
    x = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, [("x", F, [1, 3, 5, 5])], [("y", F, None)],
                   [("w", RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)),
                    ("b", RNG.standard_normal(2).astype(np.float32))])
    program, feeds, fetches, scope = load(model)
    halfway.save_inference_model(tmp_path / "m", feeds, fetches, program, scope)
    again = halfway.load(tmp_path / "m")
    first = Executor().run(program, {"x": x}, fetches, scope)
    second = Executor().run(again[0], {"x": x}, again[2], again[3])
    np.testing.assert_array_equal(first[0], second[0])
    assert again[0].to_bytes() == halfway.load_inference_model(tmp_path / "m")[0].to_bytes()


def test_a_symbolic_batch_dim_stays_unknown_and_runs_at_any_batch():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
             helper.make_node("Softmax", ["y"], ["z"], axis=1)]
    inits = [("w", RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             ("b", RNG.standard_normal(4).astype(np.float32)),
             ("fw", RNG.standard_normal((5, 4)).astype(np.float32)), ("fb", RNG.standard_normal(5).astype(np.float32))]
    model = _model(nodes, [("x", F, ["N", 3, 8, 8])], [("z", F, ["N", 5])], inits)
    program, feeds, fetches, scope = load(model)
    assert program.global_block().var("z").shape == (-1, 5)
    for batch in (1, 3):
        _check_against_ort(model, {"x": RNG.standard_normal((batch, 3, 8, 8)).astype(np.float32)})
