"""The demo: its shipped model (reproducible, imported as ONNX Runtime runs it) and its table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

from halfway.demo import demo_model_path
from halfway.ir.errors import HalfwayError
from tests.clirun import DEMO_ONNX, RESNET_TINY, ROOT, halfway, halfway_json, proto_op_types


def test_the_shipped_model_is_package_data_made_by_its_script(tmp_path):
    """Same graph, same seeded weights; the batch-norm statistics and the classifier, measured
    with ONNX Runtime, agree to float32 rounding (its kernels differ by version and CPU)."""
    pytest.importorskip("onnxruntime")  # the script measures the statistics with it
    assert demo_model_path() == DEMO_ONNX and DEMO_ONNX.stat().st_size < 5 * 2**20
    remade_path = tmp_path / "remade.onnx"
    subprocess.run([sys.executable, ROOT / "scripts" / "make_demo_model.py", "--out", remade_path], check=True,
                   capture_output=True)
    shipped, remade = onnx.load(DEMO_ONNX), onnx.load(remade_path)
    assert remade.graph.node == shipped.graph.node and remade.opset_import == shipped.opset_import
    assert (remade.graph.input, remade.graph.output) == (shipped.graph.input, shipped.graph.output)
    assert [t.name for t in remade.graph.initializer] == [t.name for t in shipped.graph.initializer]
    for mine, theirs in zip(remade.graph.initializer, shipped.graph.initializer):
        want = onnx.numpy_helper.to_array(theirs)
        np.testing.assert_allclose(onnx.numpy_helper.to_array(mine), want, rtol=1e-5,
                                   atol=1e-6 * float(np.abs(want).max()), err_msg=mine.name)


def test_the_imported_model_computes_what_onnxruntime_does(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(DEMO_ONNX), providers=["CPUExecutionProvider"])
    (image,) = session.get_inputs()
    x = np.random.default_rng(7).standard_normal(image.shape).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    done = halfway("run", DEMO_ONNX, "--input", f"{image.name}=" + str(tmp_path / "x.npy"), "-o", tmp_path / "y.npz")
    assert done.returncode == 0, done.stderr
    (got,) = np.load(tmp_path / "y.npz").values()
    expected = session.run(None, {image.name: x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    # seeded but meaningful: the logits spread over several units and pick a clear class
    assert expected.std() > 1 and np.sort(expected[0])[-1] - np.sort(expected[0])[-2] > 0.01


def test_the_demo_table_on_every_place():
    report = halfway_json("demo", "--samples", "4")
    assert report["failures"] == []
    opencl = _opencl_builds()
    rows = {(r["place"].split(":")[0], r["precision"]): r for r in report["rows"]}
    places = ["cpu", "opencl"] if opencl else ["cpu"]
    assert sorted(rows) == sorted((p, q) for p in places for q in ("float32", "float16"))
    batch_norms = sum(n.op_type == "BatchNormalization" for n in onnx.load(DEMO_ONNX).graph.node)
    for (place, precision), row in rows.items():
        assert row["timed_runs"] == 4 and row["latency_median_s"] > 0
        assert row["ops_fused"] >= batch_norms  # every batch norm folds into its conv
        assert row["activation_peak_bytes"] > 0
        if precision == "float32":
            assert row["max_rel_error"] < 1e-4 and row["top1_agreement"] == 1.0 and row["casts_inserted"] == 0
        else:
            assert 1e-5 < row["max_rel_error"] < 3e-2 and row["top1_agreement"] >= 0.75
            assert row["casts_inserted"] >= 2  # at least the input and the output
    half, full = rows["cpu", "float16"]["parameter_bytes"], rows["cpu", "float32"]["parameter_bytes"]
    params = sum(t.ByteSize() for t in onnx.load(DEMO_ONNX).graph.initializer)
    assert full <= params and 0.45 * full < half < 0.55 * full


def test_the_readme_command_prints_one_table():
    done = subprocess.run([ROOT / "scripts" / "dev.sh", "demo", "--place", "cpu", "--samples", "2"],
                          capture_output=True, text=True, check=False, timeout=600,
                          env=os.environ | {"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    header = next((line for line in done.stdout.splitlines() if "precision" in line), done.stdout)
    for column in ["place", "latency", "params", "act. peak", "max abs err", "max rel err", "top-1", "fused", "casts"]:
        assert column in header
    assert "demo_resnet18.onnx (onnx)" in done.stdout
    assert "✓ transpiling to float16" in done.stderr


def test_any_model_and_saved_results(tmp_path):
    report = halfway_json("demo", "--model", RESNET_TINY, "--place", "cpu", "--samples", "2",
                          "--out", tmp_path)
    assert [r["precision"] for r in report["rows"]] == ["float32", "float16"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_fp16.pdiparams", "model_fp16.pdmodel",
                                                         "model_fp16.pdmodel.sha256", "model_fp32.pdiparams",
                                                         "model_fp32.pdmodel", "model_fp32.pdmodel.sha256"]
    assert proto_op_types(tmp_path / "model_fp16.pdmodel")["cast"] == report["rows"][1]["casts_inserted"]
    ops = sum(proto_op_types(RESNET_TINY).values()) - sum(proto_op_types(tmp_path / "model_fp32.pdmodel").values())
    assert report["rows"][0]["ops_fused"] == ops
    assert json.loads(json.dumps(report)) == report


def _opencl_builds() -> bool:
    """Whether an OpenCL device builds programs (pyopencl installed, and a working compiler)."""
    try:
        from halfway.kernels.opencl.runtime import find_device

        find_device()
    except HalfwayError:
        return False
    return True
