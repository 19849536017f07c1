"""non_max_suppression (``ir/ops/detection.py``, ``kernels/numpy/detection.py``) imported from ONNX's
NonMaxSuppression against ONNX Runtime, on many random overlapping boxes."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import halfway
from halfway.executor import Executor

RNG = np.random.default_rng(8)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("score_threshold", [None, 0.3])
def test_nms_keeps_the_boxes_onnxruntime_keeps(center, score_threshold):
    corner = RNG.uniform(0, 10, (2, 40, 2))
    boxes = np.concatenate([corner, corner + RNG.uniform(0.5, 4, (2, 40, 2))], -1).astype(np.float32)
    scores = np.round(RNG.uniform(0, 1, (2, 3, 40)), 2).astype(np.float32)  # ties
    feeds = {"boxes": boxes, "scores": scores, "limit": np.array([7], np.int64), "iou": np.array([0.4], np.float32)}
    if score_threshold is not None:
        feeds["floor"] = np.array([score_threshold], np.float32)
    types = {"boxes": TensorProto.FLOAT, "scores": TensorProto.FLOAT, "limit": TensorProto.INT64,
             "iou": TensorProto.FLOAT, "floor": TensorProto.FLOAT}
    graph = helper.make_graph(
        [helper.make_node("NonMaxSuppression", list(feeds), ["y"], center_point_box=center)], "g",
        [helper.make_tensor_value_info(n, types[n], v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    program, names, fetches, scope = halfway.load(model)
    (got,) = Executor().run(program, {n: feeds[n] for n in names}, fetches, scope)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(want) > 10
    np.testing.assert_array_equal(got, want)
