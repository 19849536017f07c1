"""The selection, indexing and normalisation ops (``ir/ops/indexing.py``, ``ir/ops/norm.py``, their
numpy kernels and ONNX converters): each ONNX op imported and run against onnx's reference
implementation, in float32 and (where the op computes) float16; the Paddle-only ops against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from tests.support.node_model import node_model
from tests.support.oprun import run_op

RNG = np.random.default_rng(5)


def _check(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray] | None = None,
           outputs: int = 1, opset: int = 18, rtol: float = 1e-5, **attrs: object) -> None:
    model = node_model(op_type, feeds, consts or {}, outputs, opset, **attrs)
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, dict(zip(names, feeds.values())), fetches, scope)
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == np.shape(w) and g.dtype == np.asarray(w).dtype, (g.shape, np.shape(w), g.dtype)
        np.testing.assert_allclose(g.astype(np.float64), np.asarray(w, np.float64), rtol=rtol, atol=rtol)


def _x(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


FLOATS = [np.float32, np.float16]


@pytest.mark.parametrize("dtype", [*FLOATS, np.int64])
def test_where_broadcasts_the_three(dtype):
    _check("Where", {"c": RNG.random((3, 1)) > 0.5, "x": _x(4, dtype=dtype) * 0 + 2, "y": _x(3, 4, dtype=dtype)})


@pytest.mark.parametrize("dtype", [*FLOATS, np.bool_])
def test_expand_broadcasts_both_ways_and_tile(dtype):
    x = (_x(3, 1) > 0).astype(dtype)
    _check("Expand", {"x": x}, {"shape": np.array([2, 1, 4], np.int64)})
    _check("Tile", {"x": x}, {"repeats": np.array([2, 3], np.int64)})


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    _check("CumSum", {"x": _x(3, 5)}, {"axis": np.array(1, np.int64)}, exclusive=exclusive, reverse=reverse)
    _check("CumSum", {"x": np.arange(6, dtype=np.int64).reshape(2, 3)}, {"axis": np.array(-2, np.int32)},
           exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod(exclusive, reverse):
    _check("CumProd", {"x": _x(3, 5)}, {"axis": np.array(-1, np.int64)}, opset=26, exclusive=exclusive,
           reverse=reverse)
    _check("CumProd", {"x": np.arange(1, 7, dtype=np.int32).reshape(2, 3)}, {"axis": np.array(0, np.int32)},
           opset=26, exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("upper, k", [(1, 0), (0, 0), (1, -1), (0, 2)])
def test_trilu(upper, k):
    _check("Trilu", {"x": _x(2, 4, 5)}, {"k": np.array(k, np.int64)}, upper=upper)


def test_range_with_runtime_bounds_and_constant_ones():
    _check("Range", {"s": np.array(1.5, np.float32), "l": np.array(7, np.float32), "d": np.array(0.5, np.float32)})
    _check("Range", {}, {"s": np.array(10, np.int64), "l": np.array(2, np.int64), "d": np.array(-3, np.int64)})


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims, last", [(1, 0), (0, 0), (1, 1), (0, 1)])
def test_arg_max_min_take_the_first_or_last_of_equals(op_type, keepdims, last):
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)
    _check(op_type, {"x": x}, axis=1, keepdims=keepdims, select_last_index=last)


@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_orders_equal_values_by_index(largest):
    x = RNG.integers(0, 4, (3, 6)).astype(np.float32)
    _check("TopK", {"x": x}, {"k": np.array([3], np.int64)}, outputs=2, axis=1, largest=largest)


def test_gather_nd_and_gather_elements_with_negative_indices():
    x = _x(3, 4, 2)
    _check("GatherND", {"x": x, "i": np.array([[0, -1], [2, 1]], np.int64)})
    _check("GatherElements", {"x": x, "i": np.array([[[0, 1]], [[-1, 2]], [[3, -4]]], np.int64)}, axis=1)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_and_scatter_nd(reduction):
    opset = 18
    x = _x(3, 4)
    _check("ScatterElements", {"x": x, "i": np.array([[1, 0], [3, 2]], np.int64), "u": _x(2, 2)},
           opset=opset, axis=1, reduction=reduction)
    _check("ScatterND", {"x": x, "i": np.array([[1], [0]], np.int64), "u": _x(2, 4)}, opset=opset,
           reduction=reduction)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("mode, axis", [("linear", -2), ("linear", 1), ("circular", 2), ("circular", -1)])
def test_tensor_scatter_writes_as_onnxruntime(mode, axis, dtype):
    """Each batch row's update written from its own index (wrapping past the end in circular mode)."""
    cache, update = _x(3, 4, 6, 5, dtype=dtype), _x(3, 4, 6, 5, dtype=dtype)
    update = np.take(update, range(2), axis=axis)
    size = cache.shape[axis]
    starts = np.array([0, size - 2, 5 if mode == "circular" else 1], np.int64) % size
    feeds = {"cache": cache, "update": update, "at": starts}
    _against_onnxruntime(node_model("TensorScatter", feeds, {}, 1, 24, mode=mode, axis=axis), feeds)


