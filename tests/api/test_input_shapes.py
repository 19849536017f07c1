"""``--input-shapes`` read, and feed shapes resolved from it (``halfway.api.input_shapes``)."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

import halfway
from halfway.api.errors import SpecError
from halfway.api.input_shapes import feed_shapes, parse_input_shapes, unsized_feeds
from halfway.ir.errors import FeedError
from tests.support.clirun import DEMO_BERT, DEMO_ONNX

F = TensorProto.FLOAT


def test_specs_as_polygraphy_and_trtexec_write_them():
    assert parse_input_shapes(["input_ids:1x128,attention_mask:1x128"]) == {
        "input_ids": (1, 128), "attention_mask": (1, 128)}
    assert parse_input_shapes(["x:[2,3]", " y : 4 ", "input:0:1x3x224x224"]) == {
        "x": (2, 3), "y": (4,), "input:0": (1, 3, 224, 224)}  # a TensorFlow name keeps its ':0'


@pytest.mark.parametrize("spec", ["x", "x:", "x:1x0", "x:1x-1", "x:ax2", "x:1,y"])
def test_malformed_specs(spec):
    with pytest.raises(SpecError, match="--input-shapes"):
        parse_input_shapes([spec])


def _program(inputs):
    graph = helper.make_graph([helper.make_node("Identity", [inputs[0][0]], ["out"])], "g",
                              [helper.make_tensor_value_info(n, F, dims) for n, dims in inputs],
                              [helper.make_tensor_value_info("out", F, None)])
    program, feeds, _, _ = halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                                          ir_version=8))
    return program, feeds


def test_free_dims_follow_names_then_rank_then_one():
    program, feeds = _program([("a", ["batch", "seq", 4]), ("b", ["batch", "seq"]), ("c", ["rows", "seq"]),
                               ("d", ["other"])])
    assert feed_shapes(program, feeds, {"a": (2, 7, 4)}) == {"a": (2, 7, 4), "b": (2, 7), "c": (1, 7), "d": (1,)}
    assert unsized_feeds(program, feeds, {"a": (2, 7, 4)}) == ["c", "d"]
    assert feed_shapes(program, feeds, {"b": (3, 5)}) == {"a": (3, 5, 4), "b": (3, 5), "c": (3, 5), "d": (1,)}
    assert feed_shapes(program, feeds) == {"a": (1, 1, 4), "b": (1, 1), "c": (1, 1), "d": (1,)}


def test_the_shipped_bert_mask_follows_its_ids():
    program, feeds, _, _ = halfway.load(str(DEMO_BERT))
    assert feed_shapes(program, feeds, parse_input_shapes(["input_ids:2x128"])) == {
        "input_ids": (2, 128), "attention_mask": (2, 128)}
    assert unsized_feeds(program, feeds, {"input_ids": (2, 128)}) == []


@pytest.mark.parametrize(("given", "fragment"), [
    ({"img": (1, 3, 128, 128)}, "'img', which is not an input of the model; its inputs are ['image']"),
    ({"image": (1, 3, 128)}, "has shape [1, 3, 128, 128]"),
    ({"image": (2, 3, 128, 128)}, "has shape [1, 3, 128, 128]"),
])
def test_shapes_the_model_cannot_take(given, fragment):
    program, feeds, _, _ = halfway.load(str(DEMO_ONNX))
    with pytest.raises(FeedError) as caught:
        feed_shapes(program, feeds, given)
    assert fragment in str(caught.value)
