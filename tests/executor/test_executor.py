"""The executor: feeds, kernel choice by dtype, prepared runs, memory plan, errors."""

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor, plan_memory
from halfway.executor.memory import Value
from halfway.ir import DType, FeedError, HalfwayError, KernelNotFoundError
from halfway.ir.limits import TensorSizeError
from halfway.ir.schema import OpSchema, Slot, register_op, same_as
from halfway.kernels.registry import register_kernel


def _chain(dtype: str = "float32", shape=(2, 3)) -> tuple[halfway.Program, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", list(shape), dtype)
        y = layers.scale(layers.relu(x), scale=2.0, bias=1.0)
        y = layers.elementwise_add(y, layers.sigmoid(x))
    return prog, y.name


def _reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return np.maximum(x64, 0) * 2 + 1 + 1 / (1 + np.exp(-x64))


def test_run_matches_numpy_and_repeats_identically():
    prog, out = _chain()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    x_before = x.copy()
    first = Executor().run(prog, {"x": x}, [out])[0]
    second = Executor().run(prog, {"x": x}, [out])[0]
    np.testing.assert_allclose(first, _reference(x), rtol=1e-6)
    assert first.dtype == np.float32 and np.array_equal(first, second)
    assert np.array_equal(x, x_before)


def test_float16_program_runs_only_float16_kernels():
    prog, out = _chain("float16")
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float16)
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    assert {key.dtype for _, _, key in prepared.report.kernels} == {DType.float16}
    got = prepared.run({"x": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, _reference(x), rtol=4 * np.finfo(np.float16).eps)


def test_prepared_run_with_unknown_batch_dim():
    prog, out = _chain(shape=(-1, 3))
    x = np.ones((5, 3), np.float32)
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope(), feed_shapes={"x": (5, 3)})
    np.testing.assert_allclose(prepared.run({"x": x})[0], _reference(x), rtol=1e-6)
    with pytest.raises(FeedError, match=r"has shape \[4, 3\], expected \[5, 3\]"):
        prepared.run({"x": x[:4]})


def test_unknown_dims_are_prepared_per_feed_signature():
    prog, out = _chain(shape=(-1, 3))
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    with pytest.raises(FeedError, match="not been run yet"):
        prepared.report
    next(op for op in prog.global_block().ops if op.type == "scale").set_attr("scale", 9.0)  # prepared as it was
    rng = np.random.default_rng(3)
    for batch in (5, 1, 5, 7):
        x = rng.standard_normal((batch, 3)).astype(np.float32)
        np.testing.assert_allclose(prepared.run({"x": x})[0], _reference(x), rtol=1e-6)
    assert prepared.signatures == [((1, 3),), ((5, 3),), ((7, 3),)]
    assert prepared.for_feed({"x": np.zeros((5, 3), np.float32)}) is prepared.for_feed({"x": np.ones((5, 3), np.float32)})
    with pytest.raises(FeedError, match="missing feed"):
        prepared.run({})
    with pytest.raises(FeedError, match=r"unknown feed name\(s\) \['X'\] and missing feed 'x'"):
        prepared.run({"X": np.zeros((5, 3), np.float32)})
    with pytest.raises(FeedError, match=r"has shape \[2, 4\], expected \[-1, 3\]"):
        prepared.run({"x": np.zeros((2, 4), np.float32)})


@pytest.mark.parametrize("feed, message", [
    ({}, "missing feed 'x'"),
    ({"x": np.zeros((2, 3), np.float32), "y": np.zeros(1)}, r"unknown feed name\(s\) \['y'\]"),
    ({"img": np.zeros((2, 3), np.float32)}, r"unknown feed name\(s\) \['img'\] and missing feed 'x'; the program is fed"),
    ({"x": np.zeros((2, 4), np.float32)}, r"has shape \[2, 4\], expected \[2, 3\]"),
    ({"x": np.zeros((2, 3, 1), np.float32)}, r"has shape \[2, 3, 1\]"),
    ({"x": np.zeros((2, 3), np.float64)}, "has dtype float64, expected float32"),
    ({"x": [[0.0] * 3] * 2}, "must be a numpy array, got list"),
])
def test_bad_feeds_name_the_var(feed, message):
    prog, out = _chain()
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    with pytest.raises(FeedError, match=message):
        prepared.run(feed)


X23 = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("feed, run_message, prepared_message", [
    ({"x": [[0.0] * 3, [0.0] * 2]}, "feed 'x' must be a numpy array, got list", None),
    ([("x", X23)], "the feed must be a dict of var name -> numpy array, got list", None),
    ({"x": None}, "feed 'x' must be a numpy array, got NoneType$", None),
    ({3: X23}, "feed names must be var names", None),
    (None, "input 'x' is not fed", "the feed must be a dict .* got NoneType"),
    ({"x": X23, "relu.tmp_0": X23}, r"cannot feed 'relu.tmp_0': op #0 relu\(X=x\).* computes it",
     r"unknown feed name\(s\) \['relu.tmp_0'\]"),
])
def test_executor_run_and_prepared_run_refuse_the_same_feeds(feed, run_message, prepared_message):
    prog, out = _chain()
    assert prog.global_block().ops[0].output("Out") == ("relu.tmp_0",)
    with pytest.raises(FeedError, match=run_message):
        Executor().run(prog, feed, [out])
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    with pytest.raises(FeedError, match=prepared_message or run_message):
        prepared.run(feed)


