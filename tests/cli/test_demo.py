"""The demo: its shipped models (reproducible, imported as ONNX Runtime runs them) and its table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from halfway.api.models import load_model
from halfway.api.prepare import prepare
from halfway.cli.demo import DEMO_MODEL, DEMO_MODELS, demo_inputs, demo_model_path
from halfway.executor.place import CPUPlace
from halfway.ir.errors import HalfwayError
from tests.support.clirun import DEMO_BERT, DEMO_ONNX, RESNET_TINY, ROOT, halfway, halfway_json, proto_op_types

SEQUENCE = DEMO_MODELS[DEMO_BERT.name]


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


def test_the_shipped_transformer_is_package_data_made_by_its_script(tmp_path):
    """Numpy's seeded weights alone: the script writes the shipped bytes again."""
    assert demo_model_path(DEMO_BERT.name) == DEMO_BERT and DEMO_BERT.stat().st_size < 5 * 2**20
    remade = tmp_path / "remade.onnx"
    subprocess.run([sys.executable, ROOT / "scripts" / "make_demo_bert.py", "--out", remade], check=True,
                   capture_output=True)
    assert remade.read_bytes() == DEMO_BERT.read_bytes()
    inputs = onnx.load(DEMO_BERT).graph.input
    assert [(i.name, i.type.tensor_type.elem_type) for i in inputs] == [("input_ids", onnx.TensorProto.INT64),
                                                                         ("attention_mask", onnx.TensorProto.INT64)]
    assert all([d.dim_param for d in i.type.tensor_type.shape.dim] == ["batch", "sequence"] for i in inputs)


