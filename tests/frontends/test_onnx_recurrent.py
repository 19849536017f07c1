"""ONNX's RNN, GRU and LSTM unrolled by the importer (``frontends/onnx/recurrent.py``) against ONNX
Runtime: biases, initial states, peepholes, sequence lengths shorter than the sequence, the reverse
direction and GRU's linear_before_reset (ONNX's node tests cover the defaults)."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx import ConversionError

RNG = np.random.default_rng(11)
SEQ, BATCH, INPUT, HIDDEN = 4, 3, 5, 6
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _feeds(op: str, lengths: bool, peepholes: bool) -> dict[str, np.ndarray]:
    g = GATES[op]
    feeds = {"X": RNG.standard_normal((SEQ, BATCH, INPUT)), "W": RNG.standard_normal((1, g * HIDDEN, INPUT)) * 0.5,
             "R": RNG.standard_normal((1, g * HIDDEN, HIDDEN)) * 0.5, "B": RNG.standard_normal((1, 2 * g * HIDDEN)) * 0.5}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    if lengths:
        feeds["sequence_lens"] = np.array([4, 2, 1], np.int32)
    feeds["initial_h"] = RNG.standard_normal((1, BATCH, HIDDEN)).astype(np.float32)
    if op == "LSTM":
        feeds["initial_c"] = RNG.standard_normal((1, BATCH, HIDDEN)).astype(np.float32)
        if peepholes:
            feeds["P"] = RNG.standard_normal((1, 3 * HIDDEN)).astype(np.float32)
    return feeds


def _model(op: str, feeds: dict[str, np.ndarray], outputs: list[str], **attrs):
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    inputs = [name if name in feeds else "" for name in order]
    while not inputs[-1]:
        inputs.pop()
    node = helper.make_node(op, inputs, outputs, hidden_size=HIDDEN, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                                          v.shape) for n, v in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


@pytest.mark.parametrize("op, attrs, lengths, peepholes", [
    ("RNN", {}, True, False), ("GRU", {}, True, False), ("GRU", {"linear_before_reset": 1}, True, False),
    ("LSTM", {}, True, True), ("LSTM", {}, False, False), ("GRU", {"direction": "reverse"}, False, False),
    ("LSTM", {"direction": "reverse"}, False, True),
])
def test_recurrent_ops_match_onnxruntime(op, attrs, lengths, peepholes):
    feeds = _feeds(op, lengths, peepholes)
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    model = _model(op, feeds, outputs, **attrs)
    program, names, fetches, scope = halfway.load(model)
    got = Executor().run(program, {n: feeds[n] for n in names}, fetches, scope)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_a_bidirectional_rnn_is_refused_by_name():
    feeds = _feeds("RNN", False, False)
    with pytest.raises(ConversionError, match="direction 'bidirectional' is not supported"):
        halfway.load(_model("RNN", feeds, ["Y"], direction="bidirectional"))
