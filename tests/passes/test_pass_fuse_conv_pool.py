"""The ``fuse_conv_pool`` pass: a convolution and the pool of whole windows at their own stride
after it become one fused_conv2d_pool that computes the same values (numpy, and OpenCL after
``channels_last``); pools that overlap, pad or keep a partial window, and convolutions whose
output is read elsewhere, stay."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.passes import DEFAULT_PIPELINE, PassManager
from tests.support.passcheck import check_pass

RNG = np.random.default_rng(11)


def _program(side: int = 12, **pool: object) -> tuple[halfway.Program, halfway.Scope, str]:
    """conv -> relu -> pool(**pool) -> conv -> relu -> conv -> max pool 2x2 -> fc, fused by the
    default passes."""
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 8, side, side])
        y = layers.conv2d(x, num_filters=16, filter_size=3, padding=1, act="relu")
        y = layers.pool2d(y, **{"pool_size": 2, "pool_type": "max", "pool_stride": 2, **pool})
        y = layers.conv2d(y, num_filters=16, filter_size=3, padding=1, act="relu")
        y = layers.conv2d(y, num_filters=16, filter_size=3, padding=1)
        y = layers.pool2d(y, pool_size=2, pool_type="max", pool_stride=2)
        out = layers.fc(layers.flatten(y, 1, 3), size=5)
    program, scope = _fused(program, halfway.init_scope(program, seed=4))
    return program, scope, out.name


def _fused(program: halfway.Program, scope: halfway.Scope) -> tuple[halfway.Program, halfway.Scope]:
    """The default passes but dce (convolutions with their bias and activation fused)."""
    fused = PassManager(",".join(n for n in DEFAULT_PIPELINE.split(",") if n != "dce")).run(program, scope)
    return fused.program, fused.scope if fused.scope is not None else scope


def _feed(side: int = 12) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal((2, 8, side, side)).astype(np.float32)}


def _types(program: halfway.Program) -> list[str]:
    return [op.type for op in program.global_block().ops]


@pytest.mark.parametrize("side, pool", [(12, {}), (13, {}), (12, {"pool_type": "avg"}), (12, {"pool_size": 3, "pool_stride": 3})],
                         ids=["max", "odd-map", "avg", "3x3"])
def test_pools_of_whole_windows_join_their_convolution(side, pool):
    program, scope, out = _program(side, **pool)
    result = check_pass("fuse_conv_pool", program, scope, _feed(side), [out], rtol=1e-5, atol=1e-5)
    assert result.stats["rewrites"] == 2
    fused = [op for op in program.global_block().ops if op.type == "fused_conv2d_pool"]
    assert [op.attr("fuse_activation") for op in fused] == ["relu", ""]
    assert fused[0].attr("pool_type") == pool.get("pool_type", "max") and "pool2d" not in _types(program)


@pytest.mark.parametrize("pool", [{"pool_size": 3, "pool_stride": 2}, {"pool_padding": 1}, {"ceil_mode": True}],
                         ids=["overlapping", "padded", "ceil"])
def test_other_pools_stay(pool):
    program, scope, out = _program(13, **pool)
    result = check_pass("fuse_conv_pool", program, scope, _feed(13), [out], rtol=1e-5, atol=1e-5)
    assert result.stats["rewrites"] == 1  # only the second pair
    assert _types(program).count("pool2d") == 1


def test_a_convolution_whose_output_is_read_elsewhere_stays():
    program = halfway.Program()
    with halfway.program_guard(program):
        y = layers.conv2d(layers.data("x", [2, 8, 12, 12]), num_filters=8, filter_size=3, padding=1, act="relu")
        pooled, other = layers.pool2d(y, pool_size=2, pool_type="max", pool_stride=2), layers.sigmoid(y)
    program, scope = _fused(program, halfway.init_scope(program, seed=1))
    result = check_pass("fuse_conv_pool", program, scope, _feed(), [pooled.name, other.name])
    assert not result.modified


def test_a_residual_convolution_stays():
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 8, 12, 12])
        y = layers.conv2d(x, num_filters=8, filter_size=3, padding=1)
        y = layers.pool2d(layers.elementwise_add(y, x), pool_size=2, pool_type="max", pool_stride=2)
    program, scope = _fused(program, halfway.init_scope(program, seed=1))
    assert any(op.input("ResidualData") for op in program.global_block().ops if op.type == "fused_conv2d")
    result = check_pass("fuse_conv_pool", program, scope, _feed(), [y.name])
    assert not result.modified


@pytest.mark.opencl
@pytest.mark.parametrize("float16", [False, True], ids=["float32", "float16"])
def test_after_channels_last_on_opencl(float16):
    """NHWC, as channels_last leaves it (the epilogue pools on tensor cores), against the unfused
    NCHW program on numpy."""
    from halfway.executor import Executor, OpenCLPlace

    program, scope, out = _program()
    feed = _feed()
    want = Executor().prepare(program.clone(), ["x"], [out], scope).run(feed)[0]
    moved = PassManager("channels_last,fuse_conv_pool").run(program, scope, fetch=[out])
    program, scope = moved.program, moved.scope
    assert [(op.type, op.attr("data_format")) for op in program.global_block().ops
            if op.type.startswith("fused_conv2d")] == [("fused_conv2d_pool", "NHWC"), ("fused_conv2d", "NHWC"),
                                                        ("fused_conv2d_pool", "NHWC")]
    if float16:
        program, _ = halfway.float16_transpile(program, scope)
    prepared = Executor(OpenCLPlace(strict=True)).prepare(program, ["x"], [out], scope)
    got = prepared.run(feed)[0]
    assert prepared.report.fallbacks == []
    tol = 2e-2 if float16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol * np.abs(want).max())
