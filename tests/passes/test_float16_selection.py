"""The float16 transpiler keeps the scores TopK orders float32 (``passes/float16/selection.py``):
a detector's near-tied sigmoid scores keep ONNX Runtime's float32 order."""

from __future__ import annotations

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.executor import Executor

RNG = np.random.default_rng(3)


def _detector_head(with_projection: bool) -> helper.ModelProto:
    """RT-DETR's selection: scores = sigmoid(logits), flattened, TopK of them (after a projection
    of the queries to class logits with ``with_projection``)."""
    nodes = [helper.make_node("Sigmoid", ["logits"], ["scores"]),
             helper.make_node("Flatten", ["scores"], ["flat"], axis=1),
             helper.make_node("TopK", ["flat", "k"], ["values", "indices"])]
    inits = [numpy_helper.from_array(np.array([40], np.int64), "k")]
    source = "logits"
    if with_projection:
        nodes.insert(0, helper.make_node("MatMul", ["queries", "w"], ["logits"]))
        inits.append(numpy_helper.from_array(RNG.standard_normal((8, 20)).astype(np.float32), "w"))
        source = "queries"
    shape = [1, 30, 8] if with_projection else [1, 30, 20]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info(source, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("values", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("indices", TensorProto.INT64, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_near_tied_scores_keep_onnxruntime_order_in_float16():
    model = _detector_head(with_projection=False)
    # confident logits 0.001 apart: their sigmoids are 40 float32 steps apart, and hundreds share
    # one of float16's (2**-11 near 1)
    logits = (6 + 1e-3 * RNG.permutation(600)).reshape(1, 30, 20).astype(np.float32)
    want_values, want_indices = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"logits": logits})
    program, feeds, fetches, scope = halfway.load(model)
    half, report = halfway.float16_transpile(program, scope)
    values, indices = Executor().run(half, {"logits": logits}, fetches, scope)
    np.testing.assert_array_equal(indices, want_indices)
    np.testing.assert_allclose(values, want_values, rtol=1e-6)
    assert {e.type: e.dtype for e in report.ops}["top_k_v2"] == "float32"


def test_the_scores_op_runs_float32_and_what_precedes_it_float16():
    program, feeds, fetches, scope = halfway.load(_detector_head(with_projection=True))
    _, report = halfway.float16_transpile(program, scope)
    entries = {e.type: e for e in report.ops}
    assert entries["matmul_v2"].dtype == "float16"
    for op_type in ("sigmoid", "flatten_contiguous_range", "top_k_v2"):
        assert entries[op_type].dtype == "float32", entries[op_type]
    assert "top_k_v2's X" in entries["sigmoid"].reason