@pytest.mark.parametrize("batch_dims, x_shape, index_shape", [(1, (3, 4, 5), (3, 2, 1)), (1, (3, 4, 5, 2), (3, 2)),
                                                              (2, (2, 3, 4, 5), (2, 3, 6, 2)), (0, (4, 5), (2, 3, 2))])
def test_gather_nd_with_batch_dims_as_onnxruntime(batch_dims, x_shape, index_shape):
    """Each of the first batch_dims slices of the indices reads its own slice of X; negative
    indices count from the end."""
    x = _x(*x_shape)
    sizes = np.array(x_shape[batch_dims:batch_dims + index_shape[-1]])
    index = (RNG.integers(0, 1 << 20, index_shape) % sizes - np.where(RNG.random(index_shape) < 0.3, sizes, 0))
    feeds = {"x": x, "i": index.astype(np.int64)}
    _against_onnxruntime(node_model("GatherND", feeds, {}, 1, 13, batch_dims=batch_dims), feeds)


def test_tensor_scatter_past_the_axis_is_named():
    feeds = {"cache": _x(2, 4, 3), "update": _x(2, 2, 3), "at": np.array([1, 3], np.int64)}
    prog, names, fetches, scope = halfway.load(node_model("TensorScatter", feeds, {}, 1, 24))
    with pytest.raises(halfway.HalfwayError, match=r"tensor_scatter: WriteIndices \[1, 3\] must be one per batch "
                                                   r"row with 2 steps fitting in the axis of 4"):
        Executor().run(prog, dict(zip(names, feeds.values())), fetches, scope)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_with_negative_and_float_indices(axis):
    _check("OneHot", {"i": np.array([[1, -1, 4], [0, 2, -3]], np.int64)},
           {"depth": np.array(5, np.int64), "values": np.array([-2, 3], np.float32)}, axis=axis)
    _check("OneHot", {"i": np.array([1.0, 4.0], np.float32)},
           {"depth": np.array(5.0, np.float32), "values": np.array([0, 1], np.int64)}, axis=axis)


@pytest.mark.parametrize("equation, shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij,kj", [(3, 4), (5, 4)]),
                                              ("...ii->...i", [(2, 3, 3)]), ("i,i", [(4,), (4,)])])
def test_einsum(equation, shapes):
    _check("Einsum", {f"x{i}": _x(*s) for i, s in enumerate(shapes)}, equation=equation)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_layer_norm_with_every_output(dtype, axis):
    tol = 5e-3 if dtype is np.float16 else 1e-5
    x = _x(2, 3, 4, dtype=dtype)
    scale = _x(*x.shape[axis % 3:], dtype=dtype)
    _check("LayerNormalization", {"x": x, "s": scale, "b": _x(x.shape[-1], dtype=dtype)}, outputs=3 if dtype is
           np.float32 else 1, opset=17, rtol=tol, axis=axis, epsilon=1e-3)


@pytest.mark.parametrize("dtype", FLOATS)
def test_instance_and_group_norm(dtype):
    tol = 5e-3 if dtype is np.float16 else 1e-5
    x = _x(2, 6, 3, 4, dtype=dtype)
    _check("InstanceNormalization", {"x": x, "s": _x(6, dtype=dtype), "b": _x(6, dtype=dtype)}, rtol=tol)
    _check("GroupNormalization", {"x": x, "s": _x(6, dtype=dtype), "b": _x(6, dtype=dtype)}, opset=21, rtol=tol,
           num_groups=3)
    _check("GroupNormalization", {"x": x, "s": _x(3, dtype=dtype), "b": _x(3, dtype=dtype)}, opset=18, rtol=tol,
           num_groups=3)


