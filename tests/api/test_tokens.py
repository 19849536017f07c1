"""Seeded token batches for text models (``halfway.api.tokens``)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from halfway.api.models import load_model
from halfway.api.tokens import is_text_model, token_inputs, vocabulary_size
from tests.support.clirun import DEMO_BERT, DEMO_ONNX, ROOT

MODERN_BERT = ROOT / "tests" / "fixtures" / "modern" / "bert_eager_torchscript.onnx"


def _table_rows(path, name: str) -> int:
    """The rows of the initializer of ``path`` whose name ends in ``name``, read with onnx."""
    (table,) = [t for t in onnx.load(path).graph.initializer if t.name.endswith(name)]
    return table.dims[0]


def test_the_vocabulary_is_the_embedding_table_the_ids_index():
    for path in (DEMO_BERT, MODERN_BERT):
        model = load_model(str(path))
        assert is_text_model(model.program, model.feed_names)
        assert vocabulary_size(model.program) == _table_rows(path, "word_embeddings.weight")
    model = load_model(str(DEMO_ONNX))
    assert not is_text_model(model.program, model.feed_names)


def test_a_padded_batch_masks_its_padding():
    model = load_model(str(DEMO_BERT))
    feeds = token_inputs(model.program, model.feed_names, seed=3, batch=4, sequence=64)
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    assert ids.shape == mask.shape == (4, 64) and ids.dtype == mask.dtype == np.int64
    lengths = mask.sum(axis=1)
    assert np.array_equal(mask, np.arange(64)[None, :] < lengths[:, None])  # tokens first, then padding
    assert lengths.min() >= 16 and len(set(lengths)) > 1
    assert np.array_equal(ids == 0, mask == 0) and ids.max() < _table_rows(DEMO_BERT, "word_embeddings.weight")
    again = token_inputs(model.program, model.feed_names, seed=3, batch=4, sequence=64)
    other = token_inputs(model.program, model.feed_names, seed=4, batch=4, sequence=64)
    assert np.array_equal(again["input_ids"], ids) and not np.array_equal(other["input_ids"], ids)


def test_fixed_dims_token_types_positions_and_float_inputs(tmp_path):
    """A model fixing [1, 8] with token types, positions and a float input: each gets its kind of value."""
    ints = ["input_ids", "token_type_ids", "position_ids"]
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["words"]),
         helper.make_node("Add", ["words", "scale"], ["out"]),
         helper.make_node("Add", ["token_type_ids", "position_ids"], ["ints"])],
        "tokens",
        [*(helper.make_tensor_value_info(n, TensorProto.INT64, [1, 8]) for n in ints),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8, 3]),
         helper.make_tensor_value_info("ints", TensorProto.INT64, [1, 8])],
        [numpy_helper.from_array(np.zeros((50, 3), np.float32), "table")])
    path = tmp_path / "tokens.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    model = load_model(str(path))
    feeds = token_inputs(model.program, model.feed_names, seed=0, batch=2, sequence=16)
    assert {n: feeds[n].shape for n in ints} == dict.fromkeys(ints, (1, 8))
    assert vocabulary_size(model.program) == 50 and 0 < feeds["input_ids"].max() < 50
    assert not feeds["token_type_ids"].any() and np.array_equal(feeds["position_ids"], np.arange(8)[None])
    assert feeds["scale"].dtype == np.float32 and feeds["scale"].shape == (1,)
