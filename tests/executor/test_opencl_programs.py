"""Whole programs on an OpenCL place against the numpy executor (and Paddle's own outputs): a
builder CNN as built, fused by the passes and in float16; the Paddle resnet_tiny fixture; plus the
OpenCL prepared program's contract — numpy fallbacks listed (or refused with strict=True),
float16 fetched as float16, precision="high", one compile per kernel variant."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import halfway
import halfway.frontends.onnx
from halfway import layers
from halfway.executor import Executor, OpenCLPlace
from halfway.ir.dtypes import DType
from halfway.ir.errors import FeedError, KernelNotFoundError
from halfway.passes import PassManager

pytestmark = pytest.mark.opencl

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
RNG = np.random.default_rng(3)


@pytest.fixture(scope="session")
def place() -> OpenCLPlace:
    return OpenCLPlace()


def small_cnn() -> tuple[halfway.Program, halfway.Scope, str]:
    """conv-bn-relu, depthwise conv, pools, a residual add, reshape, fc and softmax."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 15, 13])
        y = layers.conv2d(x, num_filters=8, filter_size=3, padding=1, bias_attr=False)
        y = layers.batch_norm(y, act="relu")
        z = layers.conv2d(y, num_filters=8, filter_size=3, padding=1, groups=8, act="relu6")
        y = layers.elementwise_add(y, z)
        y = layers.pool2d(y, pool_size=3, pool_type="max", pool_stride=2, pool_padding=1)
        y = layers.conv2d(y, num_filters=12, filter_size=1, act="sigmoid")
        y = layers.pool2d(y, pool_type="avg", global_pooling=True)
        y = layers.reshape(y, [2, 12])
        y = layers.softmax(layers.fc(y, size=5, act="relu"))
    scope = halfway.init_scope(prog, seed=1)
    return prog, scope, y.name


def run_both(place, prog, scope, fetch, feed):
    cpu = Executor().run(prog, feed, [fetch], scope)[0]
    shapes = {k: v.shape for k, v in feed.items()}
    prepared = Executor(place).prepare(prog, list(feed), [fetch], scope, feed_shapes=shapes)
    return prepared.run(feed)[0], cpu, prepared.report


def test_builder_cnn_float32(place):
    prog, scope, fetch = small_cnn()
    feed = {"x": RNG.standard_normal((2, 3, 15, 13)).astype(np.float32)}
    got, want, report = run_both(place, prog, scope, fetch, feed)
    assert report.fallbacks == [], report.summary()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fused_program(place):
    prog, scope, fetch = small_cnn()
    result = PassManager("fuse_conv_bn,fuse_conv_act,fuse_fc").run(prog, scope)
    fused = result.program
    types = {op.type for op in fused.global_block().ops}
    assert "fused_conv2d" in types or "fc" in types, types
    feed = {"x": RNG.standard_normal((2, 3, 15, 13)).astype(np.float32)}
    got, want, report = run_both(place, fused, result.scope if result.scope is not None else scope, fetch, feed)
    assert report.fallbacks == [], report.summary()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def float16_cnn() -> tuple[halfway.Program, halfway.Scope, str]:
    """``small_cnn`` with every float32 var float16, but for batch_norm's statistics (what the
    float16 transpiler produces, with the casts at the edges left out)."""
    prog, scope, fetch = small_cnn()
    stats = {n for op in prog.global_block().ops if op.type == "batch_norm"
             for slot in ("Scale", "Bias", "Mean", "Variance", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance")
             for n in op.output(slot) + op.input(slot)}
    for var in prog.global_block().vars.values():
        if var.dtype is DType.float32 and var.name not in stats:
            var.dtype = DType.float16
    scope16 = halfway.Scope()
    for name in scope:
        scope16[name] = scope[name] if name in stats else scope[name].astype(np.float16)
    return prog, scope16, fetch


def test_builder_cnn_float16_storage(place):
    prog, scope, fetch = float16_cnn()
    feed = {"x": RNG.standard_normal((2, 3, 15, 13)).astype(np.float16)}
    got, want, report = run_both(place, prog, scope, fetch, feed)
    assert report.fallbacks == [], report.summary()
    assert report.float16_mode == place.runtime.mode.value
    assert got.dtype == np.float16 and {key.dtype.name for _, _, key in report.kernels} == {"float16"}
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=5e-3, atol=5e-3)


