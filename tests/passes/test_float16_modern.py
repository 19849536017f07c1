"""The float16 transpile on today's architectures (tests/modern.py's fixtures, as imported and
after the default passes): finite outputs within 1e-2 of float32 with and without calibration,
attention masks built from huge constants kept meaningful, and the float32 ops kept few."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.ir import DType
from tests.support.modern import FIXTURE_DIR, STAGES, cases, expected_failure, fixtures

NAMES = [entry["name"] for entry in fixtures() if expected_failure(entry["name"]) is None]
TOLERANCE = 1e-2
"""Largest error over the largest float32 magnitude, per output."""


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / max(float(np.abs(want).max()), 1e-30))


def _program(name: str, stage: str):
    program, _, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    if stage == "passes":
        result = halfway.PassManager().run(program, scope, fetch=fetches)
        program, scope = result.program, result.scope
    return program, fetches, scope


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", NAMES)
def test_float16_fixture_is_finite_and_close_to_float32(name, stage):
    program, fetches, scope = _program(name, stage)
    feeds = [inputs for inputs, _ in cases(name)[:2]]
    executor = halfway.Executor()
    for calibration in (None, feeds):
        half, report = halfway.float16_transpile(program, scope, calibration_feeds=calibration, fetch_names=fetches)
        assert report.float16_ops, "nothing runs float16"
        for feed in feeds:
            refs = executor.run(program, feed, fetches, scope)
            gots = executor.run(half, feed, fetches, scope)  # checks that no float16 op overflows
            for fetch, ref, got in zip(fetches, refs, gots):
                assert np.all(np.isfinite(got)), f"{fetch}: NaN or inf (calibration {calibration is not None})"
                error = relative_error(got, ref)
                assert error <= TOLERANCE, f"{fetch}: relative error {error:.2e} (calibration {calibration is not None})"


@pytest.mark.parametrize("name", ["bert_eager_torchscript", "bert_sdpa_dynamo", "gpt2_eager_dynamo",
                                  "distilbert_eager_torchscript"])
def test_attention_masks_and_no_op_casts_run_float16(name):
    """HF's finfo.min mask fill is held in float16's range, so nothing on the mask's way to the
    softmax stays float32, and float32 -> float32 casts no longer force float32."""
    program, fetches, scope = _program(name, "imported")
    _, report = halfway.float16_transpile(program, scope, fetch_names=fetches)
    assert report.clamped and not report.out_of_range
    kept = {e.type for e in report.float32_ops}
    assert not kept & {"softmax", "where", "cast", "layer_norm"}, report.kept_float32()


def _masked_attention_model(fill: float) -> onnx.ModelProto:
    """softmax(scores + (1 - mask) * fill) and softmax(where(mask, scores, fill)) over the last axis."""
    fill_value = numpy_helper.from_array(np.array(fill, np.float32), "fill")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    nodes = [
        helper.make_node("Sub", ["one", "mask"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "fill"], ["bias"]),
        helper.make_node("Add", ["scores", "bias"], ["biased"]),
        helper.make_node("Softmax", ["biased"], ["added"], axis=-1),
        helper.make_node("Cast", ["mask"], ["maskb"], to=TensorProto.BOOL),
        helper.make_node("Where", ["maskb", "scores", "fill"], ["filled"]),
        helper.make_node("Softmax", ["filled"], ["selected"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "masked",
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("added", "selected")],
        [fill_value, one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("fill", [float(np.finfo(np.float32).min), -1e9])
def test_fully_masked_rows_stay_finite_and_uniform_in_float16(fill):
    program, feeds, fetches, scope = halfway.load(_masked_attention_model(fill))
    scores = np.array([[1.0, -2.0, 3.0, 0.5], [-20.0, -30.0, 5.0, 1.0], [-40.0, 2.0, 1.0, 0.0]], np.float32)
    mask = np.array([[1, 1, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]], np.float32)  # rows 1 and 2 fully masked
    feed = {"scores": scores, "mask": mask}
    half, report = halfway.float16_transpile(program, scope)
    assert report.clamped == {"fill": 1} and not report.float32_ops
    assert {e.type for e in report.float16_ops} >= {"softmax", "where", "elementwise_add"}
    fill16 = scope[report.params[[p.name for p in report.params].index("fill")].float16_name]
    assert fill16.dtype == np.float16 and np.isfinite(fill16).all() and fill16 < -1e4
    refs = halfway.Executor().run(program, feed, fetches, scope)
    gots = halfway.Executor().run(half, feed, fetches, scope)
    (added_ref, selected_ref), (added, selected) = refs, gots
    assert np.all(np.isfinite(added)) and np.all(np.isfinite(selected))
    np.testing.assert_allclose(selected, selected_ref, atol=2e-3)
    np.testing.assert_allclose(selected[1:], 0.25, atol=1e-3)  # float32's uniform rows
    np.testing.assert_allclose(added[0], added_ref[0], atol=2e-3)
    # fully masked rows of an additive mask: what float32 gives there depends on its rounding of
    # score + fill (absorbed by finfo.min, not by -1e9); float16 gives a distribution, not NaN
    np.testing.assert_allclose(added.sum(-1), 1.0, atol=2e-3)


def test_constants_beyond_float16_but_below_mask_magnitude_stay_pinned():
    """70000 is a number, not infinity: its readers stay float32 as before."""
    program, feeds, fetches, scope = halfway.load(_masked_attention_model(-70000.0))
    _, report = halfway.float16_transpile(program, scope)
    assert not report.clamped and report.out_of_range == {"fill": 1}
    assert {e.type for e in report.float32_ops} >= {"where", "elementwise_mul"}


@pytest.mark.parametrize("op_type", ["softmax", "layer_norm", "rms_norm", "reduce_mean"])
def test_float16_kernels_of_softmax_norms_and_reductions_accumulate_in_float32(op_type):
    """float16 storage, float32 sums: over values whose squares and sums overflow float16, the
    float16 kernel gives what float64 computes on the same float16 inputs."""
    from tests.support.oprun import run_op

    x = (np.random.default_rng(0).standard_normal((2, 4096)) * 1000).astype(np.float16)
    wide = x.astype(np.float64)
    ones, zeros = np.ones(4096, np.float16), np.zeros(4096, np.float16)
    if op_type == "softmax":
        ran = run_op("softmax", {"X": x / 100}, {"axis": -1})
        shifted = wide / 100 - (wide / 100).max(1, keepdims=True)
        want = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
        got = ran.out
    elif op_type == "layer_norm":
        ran = run_op("layer_norm", {"X": x, "Scale": ones, "Bias": zeros}, {"begin_norm_axis": 1, "epsilon": 1e-5})
        want = (wide - wide.mean(1, keepdims=True)) / np.sqrt(wide.var(1, keepdims=True) + 1e-5)
        got = ran["Y"][0]
    elif op_type == "rms_norm":
        ran = run_op("rms_norm", {"X": x, "Scale": ones}, {"begin_norm_axis": 1, "epsilon": 1e-5})
        want = wide / np.sqrt((wide ** 2).mean(1, keepdims=True) + 1e-5)
        got = ran["Y"][0]
    else:
        ran = run_op("reduce_mean", {"X": x}, {"dim": [1], "keep_dim": True})
        want, got = wide.mean(1, keepdims=True), ran.out
    assert ran.kernel_dtypes == [DType.float16] and got.dtype == np.float16 and np.all(np.isfinite(got))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