def test_the_imported_transformer_computes_what_onnxruntime_does(tmp_path):
    """On the demo's padded token batches; the padding is masked: other ids there change nothing."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(DEMO_BERT), providers=["CPUExecutionProvider"])
    feeds = demo_inputs(load_model(str(DEMO_BERT)), 5, SEQUENCE)
    assert 0 < feeds["attention_mask"].sum() < feeds["attention_mask"].size  # some padding
    np.savez(tmp_path / "tokens.npz", **feeds)
    done = halfway("run", DEMO_BERT, "--input", tmp_path / "tokens.npz", "-o", tmp_path / "out.npz")
    assert done.returncode == 0, done.stderr
    got = np.load(tmp_path / "out.npz")
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    assert sorted(got.files) == sorted(expected)
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=name)
    repadded = dict(feeds, input_ids=np.where(feeds["attention_mask"] == 1, feeds["input_ids"], 7))
    np.testing.assert_allclose(session.run(["logits"], repadded)[0], expected["logits"], rtol=1e-5, atol=1e-5)
    # seeded but meaningful: unit-scale states, logits spread over a few units
    assert 0.5 < expected["last_hidden_state"].std() < 2 and expected["logits"].std() > 1


def test_the_demo_table_on_every_place(tmp_path):
    report = halfway_json("demo", "--samples", "4", "--out", tmp_path)
    assert report["failures"] == []
    opencl = _opencl_builds()
    rows = {(r["model"], r["place"].split(":")[0], r["precision"]): r for r in report["rows"]}
    places = ["cpu", "opencl"] if opencl else ["cpu"]
    assert sorted(rows) == sorted((m, p, q) for m in DEMO_MODELS for p in places for q in ("float32", "float16"))
    graphs = {name: onnx.load(demo_model_path(name)).graph for name in DEMO_MODELS}
    for (model, place, precision), row in rows.items():
        assert row["timed_runs"] == 4 and row["latency_median_s"] > 0 and row["activation_peak_bytes"] > 0
        if precision == "float32":
            assert row["max_rel_error"] < 1e-4 and row["top1_agreement"] == 1.0 and row["casts_inserted"] == 0
        else:
            assert 1e-5 < row["max_rel_error"] < 3e-2 and row["top1_agreement"] >= 0.75
            assert row["casts_inserted"] >= len(graphs[model].output)  # a cast at least for each output
        half, full = (rows[model, "cpu", p]["parameter_bytes"] for p in ("float16", "float32"))
        assert full <= sum(t.ByteSize() for t in graphs[model].initializer) and 0.45 * full < half < 0.55 * full
    for summary in report["models"]:
        graph, found = graphs[summary["model"]], dict(summary["fused_ops"])
        # a layer normalisation may take its residual add along (skip_layer_norm) or not
        assert found.pop("layer_norm", 0) + found.pop("skip_layer_norm", 0) == _count(graph, "LayerNormalization")
        assert found == _fused_ops(graph)
    assert all(r["ops_fused"] >= _count(graphs[DEMO_MODEL], "BatchNormalization")
               for r in report["rows"] if r["model"] == DEMO_MODEL)  # every batch norm folds into its conv
    _check_against_onnxruntime(rows, tmp_path / DEMO_BERT.stem)


def _count(graph: onnx.GraphProto, op_type: str) -> int:
    return sum(n.op_type == op_type for n in graph.node)


def _fused_ops(graph: onnx.GraphProto) -> dict[str, int]:
    """The fused ops halfway should make of an exported graph, counted in the graph: one attention
    per softmax, a gelu per Erf, a conv per Conv, an fc per product with a weight (MatMul by an
    initializer, Gemm) but one for each attention's query, key and value (``fuse_projections``
    joins the three)."""
    weights = {t.name for t in graph.initializer}
    products = _count(graph, "Gemm") + sum(n.op_type == "MatMul" and n.input[1] in weights for n in graph.node)
    found = {"attention": _count(graph, "Softmax"), "gelu": _count(graph, "Erf"), "conv": _count(graph, "Conv"),
             "fc": products - 2 * _count(graph, "Softmax")}
    return {label: n for label, n in found.items() if n}


def _check_against_onnxruntime(rows: dict, saved: Path) -> None:
    """The transformer's cpu rows hold the errors of its programs (as the demo saved them) against
    ONNX Runtime's outputs, up to how far the demo's reference (the imported model on numpy) is
    from those: |err(out, ref) - err(out, ort)| <= err(ref, ort)."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(DEMO_BERT), providers=["CPUExecutionProvider"])
    imported = load_model(str(DEMO_BERT))
    feeds = [demo_inputs(imported, seed, SEQUENCE) for seed in range(4)]
    names = [o.name for o in session.get_outputs()]
    expected = _stacked([dict(zip(names, session.run(None, f))) for f in feeds])
    reference = _stacked(_outputs(imported, feeds))
    slack = max(np.abs(reference[n] - expected[n]).max() for n in names)
    assert slack < 1e-5 * max(np.abs(expected[n]).max() for n in names)
    for precision, folder in (("float32", "model_fp32"), ("float16", "model_fp16")):
        got, row = _stacked(_outputs(load_model(str(saved / folder)), feeds)), rows[DEMO_BERT.name, "cpu", precision]
        error = max(np.abs(got[n] - expected[n]).max() for n in names)
        assert abs(error - row["max_abs_error"]) <= slack + 1e-7, (precision, error, row["max_abs_error"])
        agree = np.mean(got["logits"].argmax(-1) == expected["logits"].argmax(-1))
        assert row["top1_agreement"] == agree, precision


def _stacked(outputs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.stack([o[name] for o in outputs]) for name in outputs[0]}


def _outputs(model, feeds: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """``model``'s outputs on numpy for each of ``feeds``, by output name."""
    prepared = prepare(model.program, model.scope, model.feed_names, model.fetch_names, feeds[0], CPUPlace())
    return [dict(zip(model.fetch_names, prepared.run(f))) for f in feeds]


def test_the_readme_command_prints_one_table():
    done = subprocess.run([ROOT / "scripts" / "dev.sh", "demo", "--place", "cpu", "--samples", "2"],
                          capture_output=True, text=True, check=False, timeout=600,
                          env=os.environ | {"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    header = next((line for line in done.stdout.splitlines() if "precision" in line), done.stdout)
    for column in ["model", "place", "latency", "params", "act. peak", "max abs err", "max rel err", "top-1", "fused",
                   "casts"]:
        assert column in header
    assert "demo_resnet18.onnx (onnx)" in done.stdout and "demo_bert.onnx (onnx)" in done.stdout
    bert = onnx.load(DEMO_BERT).graph
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("demo_bert.onnx")]
    assert f"({_count(bert, 'Softmax')} attention, " in line and " layer_norm, " in line
    assert "✓ transpiling demo_bert.onnx to float16" in done.stderr


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
