"""``halfway bench`` and ``halfway diff``."""

from __future__ import annotations

import json

import numpy as np

import halfway
from halfway.executor import Executor
from tests.support.clirun import DEMO_BERT, RESNET_TINY, halfway_json, one_line_error
from tests.support.clirun import halfway as cli

IO = np.load(RESNET_TINY.with_name("resnet_tiny_io.npz"))
FETCH = str(IO["__fetch_names__"][0])
MLP = RESNET_TINY.with_name("mlp_tiny.pdmodel")


def test_bench_times_each_place():
    report = halfway_json("bench", RESNET_TINY, "--place", "cpu", "--repeat", "3", "--warmup", "1")
    (row,) = report["results"]
    assert row["runtime"] == "halfway cpu" and row["runs"] == 3
    assert 0 < row["min_s"] <= row["median_s"] < 10 and row["vs_first"] == 1.0
    program, feeds, fetches, scope = halfway.load_inference_model(str(RESNET_TINY))
    prepared = Executor().prepare(program, feeds, fetches, scope)
    assert row["activation_peak_bytes"] == prepared.report.peak_activation_bytes
    assert report["parameter_bytes"] == sum(scope.get(v.name).nbytes for v in program.persistable_vars())


def test_bench_table_and_peer_refusal():
    done = cli("bench", RESNET_TINY, "--repeat", "2")
    assert done.returncode == 0, done.stderr
    assert "halfway cpu" in done.stdout and "median" in done.stdout
    assert "timing halfway cpu" in done.stderr  # progress goes to stderr
    one_line_error(cli("bench", RESNET_TINY, "--place", "cpu", "--compare", "onnxruntime"), "needs an .onnx model")
    assert cli("bench", RESNET_TINY, "--compare", "tensorrt").returncode == 2


def test_diff_of_a_model_with_itself_is_zero():
    report = halfway_json("diff", RESNET_TINY, RESNET_TINY.with_name("resnet_tiny_legacy"))
    (row,) = report["outputs"]
    assert row["max_abs_error"] == 0 and row["top1_agreement"] == 1.0 and report["same"]


def _run(model, image):
    program, feeds, fetches, scope = halfway.load_inference_model(str(model))
    return Executor().run(program, {"image": image}, fetches, scope)[0]


def test_diff_measures_what_a_change_did(tmp_path):
    """Model B: the same program with its classifier weights scaled by 1.01, so its outputs
    differ by an amount measured here with the executor directly."""
    program, feeds, fetches, scope = halfway.load_inference_model(str(RESNET_TINY))
    weight = next(v.name for v in program.persistable_vars() if len(v.shape) == 2)
    scope.set(weight, scope.get(weight) * np.float32(1.01))
    halfway.save_inference_model(str(tmp_path / "scaled"), feeds, fetches, program, scope)
    np.save(tmp_path / "image.npy", IO["image"])
    args = ["diff", RESNET_TINY, tmp_path / "scaled.pdmodel", "--input", f"image={tmp_path / 'image.npy'}"]
    done = cli(*args)
    assert done.returncode == 3 and "DIFFERENT" in done.stdout
    a, b = _run(RESNET_TINY, IO["image"]), _run(tmp_path / "scaled.pdmodel", IO["image"])
    row = halfway_json(*args, "--rtol", "1")["outputs"][0]
    assert row["max_abs_error"] == float(np.abs(b.astype(np.float64) - a).max()) > 1e-4
    assert row["within_tolerance"]
    assert cli(*args, "--rtol", "1").returncode == 0


def test_diff_refuses_models_with_other_inputs():
    one_line_error(cli("diff", RESNET_TINY, MLP), "different inputs")


def test_diff_float16_preset_passes_halfways_own_float16_program(tmp_path):
    half = tmp_path / "bert_fp16"
    assert cli("transpile", DEMO_BERT, "-o", half, "--fp16").returncode == 0
    args = ["diff", DEMO_BERT, half, "--input-shapes", "input_ids:2x32"]
    done = cli(*args, "--preset", "float32", "--atol", "1e-6", "--rtol", "1e-6", "--json")
    strict = json.loads(done.stdout)
    assert done.returncode == 3 and not strict["same"] and (strict["atol"], strict["rtol"]) == (1e-6, 1e-6)
    report = halfway_json(*args, "--preset", "float16")
    assert (report["preset"], report["atol"], report["rtol"]) == ("float16", 1e-3, 1e-2)
    assert report["same"] and all(r["max_rel_error"] < 1e-2 for r in report["outputs"])
    tighter = cli(*args, "--preset", "float16", "--rtol", "1e-9", "--json")
    assert tighter.returncode == 3 and json.loads(tighter.stdout)["rtol"] == 1e-9
    assert cli(*args, "--preset", "bfloat16").returncode == 2
