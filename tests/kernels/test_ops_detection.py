"""non_max_suppression and roi_align (``ir/ops/detection.py``, ``kernels/numpy/detection.py``) imported
from ONNX's NonMaxSuppression (on many random overlapping boxes) and RoiAlign, and exported back,
against ONNX Runtime."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx_export import to_onnx
from halfway.ir.builder import append_op, program_guard
from halfway.ir.errors import HalfwayError

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


def _roi_align_model(mode: str, transform: str, sampling_ratio: int, opset: int):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode, output_height=3, output_width=2,
                            sampling_ratio=sampling_ratio, spatial_scale=0.5,
                            coordinate_transformation_mode=transform)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 11]),
        helper.make_tensor_value_info("rois", TensorProto.FLOAT, [6, 4]),
        helper.make_tensor_value_info("batch", TensorProto.INT64, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_pools_as_onnxruntime(mode, transform, sampling_ratio):
    """Rois inside, across and beyond the map's edges (and one smaller than a pixel), on two
    images; halfway's result and its export's, run by ONNX Runtime, against ONNX Runtime's."""
    corner = RNG.uniform(-4, 20, (6, 2))
    rois = np.concatenate([corner, corner + RNG.uniform(0.3, 12, (6, 2))], -1).astype(np.float32)
    feeds = {"x": RNG.standard_normal((2, 3, 9, 11)).astype(np.float32), "rois": rois,
             "batch": np.array([0, 1, 1, 0, 1, 0], np.int64)}
    model = _roi_align_model(mode, transform, sampling_ratio, 16)
    program, names, fetches, scope = halfway.load(model)
    (got,) = Executor().run(program, {n: feeds[n] for n in names}, fetches, scope)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    exported = to_onnx(program, scope, names, fetches, opset=16)
    (again,) = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(again, want, rtol=1e-5, atol=1e-6)


def test_roi_align_of_rois_num_and_its_errors():
    """Paddle's RoisNum gives the rois' images in turn; an image index outside X is named."""
    x = RNG.standard_normal((2, 2, 6, 6)).astype(np.float32)
    rois = np.array([[0, 0, 4, 4], [1, 1, 5, 3], [2, 0, 6, 6]], np.float32)

    def run(slot: str, which: np.ndarray) -> np.ndarray:
        prog, scope = halfway.Program(), halfway.Scope()
        with program_guard(prog):
            block = prog.global_block()
            inputs = {"X": block.create_var("x", dtype="float32", shape=x.shape),
                      "ROIs": block.create_var("rois", dtype="float32", shape=rois.shape),
                      slot: block.create_var("which", dtype="int64", shape=which.shape)}
            out = append_op("roi_align", inputs, {"pooled_height": 2, "pooled_width": 2, "aligned": True})["Out"][0]
        return Executor().run(prog, {"x": x, "rois": rois, "which": which}, [out.name], scope)[0]

    np.testing.assert_array_equal(run("RoisNum", np.array([1, 2], np.int64)),
                                  run("BatchIndices", np.array([0, 1, 1], np.int64)))
    with pytest.raises(HalfwayError, match=r"roi_align: the rois' images \[0, 2, 1\] must be 3 indices in \[0, 2\)"):
        run("BatchIndices", np.array([0, 2, 1], np.int64))
