import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import apply_act, create_parameter
from halfway.passes.fuse_conv_act import fused_activation
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
