"""ONNX's Scan unrolled by the importer (``frontends/onnx/control.py``) against ONNX Runtime: a
state carried through the steps, a reversed scan input, a scan output stacked along axis 1, and a
body reading a value of the outer graph."""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import halfway
from halfway.executor import Executor


def test_scan_with_directions_axes_and_an_outer_value_matches_onnxruntime():
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x_t"], ["sum"]), helper.make_node("Mul", ["sum", "scale"], ["acc_out"]),
         helper.make_node("Tanh", ["acc_out"], ["y_t"])], "body",
        [helper.make_tensor_value_info("acc_in", f, [3]), helper.make_tensor_value_info("x_t", f, [3])],
        [helper.make_tensor_value_info("acc_out", f, [3]), helper.make_tensor_value_info("y_t", f, [3])])
    node = helper.make_node("Scan", ["init", "x"], ["final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_directions=[1], scan_output_axes=[1])
    graph = helper.make_graph([helper.make_node("Neg", ["s"], ["scale"]), node], "g",
                              [helper.make_tensor_value_info("init", f, [3]), helper.make_tensor_value_info("x", f, [5, 3]),
                               helper.make_tensor_value_info("s", f, [3])],
                              [helper.make_tensor_value_info("final", f, None), helper.make_tensor_value_info("ys", f, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    rng = np.random.default_rng(2)
    feeds = {"init": rng.standard_normal(3), "x": rng.standard_normal((5, 3)), "s": rng.uniform(0.5, 0.9, 3)}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    program, names, fetches, scope = halfway.load(model)
    got = Executor().run(program, {n: feeds[n] for n in names}, fetches, scope)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert got[1].shape == (3, 5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
