"""dft (``ir/ops/signal.py``, ``kernels/numpy/signal.py``) against numpy.fft, imported from ONNX's DFT
with a dft_length that pads or cuts the signal (ONNX's node tests cover the other forms)."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

import halfway
from halfway.executor import Executor

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("length", [5, 12])
@pytest.mark.parametrize("onesided", [0, 1])
def test_dft_of_a_real_signal_over_a_given_length(length, onesided):
    x = RNG.standard_normal((2, 8, 3, 1)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "n", "axis"], ["y"], onesided=onesided)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.array(length, np.int64), "n"),
                               numpy_helper.from_array(np.array(1, np.int64), "axis")])
    program, feeds, fetches, scope = halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    (got,) = Executor().run(program, {feeds[0]: x}, fetches, scope)
    want = (np.fft.rfft if onesided else np.fft.fft)(x[..., 0].astype(np.float64), n=length, axis=1)
    assert got.shape == want.shape + (2,)
    np.testing.assert_allclose(got, np.stack([want.real, want.imag], -1), rtol=1e-5, atol=1e-5)
