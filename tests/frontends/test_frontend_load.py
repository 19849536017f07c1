"""halfway.load: one entry point dispatching on the model's format."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import halfway
from halfway.executor import Executor
from halfway.frontends.load import model_format

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"


def _run(loaded, feed):
    program, feeds, fetches, scope = loaded
    return Executor().run(program, {n: feed[n] for n in feeds}, fetches, scope)


@pytest.mark.parametrize("where", ["resnet_tiny", "resnet_tiny.pdmodel", "resnet_tiny_legacy"])
def test_paddle_layouts_load_and_match_paddle(where):
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    program, feeds, fetches, scope = halfway.load(FIXTURES / where)
    assert fetches == list(io["__fetch_names__"])
    got = _run((program, feeds, fetches, scope), io)
    np.testing.assert_allclose(got[0], io[fetches[0]], rtol=1e-5, atol=1e-6)


def _tiny_onnx() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [3], [1.0, -2.0, 0.5])
    graph = helper.make_graph([helper.make_node("Add", ["x", "bias"], ["sum"]),
                               helper.make_node("Relu", ["sum"], ["y"])], "tiny", [x], [y], [bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("name", ["tiny.onnx", "tiny.model"])
def test_onnx_files_dispatch_by_suffix_or_content(tmp_path, name):
    path = tmp_path / name
    onnx.save(_tiny_onnx(), path)
    assert model_format(path) == "onnx"
    x = np.array([[1, 2, 3], [-4, 5, -6]], np.float32)
    program, feeds, fetches, scope = halfway.load(path)
    assert (feeds, fetches) == (["x"], ["y"])
    got = _run((program, feeds, fetches, scope), {"x": x})
    np.testing.assert_array_equal(got[0], np.maximum(x + np.float32([1.0, -2.0, 0.5]), 0))


def test_a_model_proto_loads_directly():
    program, feeds, fetches, _ = halfway.load(_tiny_onnx())
    assert [op.type for op in program.global_block().ops] == ["feed", "elementwise_add", "relu", "fetch"]


def test_a_path_naming_no_model_is_an_error(tmp_path):
    with pytest.raises(halfway.SerdeError, match="no such model"):
        halfway.load(tmp_path / "nothing")
    with pytest.raises(halfway.SerdeError, match="takes a model's path or an onnx.ModelProto, got Program"):
        halfway.load(halfway.Program())


def test_options_of_the_other_format_are_refused(tmp_path):
    path = tmp_path / "tiny.onnx"
    onnx.save(_tiny_onnx(), path)
    with pytest.raises(halfway.SerdeError, match="Paddle models only"):
        halfway.load(path, model_filename="__model__")
    with pytest.raises(halfway.SerdeError, match="ONNX models only"):
        halfway.load(FIXTURES / "resnet_tiny", input_shapes={"image": [1, 3, 16, 16]})
