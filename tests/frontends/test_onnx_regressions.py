"""Import bugs met on today's model exports, each reduced to the node that showed it."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import helper, numpy_helper

import halfway
from halfway.executor import Executor
from halfway.frontends.load import UnknownOpError
from halfway.frontends.onnx import UnsupportedOpError
from tests.support.onnx_zoo import ort_session

RNG = np.random.default_rng(9)


def _run(nodes, feeds: dict[str, np.ndarray], inits: dict[str, np.ndarray] | None = None, opset: int = 17):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                     for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info(nodes[-1].output[0])],
        [numpy_helper.from_array(v, n) for n, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    prog, names, fetches, scope = halfway.load(model)
    return Executor().run(prog, feeds, fetches, scope)[0]


def test_efficientnet_pooler_is_the_mean_and_allocates_no_padded_copy():
    """A 1280x1280 ceil-mode average pool over a 7x7 map: one window, the mean of the map."""
    x = RNG.standard_normal((2, 1280, 7, 7)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[1280, 1280], strides=[1280, 1280],
                            ceil_mode=1)
    tracemalloc.start()
    got = _run([node], {"x": x})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    assert peak < 2 * x.nbytes, peak


@pytest.mark.parametrize("op_type, reduce", [("GlobalAveragePool", np.mean), ("GlobalMaxPool", np.max)])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5, 6)])
def test_global_pools_of_1d_and_3d_inputs(op_type, reduce, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    got = _run([helper.make_node(op_type, ["x"], ["y"])], {"x": x})
    np.testing.assert_allclose(got, reduce(x, axis=tuple(range(2, len(shape))), keepdims=True), rtol=1e-6)


def test_scalar_gather_index_drops_the_axis():
    """ViT's class token: x[:, 0] of [N, tokens, width] is [N, width]."""
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    index = helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array(0, np.int64)))
    got = _run([index, helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x})
    np.testing.assert_array_equal(got, x[:, 0])


def test_ceil_of_a_runtime_value_converts():
    x = (RNG.standard_normal((3, 4)) * 4).astype(np.float32)
    np.testing.assert_array_equal(_run([helper.make_node("Ceil", ["x"], ["y"])], {"x": x}), np.ceil(x))


def test_an_op_without_converter_on_a_runtime_shape_is_an_unsupported_op_error():
    """Shape of a tensor with unknown dims is not constant; an op on it without converter is named."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Bernoulli", ["s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", 1, ["n", 3])], [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOpError, match=r"Bernoulli"):
        halfway.load(model)


def test_paddle_model_with_unknown_ops_fails_at_load_listing_them(tmp_path):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = halfway.layers.data("x", [2, 3])
        y = halfway.layers.relu(x)
    block = prog.global_block()
    for op in block.ops:
        if op.type == "relu":
            op.type = "my_custom_act"
    scope = halfway.init_scope(prog, seed=1)
    halfway.save_inference_model(tmp_path / "m", ["x"], [y.name], prog, scope)
    with pytest.raises(UnknownOpError, match=r"m\.pdmodel: 1 op\(s\) of 1 type\(s\) .*my_custom_act"):
        halfway.load(tmp_path / "m.pdmodel")


@pytest.mark.parametrize("low, high", [(-3, 5), (4, -2)])
def test_clip_of_a_run_time_bound_clips_to_max_when_min_exceeds_it(low, high):
    """ONNX's Clip with min > max gives max; an absent bound of an int64 X is int64's limit."""
    x = np.arange(-8, 8, dtype=np.int64)
    both = _run([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x, "lo": np.array(low), "hi": np.array(high)})
    np.testing.assert_array_equal(both, np.minimum(np.maximum(x, low), high))
    upper = _run([helper.make_node("Clip", ["x", "", "hi"], ["y"])], {"x": x, "hi": np.array(high)})
    np.testing.assert_array_equal(upper, np.minimum(x, high))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_top_k_with_k_computed_at_run_time_is_onnx_runtimes(k):
    """TopK's K a graph input (fed at run time, not known at import): one program for every K,
    each giving ONNX Runtime's values and indices."""
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [3, 5]),
                                            helper.make_tensor_value_info("k", 7, [1])],
                              [helper.make_empty_tensor_value_info(n) for n in ("values", "indices")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": x, "k": np.array([k], np.int64)}
    prog, _, fetches, scope = halfway.load(model)
    got = Executor().run(prog, feeds, fetches, scope)
    for g, w in zip(got, ort_session(model).run(None, feeds)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("box", [[0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.2, 0.1, 1.0, 1.0, 0.9, 0.7]])
def test_resize_crop_box_computed_at_run_time_is_onnx_runtimes(box):
    """tf_crop_and_resize's roi a graph input: one program for every crop box (RoiTensor)."""
    x = RNG.standard_normal((1, 2, 6, 5)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=0.5)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 2, 6, 5]),
                                            helper.make_tensor_value_info("roi", 1, [8])],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.array([1, 2, 4, 3], np.int64), "sizes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"x": x, "roi": np.array(box, np.float32)}
    prog, _, fetches, scope = halfway.load(model)
    got = Executor().run(prog, feeds, fetches, scope)[0]
    np.testing.assert_allclose(got, ort_session(model).run(None, feeds)[0], rtol=1e-5, atol=1e-6)