@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax(axis):
    _check("LogSoftmax", {"x": _x(2, 3, 4) * 10}, opset=13, axis=axis)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_log_softmax_before_opset_13_flattens_from_axis(axis):
    """onnx's reference reads every opset as 13; ONNX Runtime follows opset 11's flattening."""
    onnxruntime = pytest.importorskip("onnxruntime")
    x = _x(2, 3, 4) * 10
    model = node_model("LogSoftmax", {"x": x}, {}, opset=11, axis=axis)
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    prog, names, fetches, scope = halfway.load(model)
    np.testing.assert_allclose(Executor().run(prog, {"x": x}, fetches, scope)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("slope_shape", [(1,), (3, 1, 1), (5,), (4, 5), (2, 3, 4, 5)])
def test_prelu_slopes(slope_shape):
    _check("PRelu", {"x": _x(2, 3, 4, 5), "s": _x(*slope_shape)})


@pytest.mark.parametrize("op_type", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
def test_composed_reductions(op_type):
    _check(op_type, {"x": np.abs(_x(2, 3, 4)) + 0.1}, {"axes": np.array([1], np.int64)}, keepdims=0)


def test_paddle_only_ops_match_numpy():
    x = _x(2, 3, 4)
    np.testing.assert_allclose(run_op("tile", {"X": x}, {"repeat_times": [2, 1, 1]}).out, np.tile(x, (2, 1, 1)))
    index = np.array([3, 0, 4], np.int64)
    np.testing.assert_array_equal(run_op("one_hot_v2", {"X": index}, {"depth": 5}).out, np.eye(5, dtype=np.float32)[index])
    ran = run_op("layer_norm", {"X": x}, {"begin_norm_axis": 2}, outputs={"Y": 1, "Mean": 1, "Variance": 1})
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(ran["Y"][0], (x - mean) / np.sqrt(var + 1e-5), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ran["Variance"][0], var.reshape(2, 3), rtol=1e-5)
    alpha = _x(3)
    np.testing.assert_allclose(run_op("prelu", {"X": x, "Alpha": alpha}, {"mode": "channel"}).out,
                               np.where(x > 0, x, x * alpha[:, None]))


@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_lookup_table_v2_is_an_embedding(padding_idx):
    table = _x(5, 3)
    ids = np.array([[0, 2, 4], [2, 1, 1]], np.int64)
    got = run_op("lookup_table_v2", {"W": table, "Ids": ids}, {"padding_idx": padding_idx}).out
    expected = table[ids]
    if padding_idx != -1:
        expected[ids == padding_idx] = 0
    np.testing.assert_array_equal(got, expected)


def test_out_of_range_indices_are_errors_naming_the_op():
    with pytest.raises(halfway.HalfwayError, match=r"lookup_table_v2: an id is outside \[0, 5\)"):
        run_op("lookup_table_v2", {"W": _x(5, 3), "Ids": np.array([5], np.int64)})
    with pytest.raises(halfway.HalfwayError, match="take_along_axis: an index is outside"):
        run_op("take_along_axis", {"Input": _x(2, 3), "Index": np.array([[3]], np.int64)}, {"Axis": 1})
    with pytest.raises(halfway.HalfwayError, match="one_hot_v2: an index is outside"):
        run_op("one_hot_v2", {"X": np.array([5], np.int64)}, {"depth": 5})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [True, False])
def test_skip_layer_norm_is_layer_norm_of_the_sum(dtype, affine):
    x, y = _x(2, 3, 16, dtype=dtype), _x(2, 3, 16, dtype=dtype)
    params = {"Scale": _x(16), "Bias": _x(16)} if affine else {}
    ran = run_op("skip_layer_norm", {"X": x, "Y": y, **params}, {"begin_norm_axis": 2, "epsilon": 1e-3},
                 outputs={"Out": 1, "Sum": 1})
    total = (x + y).astype(np.float64)  # x + y rounds to the inputs' dtype, as elementwise_add
    want = (total - total.mean(-1, keepdims=True)) / np.sqrt(total.var(-1, keepdims=True) + 1e-3)
    if affine:
        want = want * params["Scale"] + params["Bias"]
    tol = 2e-3 if dtype is np.float16 else 1e-5
    assert ran.out.dtype == ran["Sum"][0].dtype == dtype
    np.testing.assert_array_equal(ran["Sum"][0], x + y)
    np.testing.assert_allclose(ran.out.astype(np.float64), want, rtol=tol, atol=tol)
    alone = run_op("skip_layer_norm", {"X": x, "Y": y, **params}, {"begin_norm_axis": 2, "epsilon": 1e-3})
    np.testing.assert_array_equal(alone.out, ran.out)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("scaled", [True, False])
def test_skip_rms_norm_is_rms_norm_of_the_sum(dtype, scaled):
    x, y = _x(2, 3, 16, dtype=dtype), _x(2, 3, 16, dtype=dtype)
    params = {"Scale": _x(16)} if scaled else {}
    ran = run_op("skip_rms_norm", {"X": x, "Y": y, **params}, {"begin_norm_axis": 2, "epsilon": 1e-3},
                 outputs={"Out": 1, "Sum": 1})
    total = (x + y).astype(np.float64)
    want = total / np.sqrt(np.mean(total * total, -1, keepdims=True) + 1e-3) * params.get("Scale", 1.0)
    tol = 2e-3 if dtype is np.float16 else 1e-5
    assert ran.out.dtype == ran["Sum"][0].dtype == dtype
    np.testing.assert_array_equal(ran["Sum"][0], x + y)
    np.testing.assert_allclose(ran.out.astype(np.float64), want, rtol=tol, atol=tol)
    alone = run_op("skip_rms_norm", {"X": x, "Y": y, **params}, {"begin_norm_axis": 2, "epsilon": 1e-3})
    np.testing.assert_array_equal(alone.out, ran.out)


def test_skip_layer_norm_needs_operands_of_one_shape():
    with pytest.raises(halfway.HalfwayError, match="must have X's shape"):
        run_op("skip_layer_norm", {"X": _x(2, 4), "Y": _x(1, 4)}, {"begin_norm_axis": 1})


def _against_onnxruntime(model, feeds: dict[str, np.ndarray], rtol: float = 1e-5) -> None:
    """halfway's outputs of ``model`` (imported with its own, possibly named, dims) against ONNX
    Runtime's for ``feeds``."""
    import onnxruntime

    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: feeds[n] for n in names}, fetches, scope)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, w in zip(got, session.run(None, feeds)):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol)