def test_non_contiguous_feed_and_nan_propagate_correctly():
    prog, out = _chain()
    big = np.arange(24, dtype=np.float32).reshape(4, 6) / 4 - 3
    big[0, 0] = np.nan
    x = big[::2, ::2]
    assert not x.flags.c_contiguous
    got = Executor().run(prog, {"x": x}, [out])[0]
    assert np.isnan(got[0, 0]) and np.isfinite(got[1:]).all()
    np.testing.assert_allclose(got[1], _reference(x)[1], rtol=1e-6)


def test_scope_parameters_are_not_modified():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 2, 6, 6])
        y = layers.conv2d(x, num_filters=3, filter_size=3, act="relu")
    scope = halfway.init_scope(prog, seed=0)
    saved = {n: scope[n].copy() for n in scope}
    Executor().run(prog, {"x": np.ones((1, 2, 6, 6), np.float32)}, [y], scope)
    assert all(np.array_equal(scope[n], saved[n]) for n in saved)
    assert set(scope.local_names()) == set(saved)


def test_mixed_dtypes_are_an_error_naming_the_op():
    prog = halfway.Program()
    block = prog.global_block()
    block.create_var("a", dtype="float32", shape=[2])
    block.create_var("b", dtype="float16", shape=[2])
    block.create_var("c", dtype="float32", shape=[2])
    block.append_op("elementwise_add", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]}, {"axis": -1})
    with pytest.raises(HalfwayError, match="elementwise_add"):
        Executor().run(prog, {"a": np.ones(2, np.float32), "b": np.ones(2, np.float16)}, ["c"])


