"""The ``channels_last`` pass: groups of convolutions and pools move to NHWC with transposes at
their edges, keep every fetched value (numpy and OpenCL, float32 and float16), and groups that
would need as many transposes as they save copies stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.passes import DEFAULT_PIPELINE, PassManager
from tests.support.passcheck import check_pass

RNG = np.random.default_rng(7)


def _vgg_like(channels: int = 3, shortcut: bool = False) -> tuple[halfway.Program, halfway.Scope, str, list[str]]:
    """conv (C -> 8) -> conv 8 -> 16 -> conv -> pool -> conv -> conv -> pool -> fc; with
    ``shortcut`` the third conv adds the second's output."""
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, channels, 12, 12])
        y = layers.conv2d(x, num_filters=8, filter_size=3, padding=1, act="relu")
        y = layers.conv2d(y, num_filters=16, filter_size=3, padding=1, act="relu")
        z = layers.conv2d(y, num_filters=16, filter_size=3, padding=1)
        z = layers.relu(layers.elementwise_add(z, y)) if shortcut else layers.relu(z)
        z = layers.pool2d(z, pool_size=2, pool_type="max", pool_stride=2)
        z = layers.conv2d(z, num_filters=16, filter_size=3, padding=1, act="relu")
        z = layers.conv2d(z, num_filters=16, filter_size=1, act="relu")
        z = layers.pool2d(z, pool_size=2, pool_type="avg", pool_stride=2)
        out = layers.fc(layers.flatten(z, 1, 3), size=5)
    return (*_fused(program, halfway.init_scope(program, seed=3)), out.name, ["x"])


def _fused(program: halfway.Program, scope: halfway.Scope) -> tuple[halfway.Program, halfway.Scope]:
    """The default passes but dce (convolutions with their bias and activation fused)."""
    fused = PassManager(",".join(n for n in DEFAULT_PIPELINE.split(",") if n != "dce")).run(program, scope)
    return fused.program, fused.scope if fused.scope is not None else scope


def _feed(channels: int = 3) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal((2, channels, 12, 12)).astype(np.float32)}


def _layouts(program: halfway.Program) -> list[tuple[str, str]]:
    return [(op.type, op.attr("data_format")) for op in program.global_block().ops
            if op.type in ("conv2d", "fused_conv2d", "pool2d")]


@pytest.mark.parametrize("shortcut", [False, True], ids=["chain", "residual"])
def test_a_chain_moves_to_nhwc_with_a_transpose_at_each_edge(shortcut):
    program, scope, out, _ = _vgg_like(shortcut=shortcut)
    result = check_pass("channels_last", program, scope, _feed(), [out], rtol=1e-5, atol=1e-5, fetch_names=[out])
    assert result.stats == {"groups": 1, "convs": 5, "pools": 2, "transposes": 1, "reshapes": 0, "folded_into_fc": 1}
    assert {layout for _, layout in _layouts(program)} == {"NHWC"}  # the stem's 3 channels included
    ops = program.global_block().ops
    transposes = [op for op in ops if op.type == "transpose2"]
    assert [list(op.attr("axis")) for op in transposes] == [[0, 2, 3, 1]] and transposes[0].input("X") == ("x",)
    last_pool, flatten, fc = [op for op in ops if op.type in ("pool2d", "flatten_contiguous_range", "fc")][-3:]
    assert flatten.input("X") == last_pool.output("Out")  # the fc's weight rows in NHWC order instead
    assert program.global_block().var(last_pool.output("Out")[0]).shape == (2, 3, 3, 16)
    assert ".nhwc" in fc.input("W")[0]
    if shortcut:
        residual = next(op for op in ops if op.input("ResidualData"))
        assert residual.attr("data_format") == "NHWC"


