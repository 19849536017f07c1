"""Tiny exports of today's architectures (tests/modern.py) import without input shapes and match
ONNX Runtime at every saved batch and sequence length or image size, as imported and after the
default passes; the ones that do not yet are strict expected failures."""

import hashlib

import numpy as np
import onnx
import pytest

import halfway
from tests.support.modern import (
    EXPECTED_FAILURES,
    FIXTURE_DIR,
    STAGES,
    cases,
    check_fixture,
    compare,
    expected_failure,
    fixtures,
)

NAMES = [entry["name"] for entry in fixtures()]


def _param(name: str, stage: str) -> pytest.param:
    row = expected_failure(name)
    marks = [pytest.mark.xfail(strict=True, reason=row[0], raises=row[1])] if row else []
    return pytest.param(name, stage, marks=marks, id=f"{name}-{stage}")


@pytest.mark.parametrize("name,stage", [_param(name, stage) for name in NAMES for stage in STAGES])
def test_matches_onnxruntime(name, stage):
    check_fixture(name, stage)


def test_expected_failures_name_fixtures():
    listed = [name for names in EXPECTED_FAILURES.values() for name in names]
    assert len(listed) == len(set(listed)), "a fixture is listed under two reasons"
    assert not set(listed) - set(NAMES), "EXPECTED_FAILURES names fixtures the manifest does not have"


def test_files_match_the_manifest():
    listed = {f["file"]: f for entry in fixtures() for f in entry["files"]}
    on_disk = {p.name for p in FIXTURE_DIR.iterdir()} - {"MANIFEST.json"}
    assert on_disk == set(listed), f"not in the manifest: {sorted(on_disk - set(listed))}; " \
                                   f"missing: {sorted(set(listed) - on_disk)}"
    for name, f in listed.items():
        data = (FIXTURE_DIR / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f["bytes"], f["sha256"]), f"{name} is stale"


@pytest.mark.parametrize("name", NAMES)
def test_graph_and_cases_match_the_manifest(name):
    entry = next(e for e in fixtures() if e["name"] == name)
    graph = onnx.load(str(FIXTURE_DIR / f"{name}.onnx"), load_external_data=False).graph
    assert [v.name for v in graph.input] == [v["name"] for v in entry["inputs"]]
    assert [v.name for v in graph.output] == [v["name"] for v in entry["outputs"]]
    assert len(cases(name)) == len(entry["cases"]) >= 2
    for (inputs, outputs), case in zip(cases(name), entry["cases"]):
        assert set(outputs) == {v["name"] for v in entry["outputs"]}
        for spec in entry["inputs"]:
            value = inputs[spec["name"]]
            assert value.dtype == np.dtype(spec["dtype"]) and value.shape[0] == case["batch"]
            assert all(d == n for d, n in zip(spec["dims"], value.shape) if isinstance(d, int))


def test_symbolic_dims_vary_across_cases():
    """Every fixture is exported with dynamic dims, and its cases use at least two values of one."""
    for entry in fixtures():
        assert any(isinstance(d, str) for v in entry["inputs"] for d in v["dims"]), entry["name"]
        shapes = {tuple(v.shape) for inputs, _ in cases(entry["name"]) for v in inputs.values()}
        assert len(shapes) >= 2, entry["name"]


@pytest.mark.parametrize("name", ["bert_eager_torchscript", "gpt2_sdpa_dynamo", "llama_eager_torchscript",
                                  "t5_encoder_eager_dynamo", "vit_eager_torchscript", "swin_eager_dynamo"])
def test_fixed_input_shapes_fold_the_shape_arithmetic(name):
    """``input_shapes`` of one saved case: the shape ops fold at import (constant folding through
    onnx's reference ops included) and the program matches ONNX Runtime at that case."""
    inputs, want = cases(name)[-1]
    program, feeds, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"),
                                                  input_shapes={n: list(v.shape) for n, v in inputs.items()})
    assert "shape" not in {op.type for op in program.global_block().ops}
    got = halfway.Executor().run(program, inputs, fetches, scope)
    for fetch, value in zip(fetches, got):
        compare(value, want[fetch], f"{name}: output {fetch}")
