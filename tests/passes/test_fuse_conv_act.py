import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import apply_act, create_parameter
from halfway.passes.fuse_conv_act import fused_activation
from tests.support.onnx_graph import Graph, check_passes
from tests.support.passcheck import ACTIVATIONS, fuse_and_compare, lively_params, op_types, random_cnn


def _conv_act(act, attrs=None, *, bias=True, groups=1, layout="NCHW", residual=False, extra_reader=False):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4, 6, 6] if layout == "NCHW" else [2, 6, 6, 4])
        y = layers.conv2d(x, 4, 3, padding=1, groups=groups, bias_attr=bias, data_format=layout)
        outs = [layers.sigmoid(y).name] if extra_reader else []
        if residual:
            y = layers.elementwise_add(x, y)
        y = apply_act(y, act, **(attrs or {})) if act else y
    scope = halfway.init_scope(prog, seed=5)
    lively_params(scope, np.random.default_rng(6))
    return prog, scope, [y.name] + outs


@pytest.mark.parametrize("act", list(ACTIVATIONS))
@pytest.mark.parametrize("groups, layout", [(1, "NCHW"), (4, "NCHW"), (1, "NHWC"), (4, "NHWC")])
def test_every_activation_fuses_into_one_op(act, groups, layout):
    prog, scope, outs = _conv_act(act, ACTIVATIONS[act], groups=groups, layout=layout)
    result = fuse_and_compare(prog, scope, "fuse_conv_act", outs)
    (fused,) = result.program.global_block().ops
    assert fused.type == "fused_conv2d" and fused.attr("fuse_activation") == act
    assert fused.input("Bias") and fused.attr("groups") == groups


@pytest.mark.parametrize("groups, layout", [(1, "NCHW"), (4, "NCHW"), (1, "NHWC")])
def test_silu_fuses_as_swish_at_beta_1(groups, layout):
    prog, scope, outs = _conv_act("silu", groups=groups, layout=layout)
    result = fuse_and_compare(prog, scope, "fuse_conv_act", outs)
    (fused,) = result.program.global_block().ops
    assert (fused.attr("fuse_activation"), fused.attr("fuse_alpha")) == ("swish", 1.0)


@pytest.mark.parametrize("act, attrs", [("relu", {}), ("leaky_relu", {"alpha": -0.3}), ("hard_swish", {})])
def test_conv_without_bias_and_with_residual(act, attrs):
    prog, scope, outs = _conv_act(act, attrs, bias=False, residual=True)
    result = fuse_and_compare(prog, scope, "fuse_conv_act", outs)
    (fused,) = result.program.global_block().ops
    assert fused.input("ResidualData") == ("x",) and not fused.input("Bias")


@pytest.mark.parametrize("act, attrs", [
    ("hard_swish", {"threshold": 5.0, "scale": 6.0}),  # the fused kernel clips at scale
    ("hard_swish", {"offset": 0.0}),
    ("swish", {"beta": 0.0}),
    ("tanh", {}),
])
def test_activations_the_kernel_cannot_compute_stay(act, attrs):
    prog, scope, outs = _conv_act(act, attrs)
    result = fuse_and_compare(prog, scope, "fuse_conv_act", outs)
    assert op_types(result.program) == {"fused_conv2d": 1, act: 1}


def test_intermediate_read_twice_or_fetched_is_kept():
    prog, scope, outs = _conv_act("relu", extra_reader=True)
    result = fuse_and_compare(prog, scope, "fuse_conv_act", outs)
    assert op_types(result.program) == {"fused_conv2d": 1, "relu": 1, "sigmoid": 1}
    prog, scope, outs = _conv_act("relu")
    block = prog.global_block()
    biased = next(o for o in block.ops if o.type == "elementwise_add").output("Out")[0]
    block.create_var("fetch", kind=halfway.VarKind.FETCH_LIST)
    block.append_op("fetch", {"X": biased}, {"Out": "fetch"}, {"col": 0})
    result = fuse_and_compare(prog, scope, "fuse_conv_act", outs + [biased])
    assert op_types(result.program) == {"fused_conv2d": 1, "relu": 1, "fetch": 1}


def test_paddle_style_4d_bias_becomes_a_vector():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 3, 5, 5])
        y = layers.conv2d(x, 4, 3, bias_attr=False)
        b = create_parameter("b", [1, 4, 1, 1])
        y = layers.relu(layers.elementwise_add(y, b, axis=-1))
    scope = halfway.init_scope(prog, seed=7)
    scope[b.name] = np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1)
    result = fuse_and_compare(prog, scope, "fuse_conv_act", [y.name])
    (fused,) = result.program.global_block().ops
    assert result.scope[fused.input("Bias")[0]].shape == (4,)


