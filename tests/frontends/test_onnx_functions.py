"""ONNX ops that ONNX defines as functions, without a converter, import as their function body
(``frontends/onnx/functions.py``), checked against ONNX Runtime."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx import UnsupportedOpError

RNG = np.random.default_rng(5)


def _model(node, shape, opset):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, shape)],
                              [helper.make_empty_tensor_value_info("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("attrs", [{}, {"axes": [1, 2]}])
def test_mean_variance_normalization_is_its_function_body(attrs):
    """Without axes the default [0, 2, 3] holds (the inliner alone would drop it)."""
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3 + 1
    model = _model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs), x.shape, 13)
    program, feeds, fetches, scope = halfway.load(model)
    assert "reduce_mean" in {op.type for op in program.global_block().ops}
    (got,) = Executor().run(program, {feeds[0]: x}, fetches, scope)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_function_whose_body_has_no_converter_is_named_itself():
    """Bernoulli's body draws random numbers (RandomUniformLike, no converter): the error names Bernoulli."""
    model = _model(helper.make_node("Bernoulli", ["x"], ["y"]), (2, 3), 17)
    with pytest.raises(UnsupportedOpError, match="Bernoulli"):
        halfway.load(model)
