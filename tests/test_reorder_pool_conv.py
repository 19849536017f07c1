"""reorder_pool_conv: an average pool before a narrowing 1x1 conv moves after it, with the same
outputs as the program as written (random feeds, random weights)."""

import numpy as np
import pytest

import halfway
from halfway import layers
from fusecheck import fuse_and_compare, lively_params, op_types


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
