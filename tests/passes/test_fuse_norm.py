import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.initializers import Constant
from halfway.passes import PassManager
from tests.support.passcheck import fuse_and_compare, lively_params, op_types


def _one(op_type, inputs, **attrs):
    return append_op(op_type, inputs, attrs)["Out"][0]


def _over_root(x, root, inverse, root_first=False):
    """x / root as exporters write it: x times reciprocal(root) or 1 / root, or x divided by it."""
    if inverse == "div":
        return _one("elementwise_div", {"X": x, "Y": root})
    if inverse == "reciprocal":
        factor = _one("reciprocal", {"X": root})
    else:
        factor = _one("elementwise_div", {"X": create_parameter("one", [], initializer=Constant(1.0)), "Y": root})
    return _one("elementwise_mul", {"X": factor, "Y": x} if root_first else {"X": x, "Y": factor})


def _weighed(normed, weight_first):
    w = create_parameter("w", [8])
    return _one("elementwise_mul", {"X": w, "Y": normed} if weight_first else {"X": normed, "Y": w})


def _rms(square="pow", inverse="reciprocal", dim=-1, weight_first=False):
    """RMSNorm decomposed as LLaMA's and T5's exports write it."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8])
        sq = _one("pow", {"X": x}, factor=2.0) if square == "pow" else _one("elementwise_mul", {"X": x, "Y": x})
        mean = _one("reduce_mean", {"X": sq}, dim=[dim], keep_dim=True)
        root = _one("sqrt", {"X": _one("elementwise_add", {"X": mean, "Y": create_parameter(
            "eps", [], initializer=Constant(1e-6))})})
        y = _weighed(_over_root(x, root, inverse), weight_first)
    scope = halfway.init_scope(prog, seed=2)
    lively_params(scope, np.random.default_rng(2))
    return prog, scope, [y.name]


@pytest.mark.parametrize("square", ["pow", "mul"])
@pytest.mark.parametrize("inverse", ["reciprocal", "one_over", "div"])
@pytest.mark.parametrize("weight_first", [False, True])
def test_rms_norm_decompositions_become_rms_norm(square, inverse, weight_first):
    prog, scope, outs = _rms(square, inverse, weight_first=weight_first)
    result = fuse_and_compare(prog, scope, "fuse_norm", outs)
    (norm,) = result.program.global_block().ops
    assert norm.type == "rms_norm" and norm.attr("begin_norm_axis") == 2
    assert norm.attr("epsilon") == pytest.approx(1e-6)
    x = np.random.default_rng(3).standard_normal((2, 3, 8)).astype(np.float32)
    (got,) = halfway.Executor().run(result.program, {"x": x}, outs, result.scope)
    w = result.scope[norm.input("Scale")[0]]
    np.testing.assert_allclose(got, x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * w, rtol=1e-5)


def test_a_mean_over_another_dim_is_a_near_miss():
    prog, scope, outs = _rms(dim=1)
    result = PassManager("fuse_norm", debug=True).run(prog, scope, fetch=outs)
    assert "rms_norm" not in op_types(result.program)
    assert any("not the last one kept" in m.reason for m in result.records[0].near_misses)


def _layer_norm(square="pow", inverse="div", bias=True, weight_first=False, variance_dim=-1, factor=2.0,
                centred_readers=0):
    """LayerNorm decomposed as exporters write it below opset 17."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8])
        d = _one("elementwise_sub", {"X": x, "Y": _one("reduce_mean", {"X": x}, dim=[-1], keep_dim=True)})
        sq = _one("pow", {"X": d}, factor=factor) if square == "pow" else _one("elementwise_mul", {"X": d, "Y": d})
        var = _one("reduce_mean", {"X": sq}, dim=[variance_dim], keep_dim=True)
        eps = create_parameter("eps", [], initializer=Constant(1e-5))
        root = _one("sqrt", {"X": _one("elementwise_add", {"X": eps, "Y": var})})
        y = _weighed(_over_root(d, root, inverse, root_first=True), weight_first)
        if bias:
            y = _one("elementwise_add", {"X": y, "Y": create_parameter("b", [8])})
        outs = [y.name] + [_one("relu", {"X": d}).name for _ in range(centred_readers)]
    scope = halfway.init_scope(prog, seed=4)
    lively_params(scope, np.random.default_rng(4))
    return prog, scope, outs


@pytest.mark.parametrize("square", ["pow", "mul"])
@pytest.mark.parametrize("inverse", ["reciprocal", "one_over", "div"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weight_first", [False, True])
def test_layer_norm_decompositions_become_layer_norm(square, inverse, bias, weight_first):
    prog, scope, outs = _layer_norm(square, inverse, bias, weight_first)
    result = fuse_and_compare(prog, scope, "fuse_norm", outs)
    (norm,) = result.program.global_block().ops
    assert norm.type == "layer_norm" and norm.attr("begin_norm_axis") == 2 and bool(norm.input("Bias")) == bias
    assert norm.attr("epsilon") == pytest.approx(1e-5)
    x = np.random.default_rng(5).standard_normal((2, 3, 8)).astype(np.float32) * 3 + 1
    (got,) = halfway.Executor().run(result.program, {"x": x}, outs, result.scope)
    w = result.scope[norm.input("Scale")[0]]
    b = result.scope[norm.input("Bias")[0]] if bias else 0
    centred = x - x.mean(-1, keepdims=True)
    want = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs, reason", [
    ({"variance_dim": 1}, "variance is over dims [1]"),
    ({"factor": 4.0}, "not a constant square"),
])
def test_layer_norm_near_misses_say_why(kwargs, reason):
    prog, scope, outs = _layer_norm(**kwargs)
    result = PassManager("fuse_norm", debug=True).run(prog, scope, fetch=outs)
    assert "layer_norm" not in op_types(result.program)
    assert any(reason in m.reason for m in result.records[0].near_misses)