def _model(node, inputs: dict[str, tuple[np.dtype, list]]):
    """A one-node model whose graph inputs have the (dtype, dims) given, dims named or sized."""
    from onnx import helper

    values = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(d)), dims)
              for n, (d, dims) in inputs.items()]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output]
    return helper.make_model(helper.make_graph([node], "one_op", values, outputs),
                             opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("equation, x_dims, r_dims", [
    ("bhwc,hkc->bhwk", ["b", "h", "w", 4], [3, 5, 4]),  # SAM's relative positions: h named, then concrete
    ("hkc,bhwc->bhwk", [3, 5, 4], ["b", "h", "w", 4]),  # the concrete size first
    ("bij,bjk->bik", ["b", "i", "j"], ["b", "j", 2]),  # symbolic on both sides
    ("...ij,...jk->...ik", ["b", 3, "j"], [2, "j", 5]),  # a batch dim named on one side
])
def test_einsum_with_symbolic_dims_against_onnxruntime(dtype, equation, x_dims, r_dims):
    """A label whose size is a named dim in one operand and concrete (or named) in another imports
    with the concrete size, and runs as ONNX Runtime does for the shapes fed."""
    from onnx import helper

    model = _model(helper.make_node("Einsum", ["x", "r"], ["y"], equation=equation),
                   {"x": (dtype, x_dims), "r": (dtype, r_dims)})
    sizes = {"b": 2, "h": 3, "w": 6, "i": 3, "j": 4}
    feeds = {name: _x(*[sizes.get(d, d) for d in dims], dtype=dtype) for name, dims in (("x", x_dims), ("r", r_dims))}
    _against_onnxruntime(model, feeds, rtol=2e-3 if dtype is np.float16 else 1e-5)


@pytest.mark.parametrize("dtype", [np.bool_, np.float32, np.float16, np.int64])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (7,)])
def test_non_zero_against_onnxruntime(dtype, shape):
    """NonZero's [rank, count] indices, count set by the values fed (none, some, all nonzero)."""
    from onnx import helper

    model = _model(helper.make_node("NonZero", ["x"], ["y"]), {"x": (dtype, ["n"] + list(shape[1:]))})
    for fill in (0.0, 0.5, 1.0):
        x = (RNG.random(shape) < fill).astype(dtype) * RNG.integers(1, 4, shape).astype(dtype)
        _against_onnxruntime(model, {"x": x})


def test_non_zero_feeds_what_follows_it():
    """A data-dependent count flows into the ops after it: the nonzero entries gathered."""
    from onnx import helper

    nodes = [helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("Transpose", ["i"], ["t"]),
             helper.make_node("GatherND", ["x", "t"], ["y"])]
    graph = helper.make_graph(nodes, "gather_nonzero", [helper.make_tensor_value_info("x", 1, ["n", 4])],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = _x(5, 4) * (RNG.random((5, 4)) < 0.4)
    _against_onnxruntime(model, {"x": x.astype(np.float32)})


def test_einsum_with_a_symbolic_dim_checks_the_fed_size():
    model = node_model("Einsum", {"x": _x(2, 3, 4)}, {"r": _x(3, 5)}, equation="bhc,hk->bhk")
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "h"
    prog, names, fetches, scope = halfway.load(model)
    with pytest.raises(halfway.HalfwayError, match="label 'h' .* sizes 4 and 3"):
        Executor().run(prog, {names[0]: _x(2, 4, 4)}, fetches, scope)