def test_precision_high_runs_float16_programs_with_float32_buffers():
    prog, scope, fetch = float16_cnn()
    place = OpenCLPlace(precision="high")
    feed = {"x": RNG.standard_normal((2, 3, 15, 13)).astype(np.float16)}
    prepared = Executor(place).prepare(prog, ["x"], [fetch], scope)
    assert prepared.report.float16_mode == "high"
    got = prepared.run(feed)[0]
    assert got.dtype == np.float16
    # float32 buffers: the planned activation bytes are those of the float32 program
    prog32, scope32, fetch32 = small_cnn()
    plan32 = Executor(OpenCLPlace()).prepare(prog32, ["x"], [fetch32], scope32).report.memory
    assert prepared.report.memory.no_reuse_bytes == plan32.no_reuse_bytes
    want = Executor().run(prog32, {"x": feed["x"].astype(np.float32)}, [fetch32], scope32)[0]
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=2e-3)


def test_float16_buffers_take_half_the_bytes(place):
    prog16, scope16, fetch16 = float16_cnn()
    prog32, scope32, fetch32 = small_cnn()
    m16 = Executor(place).prepare(prog16, ["x"], [fetch16], scope16).report.memory
    m32 = Executor(place).prepare(prog32, ["x"], [fetch32], scope32).report.memory
    assert 2 * m16.peak_bytes == m32.peak_bytes  # (batch_norm statistics stay float32 in both)
    assert 0 < m32.peak_bytes < m32.no_reuse_bytes


def test_paddle_resnet_tiny_matches_paddle(place):
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    prepared = Executor(place).prepare(program, feeds, fetches, scope)
    got = prepared.run({n: io[n] for n in feeds})
    for fetch, value in zip(fetches, got):
        np.testing.assert_allclose(value, io[fetch], rtol=1e-4, atol=1e-5)
    assert prepared.report.fallbacks == [], prepared.report.summary()


def _mean_program() -> tuple[halfway.Program, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 6, 5, 4])
        y = layers.relu(layers.mean(layers.relu(x)))  # mean: no OpenCL kernel
    return prog, y.name


def test_ops_without_a_kernel_fall_back_to_numpy(place):
    prog, fetch = _mean_program()
    feed = {"x": RNG.standard_normal((1, 6, 5, 4)).astype(np.float32)}
    got, want, report = run_both(place, prog, halfway.Scope(), fetch, feed)
    assert [op_type for _, op_type, _ in report.fallbacks] == ["mean"]
    assert "mean -> numpy" in report.summary()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_strict_place_refuses_fallbacks():
    prog, fetch = _mean_program()
    with pytest.raises(KernelNotFoundError, match="strict place opencl.*op #1 mean"):
        Executor(OpenCLPlace(strict=True)).prepare(prog, ["x"], [fetch], halfway.Scope())


def test_feed_checks_and_repeated_runs(place):
    prog, scope, fetch = small_cnn()
    prepared = Executor(place).prepare(prog, ["x"], [fetch], scope)
    with pytest.raises(FeedError, match="dtype"):
        prepared.run({"x": np.zeros((2, 3, 15, 13), np.float16)})
    with pytest.raises(FeedError, match="unknown feed"):
        prepared.run({"x": np.zeros((2, 3, 15, 13), np.float32), "y": np.zeros(1)})
    a, b = (RNG.standard_normal((2, 3, 15, 13)).astype(np.float32) for _ in range(2))
    first, second, again = (prepared.run({"x": v})[0] for v in (a, b, a))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)


