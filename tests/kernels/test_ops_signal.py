"""dft (``ir/ops/signal.py``, ``kernels/numpy/signal.py``) against numpy.fft, imported from ONNX's DFT
with a dft_length that pads or cuts the signal (ONNX's node tests cover the other forms);
mel_weight_matrix, imported from MelWeightMatrix and exported back, against ONNX Runtime."""

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


@pytest.mark.parametrize("bins, length, rate, low, high", [(8, 16, 8192, 0.0, 4096.0), (5, 64, 16000, 20.0, 7600.0),
                                                           (20, 32, 8000, 300.0, 3000.0)])
def test_mel_weight_matrix_fed_at_run_time_matches_onnxruntime(bins, length, rate, low, high):
    """Sizes known only when it runs (every input a graph input); halfway's and its export's
    weights against ONNX Runtime's, float32 and float64 (output_datatype)."""
    import onnxruntime

    from halfway.frontends.onnx_export import to_onnx

    feeds = {"bins": np.array(bins, np.int64), "length": np.array(length, np.int64), "rate": np.array(rate, np.int64),
             "low": np.array(low, np.float32), "high": np.array(high, np.float32)}
    for elem in (1, 11):
        node = helper.make_node("MelWeightMatrix", list(feeds), ["y"], output_datatype=elem)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
            v.dtype), []) for n, v in feeds.items()], [helper.make_empty_tensor_value_info("y")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        program, names, fetches, scope = halfway.load(model)
        (got,) = Executor().run(program, feeds, fetches, scope)
        run = [onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
               for m in (model, to_onnx(program, scope, names, fetches, opset=17))]
        assert got.shape == (length // 2 + 1, bins) and got.dtype == run[0][0].dtype and got.max() == 1
        np.testing.assert_allclose(got, run[0][0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(run[1][0], run[0][0], rtol=1e-6, atol=1e-7)
