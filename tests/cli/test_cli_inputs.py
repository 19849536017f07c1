"""The inputs ``run``, ``bench``, ``diff`` and ``demo`` make and take: values the model can take,
``--input-shapes``, outputs that are not finite, and strict JSON."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.support.clirun import DEMO_BERT, DEMO_ONNX, halfway, halfway_json, one_line_error

WORDS = next(t.dims[0] for t in onnx.load(DEMO_BERT).graph.initializer if t.name.endswith("word_embeddings.weight"))


def _strict(text: str):
    """``text`` parsed as strict JSON (no bare NaN or Infinity)."""
    def refuse(constant):
        raise AssertionError(f"bare {constant} in the JSON")

    return json.loads(text, parse_constant=refuse)


def test_run_without_inputs_feeds_bert_ids_and_a_mask_it_can_take():
    done = halfway("run", DEMO_BERT, "--json")
    assert done.returncode == 0, done.stderr
    facts = _strict(done.stdout)
    ids, mask = facts["inputs"]["input_ids"], facts["inputs"]["attention_mask"]
    assert 0 <= ids["min"] and ids["max"] < WORDS and mask["min"] == mask["max"] == 1
    assert all(np.isfinite(s["mean"]) for s in facts["outputs"].values())
    assert "warning" not in done.stderr
    assert "free dims set to 1: input_ids:1x1, attention_mask:1x1" in done.stderr


def test_input_shapes_size_free_dims_and_inputs_sharing_a_name_follow():
    facts = halfway_json("run", DEMO_BERT, "--input-shapes", "input_ids:2x64")
    assert facts["inputs"]["input_ids"]["shape"] == facts["inputs"]["attention_mask"]["shape"] == [2, 64]
    assert facts["outputs"]["last_hidden_state"]["shape"] == [2, 64, 128]
    report = halfway_json("bench", DEMO_BERT, "--place", "cpu", "--repeat", "1", "--warmup", "0",
                          "--input-shapes", "input_ids:1x32,attention_mask:1x32")
    assert report["results"][0]["runs"] == 1
    diff = halfway_json("diff", DEMO_BERT, DEMO_BERT, "--input-shapes", "input_ids:3x8")
    assert diff["outputs"][1]["shape"] == [3, 8, 128] and diff["same"]
    demo = halfway_json("demo", "--model", DEMO_BERT, "--place", "cpu", "--samples", "1", "--warmup", "0",
                        "--input-shapes", "input_ids:1x8")
    assert demo["failures"] == [] and {r["precision"] for r in demo["rows"]} == {"float32", "float16"}


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["run", DEMO_BERT, "--input-shapes", "input_ids"], 2, "expected name:1x128"),
    (["run", DEMO_BERT, "--input-shapes", "input_ids:2x0"], 2, "positive dims"),
    (["run", DEMO_BERT, "--input-shapes", "ids:2x8"], 1, "'ids', which is not an input"),
    (["run", DEMO_BERT, "--input-shapes", "input_ids:2x8x1"], 1, "has shape [-1, -1]"),
    (["bench", DEMO_ONNX, "--input-shapes", "image:2x3x128x128"], 1, "has shape [1, 3, 128, 128]"),
    (["diff", DEMO_ONNX, DEMO_ONNX, "--input", "x.npz", "--input-shapes", "image:1x3x128x128"], 2,
     "--input arrays keep their own shapes"),
    (["demo", "--input-shapes", "image:1x3x128x128"], 2, "inputs of a --model"),
])
def test_input_shapes_the_model_cannot_take(args, code, fragment):
    done = halfway(*args)
    one_line_error(done, fragment)
    assert done.returncode == code


def test_ids_outside_the_vocabulary_name_the_input(tmp_path):
    ids = np.array([[1, WORDS + 3]], np.int64)
    np.savez(tmp_path / "tokens.npz", input_ids=ids, attention_mask=np.ones_like(ids))
    one_line_error(halfway("run", DEMO_BERT, "--input", tmp_path / "tokens.npz"),
                   f"input 'input_ids': id {WORDS + 3} is outside the {WORDS} rows", "word_embeddings")


def _not_finite_model(path):
    """out_nan = sqrt(-x) (NaN for x > 0), out_inf = 1 / (x * 0), out_ok = x."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("out_nan", "out_inf", "out_ok")]
    nodes = [helper.make_node("Neg", ["x"], ["neg"]), helper.make_node("Sqrt", ["neg"], ["out_nan"]),
             helper.make_node("Mul", ["x", "zero"], ["zeros"]), helper.make_node("Reciprocal", ["zeros"], ["out_inf"]),
             helper.make_node("Identity", ["x"], ["out_ok"])]
    graph = helper.make_graph(nodes, "not_finite", [x], outs, [numpy_helper.from_array(np.zeros(1, np.float32), "zero")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def test_outputs_that_are_not_finite_are_warnings_and_json_stays_strict(tmp_path):
    model = tmp_path / "not_finite.onnx"
    _not_finite_model(model)
    np.save(tmp_path / "x.npy", np.array([[0.5, 0.0, 2.0, -1.0]], np.float32))
    done = halfway("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--json")
    assert done.returncode == 0, done.stderr
    facts = _strict(done.stdout)
    assert facts["outputs"]["out_nan"]["mean"] == "NaN" and facts["outputs"]["out_inf"]["max"] == "Infinity"
    assert facts["outputs"]["out_ok"]["max"] == 2.0
    warnings = [line for line in done.stderr.splitlines() if line.startswith("halfway: warning:")]
    assert warnings == ["halfway: warning: output 'out_nan' holds 2 NaN of 4 values (cpu)",
                        "halfway: warning: output 'out_inf' holds 4 inf of 4 values (cpu)"]
    for args in (["bench", model, "--place", "cpu", "--repeat", "1"], ["diff", model, model]):
        done = halfway(*args)
        assert "halfway: warning: output 'out_nan' holds" in done.stderr, done.stderr
