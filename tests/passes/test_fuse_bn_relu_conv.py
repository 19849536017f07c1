"""fuse_bn_relu_conv: batch_norm + relu before a 1x1 conv as one clamp, checked against the
unfused program on random feeds (and the clamp identity against numpy)."""

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.passes.fuse_bn_relu_conv import clamp_form
from tests.support.passcheck import fuse_and_compare, lively_params, op_types


def _preact(*, layout="NCHW", kernel=1, padding=0, stride=1, groups=1, bias=False, signs="positive",
            extra_reader=False):
    """x -> batch_norm -> relu -> conv2d; ``signs`` sets the batch_norm scales' signs."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 8, 6, 6] if layout == "NCHW" else [2, 6, 6, 8])
        bn = layers.batch_norm(x, data_layout=layout, epsilon=1e-3)
        act = layers.relu(bn)
        y = layers.conv2d(act, 6 if groups == 1 else 8, kernel, stride=stride, padding=padding, groups=groups,
                          bias_attr=bias, data_format=layout)
        outs = [y.name] + ([layers.sigmoid(act).name] if extra_reader else [])
    scope = halfway.init_scope(prog, seed=1)
    rng = np.random.default_rng(2)
    lively_params(scope, rng)
    scale = next(n for n in scope if "scale" in n or n.endswith("w_0") and scope[n].ndim == 1)
    gamma = scope[scale]
    if signs == "mixed":
        gamma[::3] *= -1
        gamma[1] = 0.0
    # shifts of both signs, so that the relu clamps some of every channel's values
    shift = next(n for n in scope if scope[n].ndim == 1 and n != scale and "mean" not in n and "var" not in n)
    scope[shift] = rng.uniform(-1.5, 1.5, scope[shift].shape).astype(np.float32)
    return prog, scope, outs


def test_clamp_form_is_the_relu_of_the_affine():
    rng = np.random.default_rng(0)
    s = np.array([2.0, -0.5, 0.0, 0.0, 1e-3, -3.0])
    t = np.array([0.3, 0.7, -1.0, 2.0, -0.2, -0.4])
    sign, floor, factor, offset = clamp_form(s, t)
    x = rng.uniform(-5, 5, (1000, 1)) * np.array([1, 1, 1, 1, 1000, 1])
    want = np.maximum(s * x + t, 0)
    np.testing.assert_allclose(factor * np.maximum(sign * x, floor) + offset, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("stride", [1, 2])
def test_folds_into_a_pointwise_conv(layout, bias, stride):
    prog, scope, outs = _preact(layout=layout, bias=bias, stride=stride)
    snapshot = {n: scope[n].copy() for n in scope}
    result = fuse_and_compare(prog, scope, "fuse_bn_relu_conv", outs)
    assert op_types(result.program) == {"elementwise_max": 1, "conv2d": 1, "elementwise_add": 1}
    assert set(scope) == set(snapshot) and all(np.array_equal(scope[n], v) for n, v in snapshot.items())
    halfway.verify(result.program)


def test_negative_and_zero_scales_flip_the_sign_first():
    prog, scope, outs = _preact(signs="mixed")
    result = fuse_and_compare(prog, scope, "fuse_bn_relu_conv", outs)
    assert op_types(result.program) == {"elementwise_mul": 1, "elementwise_max": 1, "conv2d": 1,
                                        "elementwise_add": 1}


def test_fuse_conv_act_takes_the_bias_next():
    prog, scope, outs = _preact(bias=True)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn,fuse_bn_relu_conv,fuse_conv_act", outs)
    assert op_types(result.program) == {"elementwise_max": 1, "fused_conv2d": 1}


@pytest.mark.parametrize("kind", [dict(kernel=3, padding=1), dict(kernel=1, padding=1), dict(groups=8),
                                  dict(extra_reader=True)])
def test_near_misses_are_left_alone(kind):
    prog, scope, outs = _preact(**kind)
    result = fuse_and_compare(prog, scope, "fuse_bn_relu_conv", outs)
    assert not result.modified and op_types(result.program)["batch_norm"] == 1
