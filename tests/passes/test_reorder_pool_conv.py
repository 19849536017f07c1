"""reorder_pool_conv: an average pool before a narrowing 1x1 conv moves after it, with the same
outputs as the program as written (random feeds, random weights)."""

import numpy as np
import pytest

import halfway
from halfway import layers
from tests.support.passcheck import fuse_and_compare, lively_params, op_types


def _pool_conv(*, layout="NCHW", pool_type="avg", exclusive=True, stride=1, padding=1, kernel=1, filters=3,
               groups=1, act="relu"):
    """x [8 channels] -> pool2d 3x3 -> conv2d (+ bias, act)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 8, 7, 7] if layout == "NCHW" else [2, 7, 7, 8])
        pooled = layers.pool2d(x, pool_size=3, pool_type=pool_type, pool_stride=stride, pool_padding=padding,
                               exclusive=exclusive, data_format=layout)
        y = layers.conv2d(pooled, filters, kernel, groups=groups, padding=kernel // 2, act=act, data_format=layout)
    scope = halfway.init_scope(prog, seed=1)
    lively_params(scope, np.random.default_rng(2))
    return prog, scope, [y.name]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("act", ["relu", None])
def test_the_pool_moves_after_the_conv(layout, exclusive, act):
    prog, scope, outs = _pool_conv(layout=layout, exclusive=exclusive, act=act)
    result = fuse_and_compare(prog, scope, "reorder_pool_conv", outs)
    ops = [op.type for op in result.program.global_block().ops]
    assert ops.index("conv2d") < ops.index("pool2d") < ops.index("elementwise_add")
    conv = next(op for op in result.program.global_block().ops if op.type == "conv2d")
    assert result.program.global_block().var(conv.output("Output")[0]).shape[1 if layout == "NCHW" else 3] == 3
    halfway.verify(result.program)


@pytest.mark.parametrize("kind", [dict(pool_type="max"), dict(stride=2), dict(padding=0), dict(kernel=3),
                                  dict(filters=8), dict(filters=4, groups=2)])
def test_near_misses_are_left_alone(kind):
    prog, scope, outs = _pool_conv(**kind)
    result = fuse_and_compare(prog, scope, "reorder_pool_conv", outs)
    assert not result.modified and op_types(result.program)["pool2d"] == 1


def _conv_pool(*, layout="NCHW", pool_type="avg", pool_size=2, stride=2, padding=0, ceil_mode=False, bias=True,
               kernel=1, size=8):
    """x [6 channels] -> conv2d (+ bias) -> pool2d."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 6, size, size] if layout == "NCHW" else [2, size, size, 6])
        conv = layers.conv2d(x, 4, kernel, padding=kernel // 2, bias_attr=bias, data_format=layout)
        y = layers.pool2d(conv, pool_size=pool_size, pool_type=pool_type, pool_stride=stride, pool_padding=padding,
                          ceil_mode=ceil_mode, exclusive=False, data_format=layout)
    scope = halfway.init_scope(prog, seed=3)
    lively_params(scope, np.random.default_rng(4))
    return prog, scope, [y.name]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("pool_size, stride", [(2, 2), (3, 2), (2, 1)])
def test_a_shrinking_pool_moves_before_the_conv(layout, bias, pool_size, stride):
    prog, scope, outs = _conv_pool(layout=layout, bias=bias, pool_size=pool_size, stride=stride)
    result = fuse_and_compare(prog, scope, "reorder_pool_conv", outs)
    ops = [op.type for op in result.program.global_block().ops]
    assert ops == ["pool2d", "conv2d"] + (["elementwise_add"] if bias else [])
    block = result.program.global_block()
    conv = next(op for op in block.ops if op.type == "conv2d")
    pooled, out = block.var(conv.input("Input")[0]).shape, block.var(outs[0]).shape
    spatial = slice(2, 4) if layout == "NCHW" else slice(1, 3)
    assert tuple(pooled[spatial]) == tuple(out[spatial]) and tuple(pooled[spatial]) < (8, 8)
    halfway.verify(result.program)


@pytest.mark.parametrize("kind", [dict(pool_type="max"), dict(padding=1), dict(size=9, ceil_mode=True),
                                  dict(kernel=3)])
def test_pools_that_read_padding_or_do_not_commute_stay_after(kind):
    prog, scope, outs = _conv_pool(**kind)
    result = fuse_and_compare(prog, scope, "reorder_pool_conv", outs)
    assert not result.modified
