"""``halfway.InferenceSession`` against ``onnxruntime.InferenceSession`` on the shipped models:
the same inputs and outputs described, the same results, the same mistakes refused."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import halfway
from halfway.ir.errors import FeedError
from tests.support.clirun import DEMO_BERT, DEMO_ONNX


def _feeds(path):
    rng = np.random.default_rng(4)
    if path == DEMO_ONNX:
        return {"image": rng.standard_normal((1, 3, 128, 128), dtype=np.float32)}
    ids = rng.integers(0, 2048, size=(2, 24), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 17:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("path", [DEMO_ONNX, DEMO_BERT], ids=lambda p: p.stem)
def test_inputs_and_outputs_are_described_as_onnx_runtime_does(path):
    ours, theirs = halfway.InferenceSession(path), ort.InferenceSession(str(path))
    for mine, reference in ((ours.get_inputs(), theirs.get_inputs()), (ours.get_outputs(), theirs.get_outputs())):
        assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in reference]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("path", [DEMO_ONNX, DEMO_BERT], ids=lambda p: p.stem)
def test_run_returns_what_onnx_runtime_returns(path, optimize):
    ours, theirs = halfway.InferenceSession(path, optimize=optimize), ort.InferenceSession(str(path))
    feeds = _feeds(path)
    for names in (None, [], [o.name for o in theirs.get_outputs()][::-1], [theirs.get_outputs()[0].name]):
        got, want = ours.run(names, feeds), theirs.run(names, feeds)
        assert isinstance(got, list) and len(got) == len(want)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_the_place_is_taken_by_name_or_object():
    assert isinstance(halfway.InferenceSession(DEMO_ONNX, place="cpu").place, halfway.CPUPlace)
    assert halfway.InferenceSession(DEMO_ONNX, place=halfway.CPUPlace()).run(None, _feeds(DEMO_ONNX))[0].shape == (1, 1000)


@pytest.mark.parametrize(("change", "ours", "theirs"), [
    (lambda f: {"input_id": f["input_ids"], "attention_mask": f["attention_mask"]},
     r"unknown feed name\(s\) \['input_id'\] and missing feed 'input_ids'", "missing"),
    (lambda f: f | {"attention_mask": f["attention_mask"].astype(np.int32)}, "has dtype int32, expected int64",
     r"tensor\(int32\)"),
    (lambda f: f | {"input_ids": f["input_ids"] + 2048}, "input 'input_ids': id .* outside the 2048 rows", "out of"),
])
def test_bad_feeds_are_refused_as_onnx_runtime_refuses_them(change, ours, theirs):
    feeds = change(_feeds(DEMO_BERT))
    with pytest.raises(FeedError, match=ours):
        halfway.InferenceSession(DEMO_BERT).run(None, feeds)
    with pytest.raises(Exception, match=theirs):
        ort.InferenceSession(str(DEMO_BERT)).run(None, feeds)


def test_an_unknown_output_name_is_refused():
    with pytest.raises(FeedError, match=r"unknown output name\(s\) \['probs'\]; the model's outputs are \['logits'\]"):
        halfway.InferenceSession(DEMO_ONNX).run(["probs"], _feeds(DEMO_ONNX))
