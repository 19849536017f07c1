"""frontends.onnx.merged_decoder on optimum's structure (``tests.support.onnx_decoders.merged``
of the opset-23 export): the If on ``use_cache_branch`` becomes its with-past branch, which ONNX
Runtime runs as it runs the export itself, and a then_branch without the pasts is named."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from halfway.frontends.onnx.context import ConversionError
from halfway.frontends.onnx.merged_decoder import is_merged_decoder, take_cache_branch
from tests.support.onnx_decoders import export, merged


def _merged() -> onnx.ModelProto:
    return merged(onnx.load(export("attention23")))


def test_the_if_becomes_its_with_past_branch():
    model = _merged()
    taken = take_cache_branch(model)
    source = onnx.load(export("attention23"))
    assert is_merged_decoder(model) and not is_merged_decoder(taken) and not is_merged_decoder(source)
    assert [n.op_type for n in taken.graph.node] == [n.op_type for n in source.graph.node]
    assert [i.name for i in taken.graph.input] == [i.name for i in source.graph.input]
    attentions = [n for n in taken.graph.node if n.op_type == "Attention"]
    assert [list(n.input[4:]) for n in attentions] == [[f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
                                                       for i in range(2)]
    assert [list(n.output[1:]) for n in attentions] == [[f"present.{i}.key", f"present.{i}.value"] for i in range(2)]


def test_the_taken_branch_computes_as_onnxruntimes_merged_model():
    onnxruntime = pytest.importorskip("onnxruntime")
    model = _merged()
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 128, (1, 3)), "position_ids": np.array([[5, 6, 7]]),
             **{f"past_key_values.{i}.{kind}": rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
                for i in range(2) for kind in ("key", "value")}}

    def run(m: onnx.ModelProto, **extra: np.ndarray) -> list[np.ndarray]:
        session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {**feeds, **extra})

    for got, want in zip(run(take_cache_branch(model)), run(model, use_cache_branch=np.array([True]))):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_then_branch_reading_no_past_is_named():
    model = _merged()
    node = model.graph.node[0]
    then, other = (next(a for a in node.attribute if a.name == name) for name in ("then_branch", "else_branch"))
    swapped = onnx.GraphProto()
    swapped.CopyFrom(other.g)
    other.g.CopyFrom(then.g)
    then.g.CopyFrom(swapped)
    with pytest.raises(ConversionError, match=r"optimum::if \(If on use_cache_branch\): its then_branch reads none "
                                              r"of the pasts \(past_key_values.0.key, .*\), so it is not the "
                                              r"with-past decoder"):
        take_cache_branch(model)