def test_a_centred_value_read_elsewhere_stays_decomposed():
    prog, scope, outs = _layer_norm(centred_readers=1)
    result = fuse_and_compare(prog, scope, "fuse_norm", outs)
    assert "layer_norm" not in op_types(result.program) and "rms_norm" not in op_types(result.program)


def test_an_unbiased_layer_norm_waits_for_the_bias_add():
    prog, scope, outs = _layer_norm()
    result = PassManager("fuse_norm", debug=True).run(prog, scope, fetch=outs)
    assert op_types(result.program)["layer_norm"] == 1 and "elementwise_add" not in op_types(result.program)
    reasons = [m.reason for m in result.records[0].near_misses]
    assert any("bias add reads it" in r for r in reasons) and any("is centred" in r for r in reasons)


def _residual(*, pre_norm=False, early_reader=False, stats=False, bias_shape=None, norm_type="layer_norm",
              begin=2):
    """layer_norm(x + y) (or rms_norm); ``pre_norm``: the sum is read again after it (the residual stream)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8])
        y = create_parameter("r", bias_shape) if bias_shape else layers.data("y", [2, 3, 8])
        total = _one("elementwise_add", {"X": x, "Y": y})
        early = _one("relu", {"X": total}) if early_reader else None
        affine = {"Scale": create_parameter("w", [8])}
        if norm_type == "layer_norm":
            affine["Bias"] = create_parameter("b", [8])
        norm = append_op(norm_type, {"X": total, **affine}, {"begin_norm_axis": begin, "epsilon": 1e-5},
                         outputs={"Y": 1, "Mean": 1, "Variance": 1} if stats else None)
        outs = [norm["Y"][0].name]
        if pre_norm:
            outs.append(_one("elementwise_add", {"X": total, "Y": norm["Y"][0]}).name)
        if early is not None:
            outs.append(early.name)
        if stats:
            outs.append(_one("relu", {"X": norm["Mean"][0]}).name)
    scope = halfway.init_scope(prog, seed=6)
    lively_params(scope, np.random.default_rng(6))
    return prog, scope, outs


@pytest.mark.parametrize("norm_type", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("pre_norm", [False, True])
def test_a_residual_add_and_its_norm_become_a_skip_norm(pre_norm, norm_type):
    prog, scope, outs = _residual(pre_norm=pre_norm, norm_type=norm_type)
    result = fuse_and_compare(prog, scope, "fuse_norm", outs)
    types = op_types(result.program)
    assert types[f"skip_{norm_type}"] == 1 and norm_type not in types
    (skip,) = [o for o in result.program.global_block().ops if o.type == f"skip_{norm_type}"]
    assert bool(skip.output("Sum")) == pre_norm and types["elementwise_add"] == int(pre_norm)
    assert skip.attr("begin_norm_axis") == 2 and skip.input("Scale")
    assert bool(skip.input("Bias")) == (norm_type == "layer_norm")


@pytest.mark.parametrize("kwargs, reason", [
    ({"early_reader": True}, "reads the sum before the norm"),
    ({"early_reader": True, "norm_type": "rms_norm"}, "reads the sum before the norm"),
    ({"stats": True}, "statistics"),
    ({"bias_shape": [8]}, "operands differ"),
    ({"norm_type": "rms_norm", "begin": 1}, "is not one value per normalised entry [3, 8]"),
])
def test_skip_norm_near_misses_say_why(kwargs, reason):
    prog, scope, outs = _residual(**kwargs)
    result = PassManager("fuse_norm", debug=True).run(prog, scope, fetch=outs)
    assert not {"skip_layer_norm", "skip_rms_norm"} & set(op_types(result.program))
    assert any(reason in m.reason for record in result.records for m in record.near_misses)


def _opset14_pre_norm_block() -> onnx.ModelProto:
    """s = a + b; y = LayerNorm(s) as exporters decompose it at opset 14; z = s + y."""
    rng = np.random.default_rng(7)
    consts = {"two": np.float32(2), "eps": np.float32(1e-5), "w": rng.standard_normal(8).astype(np.float32),
              "bias": rng.standard_normal(8).astype(np.float32)}
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("ReduceMean", ["s"], ["m"], axes=[-1]),
        helper.make_node("Sub", ["s", "m"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["r"]),
        helper.make_node("Div", ["d", "r"], ["n"]),
        helper.make_node("Mul", ["n", "w"], ["nw"]),
        helper.make_node("Add", ["nw", "bias"], ["y"]),
        helper.make_node("Add", ["s", "y"], ["z"]),
    ]
    io = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["batch", "seq", 8]) for n in "abyz"]
    graph = helper.make_graph(nodes, "pre_norm", io[:2], io[2:],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_an_opset_14_pre_norm_block_fuses_and_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = _opset14_pre_norm_block()
    program, feeds, fetches, scope = halfway.load(model)
    fused = PassManager().run(program, scope, fetch=fetches)
    assert op_types(fused.program)["skip_layer_norm"] == 1 and "layer_norm" not in op_types(fused.program)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(8)
    for shape in [(2, 3, 8), (1, 5, 8)]:
        inputs = {n: (rng.standard_normal(shape) * 2 + 1).astype(np.float32) for n in feeds}
        got = halfway.Executor().run(fused.program, inputs, fetches, fused.scope)
        for g, w in zip(got, session.run(fetches, inputs)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
