"""The general window pool (``kernels/numpy/pool.py``): 3-D, dilated and lp pools imported from
ONNX and run against onnx's reference implementation, and the bound on what a pool allocates
when a small map is widely padded."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from halfway.ir.builder import append_op, program_guard
from tests.support.oprun import float16_tolerance

RNG = np.random.default_rng(31)


def _check(op_type: str, x: np.ndarray, rtol: float = 1e-5, opset: int = 19, **attrs: object) -> None:
    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {"x": x}, fetches, scope)[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)


WINDOWS = [  # kernel, strides, pads, dilations
    ([2, 3, 2], [1, 2, 1], [0, 1, 1, 1, 0, 0], [1, 1, 2]),
    ([3, 2, 2], [2, 1, 2], [1, 0, 0, 1, 1, 1], [2, 2, 1]),
]


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("kernel, strides, pads, dilations", WINDOWS)
def test_3d_pools_with_pads_and_dilations(op_type, kernel, strides, pads, dilations):
    x = RNG.standard_normal((2, 3, 6, 7, 5)).astype(np.float32)
    extra = {"count_include_pad": 1} if op_type == "AveragePool" else {"p": 3} if op_type == "LpPool" else {}
    _check(op_type, x, kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations, **extra)
    if op_type != "LpPool":
        _check(op_type, x, kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations, ceil_mode=1)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dilated_and_lp_2d_and_1d_pools(op_type, dtype):
    rtol = 4 * float16_tolerance(9) if dtype is np.float16 else 1e-5
    x = RNG.standard_normal((2, 3, 9, 8)).astype(dtype)
    _check(op_type, x, rtol, kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], dilations=[2, 3])
    _check(op_type, x[:, :, 0], rtol, kernel_shape=[3], pads=[1, 2], dilations=[2])
    _check(op_type, x, rtol, kernel_shape=[2, 2], auto_pad="SAME_UPPER")


def test_a_widely_padded_small_map_is_pooled_without_a_padded_copy():
    """A 4x4 map under a 9x9 window padded by 8: a padded copy would be 25 times the input."""
    x = RNG.standard_normal((1, 64, 4, 4)).astype(np.float32)
    prog, scope = halfway.Program(), halfway.Scope()
    with program_guard(prog):
        var = prog.global_block().create_var("x", dtype="float32", shape=x.shape)
        outs = {kind: append_op("pool2d", {"X": var}, {"pooling_type": kind, "ksize": [9, 9], "strides": [8, 8],
                                                         "paddings": [8, 8]})["Out"][0] for kind in ("max", "avg")}
    prepared = Executor().prepare(prog, ["x"], [v.name for v in outs.values()], scope, feed_shapes={"x": x.shape})
    prepared.run({"x": x})
    tracemalloc.start()
    got_max, got_avg = prepared.run({"x": x})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    padded_bytes = x.nbytes // 16 * 20 * 20
    assert peak < 4 * x.nbytes < padded_bytes, f"pooling allocated {peak} bytes for a {x.nbytes}-byte input"
    padded = np.pad(x, ((0, 0), (0, 0), (8, 8), (8, 8)), constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (9, 9), axis=(2, 3))[:, :, ::8, ::8]
    np.testing.assert_allclose(got_max, np.nanmax(windows, axis=(-2, -1)), rtol=1e-6)
    np.testing.assert_allclose(got_avg, np.nanmean(windows, axis=(-2, -1)), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1]},
                                   {"kernel_shape": [2, 3], "strides": [1, 2]}])
def test_max_pool_indices_against_onnxruntime(dtype, storage_order, attrs):
    """MaxPool's Indices (max_pool2d_with_index's Mask made ONNX's flat index) as ONNX Runtime
    gives them, row- and column-major, ties included (the first of equals)."""
    import onnxruntime

    x = RNG.integers(-3, 4, (2, 3, 7, 8)).astype(dtype)  # few values: windows hold ties
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], storage_order=storage_order, **attrs)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("i")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {"x": x}, fetches, scope)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, w in zip(got, session.run(None, {"x": x})):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
