"""Feeds for a model (``halfway.api.feeds``): generated values the model can take, run on ONNX
Runtime as the reference, and arrays of another dtype refused or converted."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

import halfway
from halfway.api.feeds import dtype_changes, random_inputs, typed_feeds
from halfway.api.input_shapes import feed_shapes
from halfway.ir.errors import FeedError
from tests.support.clirun import DEMO_BERT, DEMO_ONNX


def _rows(path, suffix: str) -> int:
    (table,) = [t for t in onnx.load(path).graph.initializer if t.name.endswith(suffix)]
    return table.dims[0]


def test_generated_bert_inputs_are_ids_and_a_mask_onnx_runtime_runs_finite():
    program, feeds, fetches, scope = halfway.load(str(DEMO_BERT))
    inputs = random_inputs(program, feeds, seed=5, shapes=feed_shapes(program, feeds, {"input_ids": (3, 40)}))
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    assert ids.shape == mask.shape == (3, 40) and ids.dtype == mask.dtype == np.int64
    assert 0 <= ids.min() and ids.max() < _rows(DEMO_BERT, "word_embeddings.weight") and len(np.unique(ids)) > 20
    assert (mask == 1).all()
    reference = ort.InferenceSession(str(DEMO_BERT)).run(fetches, inputs)
    ours = halfway.Executor().run(program, inputs, fetches, scope)
    for want, got in zip(reference, ours):
        assert np.isfinite(want).all()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_generated_floats_lie_in_the_unit_interval_and_are_seeded():
    program, feeds, _, _ = halfway.load(str(DEMO_ONNX))
    image = random_inputs(program, feeds, seed=1)["image"]
    assert image.dtype == np.float32 and image.shape == (1, 3, 128, 128)
    assert 0 <= image.min() and image.max() < 1 and 0.45 < image.mean() < 0.55
    np.testing.assert_array_equal(image, random_inputs(program, feeds, seed=1)["image"])
    assert not np.array_equal(image, random_inputs(program, feeds, seed=2)["image"])


def test_other_dtypes_are_refused_as_onnx_runtime_refuses_them_or_converted_when_asked():
    program, _, _, _ = halfway.load(str(DEMO_BERT))
    arrays = {"input_ids": np.ones((1, 4), np.int64), "attention_mask": np.ones((1, 4), np.int32)}
    assert dtype_changes(arrays, program) == [("attention_mask", "int32", "int64")]
    with pytest.raises(FeedError, match="input 'attention_mask' is int32, the model takes int64 .*--cast-inputs"):
        typed_feeds(arrays, program, cast=False)
    with pytest.raises(InvalidArgument, match=r"tensor\(int32\)"):  # ONNX Runtime refuses it too
        ort.InferenceSession(str(DEMO_BERT)).run(None, arrays)
    converted = typed_feeds(arrays, program, cast=True)
    assert converted["attention_mask"].dtype == np.int64 and converted["input_ids"] is arrays["input_ids"]