def test_wrong_bias_axis_is_not_a_channel_bias():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 4, 4, 4])
        y = layers.conv2d(x, 4, 1, bias_attr=False)
        b = create_parameter("b", [4])
        y = layers.elementwise_add(y, b, axis=-1)  # adds along W, not along channels
    scope = halfway.init_scope(prog, seed=8)
    lively_params(scope, np.random.default_rng(0))
    assert not fuse_and_compare(prog, scope, "fuse_conv_act", [y.name]).modified


def test_fused_activation_maps_attrs():
    prog, _, _ = _conv_act("hard_swish", {"threshold": 8.0, "scale": 8.0, "offset": 2.0})
    act = prog.global_block().ops[-1]
    assert fused_activation(act) == ("hard_swish", 1 / 8, 2 / 8)


@pytest.mark.parametrize("seed", range(8))
def test_random_cnns_keep_their_outputs(seed):
    prog, scope, outs = random_cnn(seed)
    fuse_and_compare(prog, scope, "fuse_conv_bn,fuse_conv_act", outs)


def test_two_input_sum_is_a_residual():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 4, 5, 5])
        y = layers.conv2d(x, 4, 3, padding=1)
        y = layers.relu(layers.sums([x, y]))
    scope = halfway.init_scope(prog, seed=3)
    lively_params(scope, np.random.default_rng(3))
    result = fuse_and_compare(prog, scope, "fuse_conv_act", [y.name])
    (fused,) = result.program.global_block().ops
    assert fused.input("ResidualData") == ("x",) and fused.attr("fuse_activation") == "relu"


def _onnx_conv(g: Graph, x: str, seed: int) -> str:
    """A 3x3 Conv of 4 channels with its bias, same-size output."""
    rng = np.random.default_rng(seed)
    w, b = g.const(rng.normal(0, 0.5, (4, 4, 3, 3)).astype(np.float32)), g.const(rng.normal(0, 0.5, 4).astype(np.float32))
    return g.node("Conv", x, w, b, pads=[1, 1, 1, 1])


ONNX_FEEDS = {"x": np.random.default_rng(4).normal(0, 3, (2, 4, 6, 6)).astype(np.float32)}


@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize("dims", [[2, 4, 6, 6], ["batch", 4, "h", "w"]])
def test_onnx_clip_0_6_after_a_conv_fuses_as_relu6(opset, dims):
    g = Graph()
    conv = _onnx_conv(g, g.input("x", np.float32, dims), 1)
    bounds = {"min": 0.0, "max": 6.0} if opset < 11 else {}
    y = g.node("Clip", conv, *(() if bounds else (g.const(np.float32(0)), g.const(np.float32(6)))), **bounds)
    program = check_passes(g.model([y], opset=opset), ONNX_FEEDS)
    (fused,) = [o for o in program.global_block().ops if o.type not in ("feed", "fetch")]
    assert (fused.type, fused.attr("fuse_activation"), fused.attr("fuse_beta")) == ("fused_conv2d", "relu6", 6.0)


def test_onnx_clip_from_another_bound_stays():
    g = Graph()
    conv = _onnx_conv(g, g.input("x", np.float32, [2, 4, 6, 6]), 1)
    y = g.node("Clip", conv, g.const(np.float32(-1)), g.const(np.float32(6)))
    assert op_types(check_passes(g.model([y]), ONNX_FEEDS)) == {"feed": 1, "fused_conv2d": 1, "clip": 1, "fetch": 1}


@pytest.mark.parametrize("dims", [[2, 4, 6, 6], ["batch", 4, 6, 6], ["batch", 4, "h", "w"]])
@pytest.mark.parametrize("residual_first", [False, True])
def test_onnx_residual_add_and_relu_after_a_conv_fuse(dims, residual_first):
    """A ResNet block's tail, x -> relu -> conv -> conv -> add(relu's output) -> relu, with a free
    batch (and image) dim: both convs and the add and relu after them are two fused_conv2d."""
    g = Graph()
    r = g.node("Relu", g.input("x", np.float32, dims))
    c = _onnx_conv(g, _onnx_conv(g, r, 2), 3)
    y = g.node("Relu", g.node("Add", *((r, c) if residual_first else (c, r))))
    program = check_passes(g.model([y]), ONNX_FEEDS)
    assert op_types(program) == {"feed": 1, "relu": 1, "fused_conv2d": 2, "fetch": 1}
    last = program.global_block().ops[-2]
    assert last.input("ResidualData") and last.attr("fuse_activation") == "relu"


def test_onnx_residual_of_another_shape_stays():
    g = Graph()
    x = g.input("x", np.float32, ["batch", 4, 6, 6])
    y = g.node("Relu", g.node("Add", _onnx_conv(g, x, 2), g.input("r", np.float32, ["other", 4, 6, 6])))
    feeds = ONNX_FEEDS | {"r": ONNX_FEEDS["x"][:1]}
    assert op_types(check_passes(g.model([y]), feeds))["elementwise_add"] == 1