def test_one_program_runs_from_several_threads_as_it_runs_alone(place):
    """Runs from several threads take turns on the program's device buffers: each thread gets its
    own feed's outputs, as a run alone gives them."""
    prog, scope, fetch = small_cnn()
    prepared = Executor(place).prepare(prog, ["x"], [fetch], scope)
    feeds = [np.random.default_rng(seed).standard_normal((2, 3, 15, 13)).astype(np.float32) for seed in range(8)]
    alone = [prepared.run({"x": x})[0] for x in feeds]

    def runs(index: int) -> list[np.ndarray]:
        return [prepared.run({"x": feeds[index]})[0] for _ in range(12)]

    with ThreadPoolExecutor(4) as pool:
        for index, got in enumerate(pool.map(runs, range(len(feeds)))):
            for value in got:
                np.testing.assert_array_equal(value, alone[index])


def test_profile_times_every_op(place):
    prog, scope, fetch = small_cnn()
    prepared = Executor(place).prepare(prog, ["x"], [fetch], scope)
    times = prepared.profile({"x": RNG.standard_normal((2, 3, 15, 13)).astype(np.float32)})
    assert len(times) == len(prepared.report.kernels) and all(t >= 0 for _, t in times)
    assert times[0][0].startswith("op #0 conv2d")


def test_profile_counts_the_device_time_of_each_op(place):
    """An op's seconds are the device's own (profiling events), so a convolution of 16 times the
    pixels takes longer, and none of the host's launch and wait is counted for it."""
    def conv_seconds(side: int) -> float:
        prog = halfway.Program()
        with halfway.program_guard(prog):
            y = layers.conv2d(layers.data("x", [1, 8, side, side]), num_filters=16, filter_size=3, padding=1)
        prepared = Executor(place).prepare(prog, ["x"], [y.name], halfway.init_scope(prog, seed=0))
        assert all(step.timed is not None for step in prepared._steps)
        feed = {"x": RNG.standard_normal((1, 8, side, side)).astype(np.float32)}
        return min(prepared.profile(feed)[0][1] for _ in range(3))

    small, large = conv_seconds(16), conv_seconds(64)
    assert 0 < small < large


def test_profile_gives_a_view_no_time(place):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        y = layers.flatten(layers.conv2d(layers.data("x", [1, 8, 6, 6]), num_filters=4, filter_size=3), 1, 3)
    prepared = Executor(place).prepare(prog, ["x"], [y.name], halfway.init_scope(prog, seed=0))
    times = dict(prepared.profile({"x": RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)}))
    assert [s for op, s in times.items() if "flatten_contiguous_range(" in op] == [0.0]
    assert all(s > 0 for op, s in times.items() if "conv2d(" in op)


def test_each_kernel_variant_compiles_once(place):
    prog, scope, fetch = small_cnn()
    Executor(place).prepare(prog, ["x"], [fetch], scope)
    compiled = place.runtime.compiled_programs
    Executor(place).prepare(prog, ["x"], [fetch], scope)
    assert place.runtime.compiled_programs == compiled


# the light zoo's smaller models keep PoCL's share of the suite short; the H100 runs all nine
@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_onnx_light_zoo(place, name):
    from tests.support.onnx_zoo import dummy_inputs, light_model, with_random_weights

    model = with_random_weights(light_model(name), seed=1)
    program, feed_names, fetch_names, scope = halfway.frontends.onnx.load(model)
    feeds = {n: v for n, v in dummy_inputs(model, seed=2).items() if n in feed_names}
    want = Executor().run(program, feeds, fetch_names, scope)
    prepared = Executor(place).prepare(program, feed_names, fetch_names, scope)
    assert prepared.report.fallbacks == [], prepared.report.summary()
    got = prepared.run(feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5 * float(np.abs(want[0]).max()))


def test_elementwise_ops_write_in_place(place):
    """relu, exp and the add overwrite their input's buffer; the transpose (a strided copy) does not."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 4])
        y = layers.exp(layers.relu(layers.scale(x, scale=2.0)))
        z = layers.transpose(y, [2, 0, 1])
        out = layers.elementwise_add(layers.scale(z, scale=0.5), z)
    feed = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)}
    got, want, report = run_both(place, prog, halfway.Scope(), out.name, feed)
    overwriting = [op.output("Out")[0] for op in prog.global_block().ops if op.type in ("relu", "exp", "elementwise_add")]
    assert sorted(report.memory.inplace) == sorted(overwriting)
    np.testing.assert_allclose(got, want, rtol=1e-6)
