"""The ONNX ops halfway composes from its own (``frontends/onnx/composed.py``), imported and
run against onnx's reference implementation (numpy for the older opsets it does not follow) or ONNX
Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor

RNG = np.random.default_rng(13)


def _hardmax_2d(x: np.ndarray, axis: int) -> np.ndarray:
    """Hardmax before opset 13: over the rows of X seen as [dims before axis, dims from axis on]."""
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return np.eye(rows.shape[1], dtype=x.dtype)[rows.argmax(axis=1)].reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("opset, axis", [(13, 0), (13, 1), (13, -1), (11, 1), (11, 2), (11, 0)])
def test_hardmax_is_a_one_hot_of_the_first_maximum(opset, axis, dtype):
    """Ties (the rounded values) keep the first; before opset 13 X is seen as 2-D at the axis."""
    x = np.round(RNG.standard_normal((3, 4, 5)) * 2).astype(dtype)
    node = helper.make_node("Hardmax", ["x"], ["y"], axis=axis)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                                                          x.shape)],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {names[0]: x}, fetches, scope)[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0] if opset >= 13 else _hardmax_2d(x, axis)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)


def _run_one_node(node, x: np.ndarray, opset: int = 22) -> tuple[np.ndarray, np.ndarray]:
    """(halfway's output, onnx's reference output) of a one-node model on ``x``."""
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                                                          x.shape)],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    prog, names, fetches, scope = halfway.load(model)
    return Executor().run(prog, {names[0]: x}, fetches, scope)[0], ReferenceEvaluator(model).run(None, {"x": x})[0]


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_normalization_divides_by_the_norm_and_keeps_zeros(p, axis):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    x[:, 1, :] = 0  # zero norms along every axis somewhere
    x[1, :, 2] = 0
    got, _ = _run_one_node(helper.make_node("LpNormalization", ["x"], ["y"], axis=axis, p=p), x)
    norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True) if p == 2 else np.abs(x).sum(axis=axis, keepdims=True)
    # onnx's reference sums X itself, not |X|, for p = 1: the norm is numpy's
    np.testing.assert_allclose(got, np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("attrs", [{}, {"k": 2}, {"k": -1, "dtype": 7}])
def test_eye_like_is_the_identity_of_x_shape(attrs):
    got, want = _run_one_node(helper.make_node("EyeLike", ["x"], ["y"], **attrs), RNG.standard_normal((4, 6)).astype(np.float32))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("with_past, with_bias", [(True, True), (True, False), (False, True)])
def test_causal_conv_with_state_matches_onnxruntime(activation, with_past, with_bias):
    """The output and the carried state of a kernel of 4 over 7 steps of 5 channels, after a past
    state or zeros, against ONNX Runtime."""
    import onnxruntime

    feeds = {"x": RNG.standard_normal((2, 5, 7)).astype(np.float32),
             "w": RNG.standard_normal((5, 1, 4)).astype(np.float32),
             "b": RNG.standard_normal(5).astype(np.float32) if with_bias else None,
             "past": RNG.standard_normal((2, 5, 3)).astype(np.float32) if with_past else None}
    given = {n: v for n, v in feeds.items() if v is not None}
    node = helper.make_node("CausalConvWithState", [n if v is not None else "" for n, v in feeds.items()],
                            ["y", "state"], activation=activation)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, 1, v.shape) for n, v in given.items()],
                              [helper.make_tensor_value_info(o, 1, None) for o in ("y", "state")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: given[n] for n in names}, fetches, scope)
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, given)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