def test_an_edge_of_unit_dims_is_a_reshape():
    """A global pool's [N, 1, 1, C] goes back to NCHW by a reshape2, which moves no data."""
    program = halfway.Program()
    with halfway.program_guard(program):
        y = layers.data("x", [2, 8, 12, 12])
        for _ in range(3):
            y = layers.conv2d(y, num_filters=8, filter_size=3, padding=1, act="relu")
        out = layers.fc(layers.flatten(layers.pool2d(y, pool_type="avg", global_pooling=True), 1, 3), size=5)
    program, scope = _fused(program, halfway.init_scope(program, seed=2))
    result = check_pass("channels_last", program, scope, _feed(8), [out.name], rtol=1e-5, atol=1e-5,
                        fetch_names=[out.name])
    assert result.stats["transposes"] == 1 and result.stats["reshapes"] == 1 and result.stats["folded_into_fc"] == 0
    reshape = next(op for op in program.global_block().ops if op.type == "reshape2" and "nhwc" in op.input("X")[0])
    assert list(reshape.attr("shape")) == [0, 8, 1, 1]


def test_fetched_members_keep_their_nchw_values():
    program, scope, out, _ = _vgg_like()
    middle = [op for op in program.global_block().ops if op.type == "pool2d"][0].output("Out")[0]
    result = check_pass("channels_last", program, scope, _feed(), [out, middle], rtol=1e-5, atol=1e-5,
                        fetch_names=[out, middle])
    assert result.stats["transposes"] == 2 and result.stats["folded_into_fc"] == 1  # the fetched pool's
    assert program.global_block().var(middle).shape == (2, 16, 6, 6)


def test_convolutions_of_ragged_channels_stay_nchw():
    """12 channels are neither whole 16-byte chunks nor a stem's few: that conv stays NCHW, and
    the group after it starts over with a transpose."""
    program, scope, out, _ = _vgg_like(channels=12)
    check_pass("channels_last", program, scope, _feed(12), [out], rtol=1e-5, atol=1e-5, fetch_names=[out])
    layouts = _layouts(program)
    assert layouts[0] == ("fused_conv2d", "NCHW") and {layout for _, layout in layouts[1:]} == {"NHWC"}


def test_a_transpose_read_by_more_than_the_classifier_stays():
    """The transpose back to NCHW before the flatten is fetched too: it stays, the fc's weight too."""
    program, scope, out, _ = _vgg_like()
    ops = program.global_block().ops
    moved = [op for op in ops if op.type == "pool2d"][-1].output("Out")[0]
    result = check_pass("channels_last", program, scope, _feed(), [out, moved], rtol=1e-5, atol=1e-5,
                        fetch_names=[out, moved])
    assert result.stats["folded_into_fc"] == 0 and result.stats["transposes"] == 2


def test_groups_with_as_many_edges_as_convolutions_stay():
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 8, 12, 12])
        y = layers.pool2d(layers.conv2d(x, num_filters=8, filter_size=3, padding=1), pool_size=2, pool_stride=2)
        out = layers.fc(layers.flatten(y, 1, 3), size=5)
    scope = halfway.init_scope(program, seed=1)
    before = program.to_bytes()
    result = check_pass("channels_last", program, scope, _feed(8), [out.name], fetch_names=[out.name])
    assert not result.modified and program.to_bytes() == before


@pytest.mark.opencl
@pytest.mark.parametrize("float16", [False, True], ids=["float32", "float16"])
def test_nhwc_program_runs_on_opencl_without_fallbacks(float16):
    from halfway.executor import Executor, OpenCLPlace

    program, scope, out, feeds = _vgg_like(channels=8, shortcut=True)
    feed = _feed(8)
    want = Executor().prepare(program.clone(), feeds, [out], scope).run(feed)[0]
    moved = PassManager("channels_last").run(program, scope, fetch=[out])
    program, scope = moved.program, moved.scope  # the fc's reordered weight is a new parameter
    assert _layouts(program)[0] == ("fused_conv2d", "NHWC")  # 8 channels: the whole net
    if float16:
        program, _ = halfway.float16_transpile(program, scope)
    prepared = Executor(OpenCLPlace(strict=True)).prepare(program, feeds, [out], scope)
    got = prepared.run(feed)[0]
    assert prepared.report.fallbacks == []
    tol = 2e-2 if float16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol * np.abs(want).max())
