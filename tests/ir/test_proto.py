"""The wire format: the checked-in generated module matches framework.proto and Paddle's files."""

import subprocess
import sys
from pathlib import Path

from halfway.proto import framework_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "paddle"


def test_generated_module_matches_proto():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_field_numbers_match_paddle():
    # A few numbers Paddle's files depend on (the facts sheet lists them all).
    fields = pb.OpDesc.Attr.DESCRIPTOR.fields_by_name
    assert fields["vars_name"].number == 18 and fields["scalars"].number == 21
    assert pb.VarType.DESCRIPTOR.fields_by_name["dense_tensor"].number == 3
    assert pb.VarType.DENSE_TENSOR == 7 and pb.VarType.FP16 == 4 and pb.VarType.FP8_E5M2 == 33
    assert pb.BlockDesc.DESCRIPTOR.fields_by_name["forward_block_idx"].default_value == -1
    assert pb.ProgramDesc.DESCRIPTOR.fields_by_name["op_version_map"].number == 5
    # proto2: required fields exist (Paddle rejects files missing them)
    assert pb.BlockDesc.DESCRIPTOR.fields_by_name["idx"].label == pb.BlockDesc.DESCRIPTOR.fields_by_name["idx"].LABEL_REQUIRED


def test_paddle_pdmodel_parses_and_reserializes_identically():
    for path in [FIXTURES / "resnet_tiny.pdmodel", FIXTURES / "mlp_tiny.pdmodel"]:
        data = path.read_bytes()
        desc = pb.ProgramDesc()
        desc.ParseFromString(data)
        assert desc.SerializeToString() == data
        assert {op.type for op in desc.blocks[0].ops} >= {"feed", "fetch", "matmul_v2"}
