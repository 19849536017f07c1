from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor
from halfway.ir.builder import apply_act, create_parameter
from halfway.passes import PassManager
from tests.support.passcheck import fuse_and_compare, lively_params, op_types, random_cnn

FIXTURES = Path(__file__).parent.parent / "fixtures" / "paddle"


def _linear(rank=2, flatten=None, act=None, attrs=None, transpose_y=False, transpose_x=False, extra_reader=False,
            bias_first=False):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", ([3, 4, 6][-rank:] if rank <= 3 else [2, 3, 2, 6]) if not transpose_x else [6, 4])
        if flatten is None:
            w = create_parameter("w", [7, 6] if transpose_y else [6, 7])
            h = layers.matmul(x, w, transpose_x=transpose_x, transpose_y=transpose_y)
        else:
            w = create_parameter("w", [int(np.prod(x.shape[flatten:])), 7])
            h = layers.mul(x, w, x_num_col_dims=flatten)
        b = create_parameter("b", [7])
        y = layers.elementwise_add(b, h) if bias_first else layers.elementwise_add(h, b)
        outs = [layers.sigmoid(y).name] if extra_reader else []
        y = apply_act(y, act, **(attrs or {})) if act else y
    scope = halfway.init_scope(prog, seed=9)
    lively_params(scope, np.random.default_rng(10))
    return prog, scope, [y.name] + outs


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("act", [None, "relu", "sigmoid", "relu6", "swish", "hard_swish"])
def test_matmul_bias_act_becomes_fc(rank, act):
    prog, scope, outs = _linear(rank, act=act)
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    (fc,) = result.program.global_block().ops
    assert fc.type == "fc" and fc.attr("activation_type") == (act or "") and fc.attr("in_num_col_dims") == rank - 1


@pytest.mark.parametrize("rank", [2, 3])
def test_bias_plus_matmul_becomes_fc(rank):
    prog, scope, outs = _linear(rank, act="relu", bias_first=True)
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    (fc,) = result.program.global_block().ops
    assert fc.type == "fc" and fc.attr("activation_type") == "relu" and fc.attr("in_num_col_dims") == rank - 1


def test_transposed_weight_becomes_a_new_parameter():
    prog, scope, outs = _linear(transpose_y=True, act="relu")
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    (fc,) = result.program.global_block().ops
    w = fc.input("W")[0]
    assert w not in scope and np.array_equal(result.scope[w], scope["w_0"].T)


@pytest.mark.parametrize("flatten", [1, 2, 3])
def test_mul_bias_becomes_fc(flatten):
    prog, scope, outs = _linear(rank=4, flatten=flatten, act="relu")
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    (fc,) = result.program.global_block().ops
    assert fc.attr("in_num_col_dims") == flatten and fc.attr("activation_type") == "relu"


@pytest.mark.parametrize("case, kwargs", [
    ("transposed input", {"transpose_x": True}),
    ("activation with other attrs", {"act": "relu6", "attrs": {"threshold": 3.0}}),
    ("two consumers", {"act": "relu", "extra_reader": True}),
])
def test_near_misses(case, kwargs):
    prog, scope, outs = _linear(**kwargs)
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    if case == "transposed input":
        assert not result.modified
    else:
        assert op_types(result.program)["fc"] == 1 and op_types(result.program)[kwargs["act"]] == 1


def test_bias_on_rows_is_not_fused():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [7, 6])
        h = layers.matmul(x, create_parameter("w", [6, 7]))
        y = layers.elementwise_add(h, create_parameter("b", [7]), axis=0)
    scope = halfway.init_scope(prog, seed=1)
    lively_params(scope, np.random.default_rng(1))
    assert not fuse_and_compare(prog, scope, "fuse_fc", [y.name]).modified


@pytest.mark.parametrize("seed", range(6))
def test_random_cnns_keep_their_outputs(seed):
    prog, scope, outs = random_cnn(seed)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn,fuse_conv_act,fuse_fc", outs)
    assert op_types(result.program)["fc"] == 2


def test_paddle_resnet_fused_matches_paddle():
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    result = PassManager("fuse_conv_bn,fuse_conv_act,fuse_fc", debug=True).run(program, scope)
    types = op_types(result.program)
    assert types["fc"] == 1 and types["fused_conv2d"] == 3 and "matmul_v2" not in types
    got = Executor().run(result.program, {n: io[n] for n in feeds}, fetches, result.scope)
    np.testing.assert_allclose(got[0], io[fetches[0]], rtol=1e-5, atol=1e-6)


def test_an_activation_the_fc_cannot_compute_is_a_near_miss_with_its_reason():
    prog, scope, outs = _linear(act="relu6", attrs={"threshold": 3.0})
    result = PassManager("fuse_fc", debug=True).run(prog, scope, fetch=outs)
    assert [op.type for op in result.program.global_block().ops if op.type != "fetch"] == ["fc", "relu6"]
    (record,) = result.records
    assert [(m.rule, m.root.split("(")[0], m.reason) for m in record.near_misses] == [
        ("fc + activation -> fc", "relu6", "fc computes relu6 only with {'threshold': 6.0}")]


