"""The ONNX ops halfway composes from its own (``frontends/onnx/composed.py``), imported and
run against onnx's reference implementation (numpy for the older opsets it does not follow)."""

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
