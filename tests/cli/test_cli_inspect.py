"""``halfway inspect``: its facts checked against the model file read by protobuf alone."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx

from halfway.proto import framework_pb2
from tests.support.clirun import DEMO_BERT, RESNET_TINY, halfway, halfway_json, proto_of, proto_op_types

FP32 = framework_pb2.VarType.FP32


def _params(model):
    """name -> dims of the persistable tensors in the file."""
    return {v.name: list(v.type.dense_tensor.tensor.dims) for v in proto_of(model).blocks[0].vars
            if v.persistable and v.type.type == framework_pb2.VarType.DENSE_TENSOR}


def test_summary_matches_the_file():
    facts = halfway_json("inspect", RESNET_TINY)
    by_type = Counter()
    for entry in facts["ops_by_type"]:
        assert entry["dtype"] == "float32"
        by_type[entry["type"]] += entry["count"]
    assert by_type == proto_op_types(RESNET_TINY)
    assert facts["ops"] == sum(by_type.values())
    params = _params(RESNET_TINY)
    elements = sum(int(np.prod(d)) for d in params.values())
    assert facts["parameters"]["count"] == len(params)
    assert facts["parameters"]["elements"] == elements
    assert facts["parameters"]["bytes_by_dtype"] == {"float32": 4 * elements}
    # every parameter is in the .pdiparams file, each with a header: the file is a bit larger
    assert 4 * elements < RESNET_TINY.with_suffix(".pdiparams").stat().st_size < 4 * elements + 200 * len(params)
    io = np.load(RESNET_TINY.with_name("resnet_tiny_io.npz"))
    assert facts["inputs"] == [{"name": "image", "dtype": "float32", "shape": list(io["image"].shape)}]
    fetch = str(io["__fetch_names__"][0])
    assert facts["outputs"] == [{"name": fetch, "dtype": "float32", "shape": list(io[fetch].shape)}]


def test_tables_for_people():
    done = halfway("inspect", RESNET_TINY)
    assert done.returncode == 0, done.stderr
    assert "ops by type and precision" in done.stdout and "inputs and outputs" in done.stdout
    for op_type, count in proto_op_types(RESNET_TINY).items():
        assert any(op_type in line and line.rstrip(" │").endswith(str(count)) for line in done.stdout.splitlines())
    assert "\x1b[" not in done.stdout  # no colour codes when not a terminal


def test_text_is_the_whole_program():
    done = halfway("inspect", RESNET_TINY, "--text")
    assert done.returncode == 0, done.stderr
    names = {v.name for v in proto_of(RESNET_TINY).blocks[0].vars}
    assert all(f"var {n} :" in done.stdout for n in names)
    assert done.stdout.count(" = conv2d(") == proto_op_types(RESNET_TINY)["conv2d"]
    assert all(line.endswith("}") for line in done.stdout.splitlines() if " = conv2d(" in line)  # not cropped
    assert "text" in halfway_json("inspect", RESNET_TINY, "--text")


def test_every_model_form_is_accepted(tmp_path):
    legacy = RESNET_TINY.with_name("resnet_tiny_legacy")
    prefix = str(RESNET_TINY)[: -len(".pdmodel")]
    counts = {str(p): halfway_json("inspect", p)["ops"] for p in (RESNET_TINY, prefix, legacy)}
    assert len(set(counts.values())) == 1, counts


def test_op_types_carry_the_onnx_ops_they_stand_for():
    """Every name listed is an ONNX op (onnx's own schemas), and every op of the model's graph
    (read with onnx) is named by a type the import made of it."""
    nodes = {node.op_type for node in onnx.load(DEMO_BERT).graph.node}
    facts = halfway_json("inspect", DEMO_BERT)
    by_type = {o["type"]: o["onnx"] for o in facts["ops_by_type"]}
    assert by_type["matmul_v2"][:2] == ["MatMul", "Gemm"] and by_type["layer_norm"] == ["LayerNormalization"]
    assert all(onnx.defs.has(name) for names in by_type.values() for name in names)
    assert nodes <= {name for names in by_type.values() for name in names}
    table = halfway("inspect", DEMO_BERT).stdout
    assert "matmul_v2 (MatMul/Gemm/…)" in table and "softmax (Softmax)" in table
