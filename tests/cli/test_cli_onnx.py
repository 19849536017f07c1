"""The command line on an ONNX light-zoo model (SqueezeNet 1.1, shipped inside the onnx package),
checked against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.support.clirun import halfway, halfway_json
from tests.support.onnx_zoo import LIGHT_DIR, dummy_inputs, ort_session, with_random_weights

SQUEEZENET = LIGHT_DIR / "light_squeezenet.onnx"


def _input_file(tmp_path) -> tuple[str, np.ndarray]:
    ((name, value),) = dummy_inputs(onnx.load(SQUEEZENET)).items()
    np.save(tmp_path / "input.npy", value)
    return f"{name}={tmp_path / 'input.npy'}", value


def test_run_gives_onnxruntimes_output(tmp_path):
    """With random weights in place of the constant fills, whose shipped output is float32
    rounding (``tests/test_onnx_zoo.ROUNDING_BOUND``)."""
    model = with_random_weights(onnx.load(SQUEEZENET), seed=3)
    onnx.save(model, tmp_path / "squeezenet.onnx")
    spec, value = _input_file(tmp_path)
    done = halfway("run", tmp_path / "squeezenet.onnx", "--input", spec, "-o", tmp_path / "out.npz")
    assert done.returncode == 0, done.stderr
    (got,) = np.load(tmp_path / "out.npz").values()
    (want,) = ort_session(model).run(None, {spec.partition("=")[0]: value})
    assert np.std(want) > 1e-6
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_inspect_reads_the_graph_signature():
    model = onnx.load(SQUEEZENET)
    facts = halfway_json("inspect", SQUEEZENET)
    assert facts["format"] == "onnx"
    (graph_input,) = [v for v in model.graph.input if v.name not in {t.name for t in model.graph.initializer}]
    assert facts["inputs"] == [{"name": graph_input.name, "dtype": "float32",
                                "shape": [d.dim_value for d in graph_input.type.tensor_type.shape.dim]}]
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert facts["parameters"]["elements"] >= params  # weights held as constants count too
    assert facts["ops"] > len(model.graph.node) // 2


def test_bench_side_by_side_with_onnxruntime():
    pytest.importorskip("onnxruntime")
    report = halfway_json("bench", SQUEEZENET, "--place", "cpu", "--compare", "onnxruntime", "--repeat", "3",
                          "--warmup", "1")
    assert [r["runtime"] for r in report["results"]] == ["halfway cpu", "onnxruntime cpu"]
    ours, peer = report["results"]
    assert ours["vs_first"] == 1.0
    assert peer["vs_first"] == peer["median_s"] / ours["median_s"]


def _logits_model(tmp_path) -> str:
    """SqueezeNet without its final Softmax: with the zoo's constant weights the logits reach
    1e10 and tie, so the softmax of any float16 run differs; the logits themselves compare."""
    model = onnx.load(SQUEEZENET)
    softmax = model.graph.node[-1]
    assert softmax.op_type == "Softmax"
    model.graph.node.remove(softmax)
    model.graph.output[0].name = softmax.input[0]
    onnx.save(model, tmp_path / "logits.onnx")
    return str(tmp_path / "logits.onnx")


def test_float16_needs_calibration_on_this_model(tmp_path):
    """The light zoo's constant weights push activations past float16's range: transpiled
    blindly the outputs break (diff exits 3); calibrated, the overflowing ops stay float32."""
    spec, value = _input_file(tmp_path)
    model = _logits_model(tmp_path)
    assert halfway("transpile", model, "-o", tmp_path / "blind", "--fp16").returncode == 0
    blind = halfway("diff", model, tmp_path / "blind.pdmodel", "--input", spec)
    assert blind.returncode == 3 and "DIFFERENT" in blind.stdout
    assert "Warning" not in blind.stderr  # numpy's overflow warnings are not shown
    np.savez(tmp_path / "calibration.npz", **dummy_inputs(onnx.load(SQUEEZENET), seed=1))
    report = halfway_json("transpile", model, "-o", tmp_path / "half", "--fp16", "--calibrate",
                          tmp_path / "calibration.npz")
    half, kept = (int(n) for n in report["float16"]["ops float16 / float32"].split(" / "))
    assert half > 0 and kept > 0
    diff = halfway_json("diff", model, tmp_path / "half.pdmodel", "--input", spec, "--rtol", "1e-2")
    (row,) = diff["outputs"]
    assert diff["same"], row
    assert halfway("graph", tmp_path / "half.pdmodel", "-o", tmp_path / "half.html").returncode == 0
    assert "float16 op" in (tmp_path / "half.html").read_text()
