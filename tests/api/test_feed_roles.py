"""What each input of a model is for (``halfway.api.feed_roles``): read from hand-built ONNX
models and the shipped BERT, the tables' rows checked against the initializers onnx reads."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.api.feed_roles import IDS, MASK, POSITIONS, TYPE_IDS, VALUES, check_ids, feed_roles
from halfway.ir.errors import FeedError
from tests.support.clirun import DEMO_BERT, DEMO_ONNX

I64, F = TensorProto.INT64, TensorProto.FLOAT


def test_ids_masks_and_values_by_what_they_feed():
    """ids reach a Gather of a table through a Reshape; 'keep' is cast to float and multiplies (a
    mask by use, not by name); 'count' is added before its cast; 'weights' is a float."""
    nodes = [helper.make_node("Reshape", ["tokens", "flat"], ["tokens_flat"]),
             helper.make_node("Gather", ["words", "tokens_flat"], ["embedded"]),
             helper.make_node("Cast", ["keep"], ["keep_f"], to=F),
             helper.make_node("Add", ["count", "count"], ["twice"]),
             helper.make_node("Cast", ["twice"], ["twice_f"], to=F),
             helper.make_node("ReduceSum", ["embedded"], ["total"], keepdims=0),
             helper.make_node("Mul", ["keep_f", "weights"], ["masked"]),
             helper.make_node("Add", ["masked", "twice_f"], ["sum"]),
             helper.make_node("Add", ["sum", "total"], ["out"])]
    graph = helper.make_graph(
        nodes, "roles",
        [*(helper.make_tensor_value_info(n, I64, [2, 8]) for n in ("tokens", "keep", "count")),
         helper.make_tensor_value_info("weights", F, [2, 8])],
        [helper.make_tensor_value_info("out", F, None)],
        [numpy_helper.from_array(np.zeros((37, 4), np.float32), "words"),
         numpy_helper.from_array(np.array([2, 8], np.int64), "flat")])
    program, feeds, _, _ = halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                                          ir_version=8))
    roles = feed_roles(program, feeds)
    assert (roles["tokens"].kind, roles["tokens"].rows, roles["tokens"].table) == (IDS, 37, "words")
    assert roles["keep"].kind == MASK and roles["weights"].kind == VALUES
    assert roles["count"].kind == VALUES  # cast to float only after an Add, which does not pass ids on


def test_names_decide_masks_token_types_and_positions():
    names = ["input_ids", "attention_mask", "token_type_ids", "position_ids"]
    tables = {"input_ids": "words", "token_type_ids": "types", "position_ids": "positions"}
    nodes = [helper.make_node("Gather", [tables[n], n], [f"{n}.e"]) for n in tables]
    nodes += [helper.make_node("Cast", ["attention_mask"], ["m"], to=F),
              helper.make_node("Sum", [f"{n}.e" for n in tables], ["e"]),
              helper.make_node("Unsqueeze", ["m", "axis"], ["m3"]),
              helper.make_node("Mul", ["e", "m3"], ["out"])]
    graph = helper.make_graph(
        nodes, "bert-like", [helper.make_tensor_value_info(n, I64, ["batch", "sequence"]) for n in names],
        [helper.make_tensor_value_info("out", F, None)],
        [numpy_helper.from_array(np.zeros((rows, 4), np.float32), name)
         for name, rows in (("words", 50), ("types", 2), ("positions", 16))]
        + [numpy_helper.from_array(np.array([-1], np.int64), "axis")])
    program, feeds, _, _ = halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                                          ir_version=8))
    roles = feed_roles(program, feeds)
    assert [roles[n].kind for n in names] == [IDS, MASK, TYPE_IDS, POSITIONS]
    assert [roles[n].rows for n in names] == [50, None, 2, 16]


def test_the_shipped_bert_and_resnet():
    bert = onnx.load(DEMO_BERT)
    (words,) = [t for t in bert.graph.initializer if t.name.endswith("word_embeddings.weight")]
    program, feeds, _, _ = halfway.load(str(DEMO_BERT))
    roles = feed_roles(program, feeds)
    assert roles["input_ids"].kind == IDS and roles["input_ids"].rows == words.dims[0]
    assert roles["attention_mask"].kind == MASK
    program, feeds, _, _ = halfway.load(str(DEMO_ONNX))
    assert feed_roles(program, feeds)["image"].kind == VALUES


def test_ids_outside_their_table_name_the_input():
    program, feeds, _, _ = halfway.load(str(DEMO_BERT))
    roles = feed_roles(program, feeds)
    ok = np.array([[0, 2047, -2048]], np.int64)
    check_ids(roles, {"input_ids": ok, "attention_mask": np.full_like(ok, 9999)})  # a mask indexes no table
    for bad in (2048, -2049):
        with pytest.raises(FeedError, match=rf"input 'input_ids': id {bad} is outside the 2048 rows .*word_embeddings"):
            check_ids(roles, {"input_ids": np.array([[1, bad]], np.int64)})


def test_a_gather_along_another_axis_bounds_ids_by_that_dim():
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["out"], axis=1)], "columns",
        [helper.make_tensor_value_info("ids", I64, [2, 8])], [helper.make_tensor_value_info("out", F, None)],
        [numpy_helper.from_array(np.zeros((4, 30), np.float32), "table")])
    program, feeds, _, _ = halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                                          ir_version=8))
    role = feed_roles(program, feeds)["ids"]
    assert (role.kind, role.rows) == (IDS, 30)