@pytest.mark.parametrize("axis, width, fused", [(-1, 7, True), (2, 7, True), (1, 4, False)])
def test_bias_before_the_product_becomes_fc(axis, width, fused):
    """TorchScript writes Linear as Add(bias, MatMul): the bias may be the add's first operand."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [3, 4, 6])
        h = layers.matmul(x, create_parameter("w", [6, 7]))
        y = layers.elementwise_add(create_parameter("b", [width]), h, axis=axis)
    scope = halfway.init_scope(prog, seed=3)
    lively_params(scope, np.random.default_rng(3))
    if not fused:
        result = PassManager("fuse_fc", debug=True).run(prog, scope, fetch=[y.name])
        assert "fc" not in op_types(result.program)
        assert "is not a bias on the last dim" in result.records[0].near_misses[0].reason
        return
    result = fuse_and_compare(prog, scope, "fuse_fc", [y.name])
    (fc,) = result.program.global_block().ops
    assert fc.type == "fc" and fc.attr("in_num_col_dims") == 2


def _scaled_linear(scale_shape, scale_first=False, act=None, axis=-1):
    """matmul + bias [+ act] followed by a multiply by a parameter of ``scale_shape``."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 6])
        h = layers.elementwise_add(layers.matmul(x, create_parameter("w", [6, 7])), create_parameter("b", [7]))
        h = apply_act(h, act) if act else h
        c = create_parameter("c", scale_shape)
        y = layers.elementwise_mul(c, h, axis=axis) if scale_first else layers.elementwise_mul(h, c, axis=axis)
    scope = halfway.init_scope(prog, seed=3)
    lively_params(scope, np.random.default_rng(4))
    return prog, scope, [y.name]


@pytest.mark.parametrize("scale_shape", [[7], [1, 7], [1, 1, 7]])
@pytest.mark.parametrize("scale_first", [False, True])
def test_a_per_column_scale_folds_into_the_fc(scale_shape, scale_first):
    """ConvNeXt's layer scale: fc(x) * gamma -> one fc with W * gamma and Bias * gamma, new
    parameters; the caller's are unchanged."""
    prog, scope, outs = _scaled_linear(scale_shape, scale_first)
    before = {name: scope[name].copy() for name in scope}
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    (fc,) = result.program.global_block().ops
    gamma = scope["c_0"].reshape(-1).astype(np.float64)
    np.testing.assert_allclose(result.scope[fc.input("W")[0]], scope["w_0"] * gamma, rtol=1e-6)
    np.testing.assert_allclose(result.scope[fc.input("Bias")[0]], scope["b_0"] * gamma, rtol=1e-6)
    assert all(np.array_equal(scope[name], value) for name, value in before.items())


@pytest.mark.parametrize("case, kwargs", [
    ("after an activation", {"scale_shape": [7], "act": "relu"}),
    ("per row", {"scale_shape": [3, 1]}),
    ("per element", {"scale_shape": [2, 3, 7]}),
])
def test_scales_that_do_not_fold(case, kwargs):
    prog, scope, outs = _scaled_linear(**kwargs)
    result = fuse_and_compare(prog, scope, "fuse_fc", outs)
    assert op_types(result.program)["elementwise_mul"] == 1, case


def _residual_block(act=None, broadcast=False, residual_first=False):
    """fc(x) (+ an activation) + r, x [-1, 4, 6] and r computed from x, of the output's dims (or a
    [1, 4, 7] parameter broadcasting)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [-1, 4, 6])
        r = create_parameter("r", [1, 4, 7]) if broadcast else layers.tanh(layers.matmul(x, create_parameter("v", [6, 7])))
        y = layers.elementwise_add(layers.matmul(x, create_parameter("w", [6, 7])), create_parameter("b", [7]))
        y = apply_act(y, act) if act else y
        out = layers.elementwise_add(r, y) if residual_first else layers.elementwise_add(y, r)
    scope = halfway.init_scope(prog, seed=9)
    lively_params(scope, np.random.default_rng(10))
    rng = np.random.default_rng(2)
    return prog, scope, [out.name], {"x": rng.standard_normal((3, 4, 6)).astype(np.float32)}


@pytest.mark.parametrize("residual_first", [False, True])
def test_a_residual_add_after_an_fc_goes_into_its_epilogue(residual_first):
    prog, scope, outs, feed = _residual_block(residual_first=residual_first)
    result = fuse_and_compare(prog, scope, "fuse_fc,fuse_residual", outs, feed=feed)
    fc = result.program.global_block().ops[-1]
    assert fc.type == "fc" and fc.input("ResidualData") and "elementwise_add" not in op_types(result.program)


@pytest.mark.parametrize("kwargs, reason", [
    ({"act": "relu"}, "has a residual or an activation"),
    ({"broadcast": True}, "is not of the fc's output dims"),
])
def test_residuals_that_stay_say_why(kwargs, reason):
    prog, scope, outs, feed = _residual_block(**kwargs)
    result = PassManager("fuse_fc,fuse_residual", debug=True).run(prog, scope, fetch=outs)
    assert op_types(result.program)["elementwise_add"] == 1
    assert any(reason in m.reason for r in result.records for m in r.near_misses)
