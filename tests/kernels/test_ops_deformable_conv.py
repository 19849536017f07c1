"""deformable_conv (``ir/ops/conv.py``, ``kernels/numpy/conv.py``) imported from ONNX's DeformConv and
exported back, against ONNX Runtime: grouped, in two offset groups, strided, dilated and unevenly
padded, offsets reaching past the map's edges, with and without mask and bias."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx_export import to_onnx

RNG = np.random.default_rng(19)


def _session(model) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("masked", [False, True])
def test_deformable_conv_matches_onnxruntime(masked):
    x = RNG.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 2)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    # out: (9 + 1 + 2 - 5) // 2 + 1 = 4 rows, (8 + 0 + 1 - 3) // 2 + 1 = 4 columns
    offset = RNG.uniform(-3, 3, (2, 2 * 3 * 2 * 2, 4, 4)).astype(np.float32)
    feeds = {"x": x, "offset": offset}
    if masked:
        feeds["mask"] = RNG.uniform(0, 1, (2, 2 * 3 * 2, 4, 4)).astype(np.float32)
    inputs = ["x", "w", "offset"] + (["b", "mask"] if masked else [])
    node = helper.make_node("DeformConv", inputs, ["y"], group=2, offset_group=2, strides=[2, 2],
                            dilations=[2, 2], pads=[1, 0, 2, 1])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    program, names, fetches, scope = halfway.load(model)
    (got,) = Executor().run(program, {n: feeds[n] for n in names}, fetches, scope)
    (want,) = _session(model).run(None, feeds)
    assert want.shape == (2, 6, 4, 4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (again,) = _session(to_onnx(program, scope, names, fetches, opset=19)).run(None, feeds)
    np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-5)


def test_an_offset_of_the_wrong_shape_is_named():
    node = helper.make_node("DeformConv", ["x", "w", "offset"], ["y"])
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5]),
        helper.make_tensor_value_info("offset", TensorProto.FLOAT, [1, 9, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")])
    with pytest.raises(halfway.HalfwayError, match=r"Offset must be \[1, 18, 3, 3\]"):
        halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]))