def test_missing_kernel_lists_what_is_registered():
    register_op(OpSchema("t_exec_nokernel", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X")),
                override=True)
    prog = halfway.Program()
    block = prog.global_block()
    block.create_var("x", shape=[2])
    block.create_var("y", shape=[2])
    block.append_op("t_exec_nokernel", {"X": ["x"]}, {"Out": ["y"]})
    with pytest.raises(KernelNotFoundError, match=r"t_exec_nokernel.*input dtypes X=float32.*registered for t_exec_nokernel: none"):
        Executor().run(prog, {"x": np.ones(2, np.float32)}, ["y"])


def test_kernel_failure_names_the_op():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        a = layers.data("a", [3], "int32")
        y = layers.elementwise_div(a, a)
    with pytest.raises(HalfwayError, match=r"while executing op #0 elementwise_div"):
        Executor().run(prog, {"a": np.array([1, 0, 2], np.int32)}, [y])


def test_memory_plan_reuses_buffers():
    # a -> b -> c -> d chain of equal sizes, each read by the next op only: two buffers suffice
    def chain(inplace):
        return [Value("a", 100, 0, 1), *(Value(n, 100, i, i + 1, inplace_of=p if inplace else None)
                                         for i, (p, n) in enumerate(zip("abc", "bcd"), start=1))]
    plan = plan_memory(chain(False))
    assert plan.no_reuse_bytes == 400 and plan.peak_bytes == 200 and len(plan.buffer_bytes) == 2
    inplace = plan_memory(chain(True))
    assert len(inplace.buffer_bytes) == 1 and inplace.peak_bytes == 100
    assert inplace.inplace == {"b": "a", "c": "b", "d": "c"}
    no_reuse = plan_memory(chain(True), reuse=False)
    assert no_reuse.planned_bytes == 400 and no_reuse.inplace == {}


def test_views_share_their_source_buffer_and_keep_it_alive():
    # feed x; a = f(x) at 0; v = view(a) at 1; b = g(x) at 2 (a is dead, v is not); c = h(v, b) at 3
    values = [Value("x", 64, None, 2), Value("a", 64, 0, 1), Value("v", 64, 1, 3, view_of="a"),
              Value("b", 64, 2, 3), Value("c", 64, 3, 4, inplace_of="v")]
    plan = plan_memory(values)
    assert plan.views == {"v": "a"} and plan.buffer_of["v"] == plan.buffer_of["a"]
    assert plan.buffer_of["b"] != plan.buffer_of["a"]  # a's buffer lives on through v
    assert plan.inplace == {"c": "v"} and plan.buffer_of["c"] == plan.buffer_of["a"]
    assert plan.no_reuse_bytes == 64 * 3


def test_views_of_feeds_are_never_overwritten():
    values = [Value("x", 64, None, 0), Value("v", 64, 0, 1, view_of="x"), Value("y", 64, 1, 2, inplace_of="v")]
    plan = plan_memory(values)
    assert plan.views == {"v": "x"} and plan.inplace == {} and "v" not in plan.buffer_of
    assert plan.buffer_of.keys() == {"y"}




def _residual_cnn() -> tuple[halfway.Program, halfway.Scope, list[str]]:
    """conv-bn-relu, a residual add, views (reshape, transpose, slice) and a head: every kind of
    value the plan groups (in-place outputs, views, views of the feed)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4, 8, 8])
        h = layers.relu(layers.batch_norm(layers.conv2d(x, 4, 3, padding=1)))
        h = layers.relu(layers.elementwise_add(h, x))
        flat = layers.reshape(layers.transpose(h, [0, 2, 3, 1]), [2, -1])
        head = layers.scale(layers.slice(flat, axes=[1], starts=[0], ends=[64]), scale=0.5)
        side = layers.relu6(layers.reshape(x, [2, -1]))
        y = layers.softmax(layers.fc(head, 10))
    return prog, halfway.init_scope(prog, seed=3), [y.name, side.name, h.name]


def test_results_identical_with_and_without_memory_reuse():
    prog, scope, fetches = _residual_cnn()
    x = np.random.default_rng(1).standard_normal((2, 4, 8, 8)).astype(np.float32)
    x_before, params_before = x.copy(), {n: scope[n].copy() for n in scope}
    reused = Executor().prepare(prog, ["x"], fetches, scope)
    baseline = Executor().prepare(prog, ["x"], fetches, scope, reuse_memory=False)
    assert reused.report.memory.inplace and not baseline.report.memory.inplace
    assert reused.report.memory.views  # reshape/transpose/slice outputs share their source's buffer
    for _ in range(2):
        for a, b in zip(reused.run({"x": x}), baseline.run({"x": x})):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(x, x_before)
    for name, value in params_before.items():
        np.testing.assert_array_equal(scope[name], value)
    memory = reused.report.memory
    assert memory.peak_bytes < baseline.report.memory.peak_bytes <= memory.no_reuse_bytes


def test_in_place_kernels_write_into_their_dying_input():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [3, 5])
        a = layers.scale(x, scale=3.0)          # a new array: x is the caller's
        b = layers.relu(a)                       # a dies here: relu writes into it
        y = layers.elementwise_add(b, x)         # b dies here too
    prepared = Executor().prepare(prog, ["x"], [y.name], halfway.Scope())
    assert prepared.report.memory.inplace == {b.name: a.name, y.name: b.name}
    kernels = [step.kernel for step in prepared._steps]
    buffer = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
    out = kernels[1](buffer)
    assert out is buffer and (buffer >= 0).all()
    assert kernels[2](buffer, np.ones((3, 5), np.float32)) is buffer


def test_feeds_and_parameters_are_bound_read_only():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3])
        y = layers.relu(layers.reshape(x, [3, 2]))  # a view of the feed must not be overwritten
    prepared = Executor().prepare(prog, ["x"], [y.name], halfway.Scope())
    assert prepared.report.memory.inplace == {}
    x_value = -np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(prepared.run({"x": x_value})[0], np.zeros((3, 2)))
    assert (x_value == -1).all()


def test_kernels_see_the_parameters_no_op_writes_as_constants():
    register_op(OpSchema("t_exec_const", inputs=[Slot("X"), Slot("W")], outputs=[Slot("Out")], infer=same_as("X")),
                override=True)
    seen = []

    @register_kernel("t_exec_const", dtypes=(DType.float32,), override=True)
    def record(spec):
        seen.append(spec.constant("W"))
        return lambda x, w: x + w

    prog = halfway.Program()
    block = prog.global_block()
    for name in ("x", "w", "v", "y", "z"):
        block.create_var(name, shape=[2], persistable=name in ("w", "v"))
    block.append_op("t_exec_const", {"X": ["x"], "W": ["w"]}, {"Out": ["y"]})
    block.append_op("t_exec_const", {"X": ["y"], "W": ["v"]}, {"Out": ["z"]})
    block.append_op("scale", {"X": ["z"]}, {"Out": ["v"]}, {"scale": 1.0})  # v is written: no constant
    scope = halfway.Scope()
    scope["w"], scope["v"] = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    Executor().prepare(prog, ["x"], ["z"], scope)
    np.testing.assert_array_equal(seen[0], scope["w"])
    assert seen[1] is None


def test_prepare_refuses_an_output_beyond_the_size_limit_before_allocating(monkeypatch):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1000, 1])
        y = layers.data("y", [1, 1000])
        out = layers.elementwise_add(x, y)
    feed = {"x": np.ones((1000, 1), np.float32), "y": np.ones((1, 1000), np.float32)}
    monkeypatch.setenv("HALFWAY_MAX_TENSOR_BYTES", str(1 << 20))
    with pytest.raises(TensorSizeError, match=r"elementwise_add \(op #\d+, output .*\): a float32 tensor of shape \[1000, 1000\].*4,000,000 bytes"):
        Executor().prepare(prog, ["x", "y"], [out], halfway.Scope())
    monkeypatch.setenv("HALFWAY_MAX_TENSOR_BYTES", str(4_000_000))
    np.testing.assert_array_equal(Executor().run(prog, feed, [out])[0], np.full((1000, 1000), 2, np.float32))
