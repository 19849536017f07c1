"""Program <-> ProgramDesc: every attr type, var kind and optional-field presence round-trips."""

from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.ir import AttrType, DType, Operator, Program, SerdeError, VarKind, serde
from halfway.proto import framework_pb2 as pb

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"

ALL_ATTRS = {
    "i": (AttrType.INT, -7), "f": (AttrType.FLOAT, 0.1), "s": (AttrType.STRING, "héllo"),
    "ints": (AttrType.INTS, [1, -2, 3]), "floats": (AttrType.FLOATS, [0.5, -1.25]),
    "strings": (AttrType.STRINGS, ["a", ""]), "b": (AttrType.BOOLEAN, True),
    "bools": (AttrType.BOOLEANS, [True, False]), "blk": (AttrType.BLOCK, 1),
    "l": (AttrType.LONG, 2**40), "blks": (AttrType.BLOCKS, [1]), "longs": (AttrType.LONGS, [2**40, -1]),
    "f64s": (AttrType.FLOAT64S, [1e-300, 2.5]), "var": (AttrType.VAR, "x"), "vars": (AttrType.VARS, ["x", "y"]),
    "f64": (AttrType.FLOAT64, 1e-300), "scalar": (AttrType.SCALAR, 3 + 4j),
    "scalars": (AttrType.SCALARS, [True, 5, 2.5, 1j]),
}


def _program_with_everything() -> Program:
    prog = Program()
    block = prog.global_block()
    block.create_var("x", dtype="float16", shape=[-1, 3])
    block.create_var("y", dtype=DType.int64, shape=[])
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    block.create_var("rows", kind=VarKind.SELECTED_ROWS, dtype="float32", shape=[4, 2])
    block.create_var("arr", kind=VarKind.DENSE_TENSOR_ARRAY, dtype="int32", shape=[2], lod_level=1)
    sub = prog.create_block(0)
    sub.create_var("inner", dtype="float32", shape=[1])
    op = Operator("custom_everything", {"X": ["x", "y"], "Empty": []}, {"Out": ["y"]})
    for name, (attr_type, value) in ALL_ATTRS.items():
        op.set_attr(name, value, attr_type)
    block.insert_op(0, op)
    prog.version = 3
    prog.op_version_map = {"conv2d": 1, "abs": 0}
    return prog


def test_every_attr_type_round_trips():
    prog = _program_with_everything()
    data = prog.to_bytes()
    back = Program.from_bytes(data)
    assert back.to_bytes() == data
    op = back.global_block().ops[0]
    for name, (attr_type, value) in ALL_ATTRS.items():
        assert op.attr_type(name) is attr_type
        got = op.attr(name)
        expected = tuple(value) if isinstance(value, list) else value
        if attr_type is AttrType.FLOAT:
            assert got == float(np.float32(value))
        elif attr_type is AttrType.FLOATS:
            assert got == tuple(float(np.float32(v)) for v in value)
        else:
            assert got == expected, name
    assert op.inputs == {"X": ("x", "y"), "Empty": ()}
    assert back.version == 3 and back.op_version_map == {"conv2d": 1, "abs": 0}


def test_var_kinds_round_trip():
    back = Program.from_bytes(_program_with_everything().to_bytes())
    block = back.global_block()
    assert block.var("x").dtype is DType.float16 and block.var("x").shape == (-1, 3)
    assert block.var("y").shape == ()
    assert block.var("feed").kind is VarKind.FEED_MINIBATCH and block.var("feed").dtype is None
    assert block.var("rows").kind is VarKind.SELECTED_ROWS and block.var("rows").shape == (4, 2)
    assert block.var("arr").lod_level == 1
    assert back.blocks[1].parent_idx == 0 and back.blocks[1].has_var("inner")


def test_unmodelled_var_type_is_kept_verbatim():
    desc = pb.ProgramDesc()
    block = desc.blocks.add(idx=0, parent_idx=-1)
    var = block.vars.add(name="t")
    var.type.type = pb.VarType.TUPLE
    var.type.tuple.element_type.extend([pb.VarType.FP32, pb.VarType.INT64])
    data = desc.SerializeToString()
    prog = Program.from_bytes(data)
    assert prog.global_block().var("t").kind is VarKind.TUPLE
    assert prog.to_bytes() == data


def test_presence_of_optional_fields_is_preserved():
    desc = pb.ProgramDesc()
    block = desc.blocks.add(idx=0, parent_idx=-1, forward_block_idx=-1)
    block.vars.add(name="a", persistable=False, stop_gradient=False).type.type = pb.VarType.FEED_MINIBATCH
    block.vars.add(name="b").type.type = pb.VarType.FETCH_LIST
    block.ops.add(type="noop", is_target=False)
    data = desc.SerializeToString()
    assert Program.from_bytes(data).to_bytes() == data


@pytest.mark.parametrize("name", ["resnet_tiny.pdmodel", "mlp_tiny.pdmodel"])
def test_paddle_files_round_trip_byte_identically(name):
    data = (FIXTURES / name).read_bytes()
    prog = Program.from_bytes(data)
    assert prog.to_bytes() == data
    assert prog.clone().to_bytes() == data


def test_edits_show_up_in_the_bytes():
    prog = Program.from_bytes((FIXTURES / "mlp_tiny.pdmodel").read_bytes())
    relu = next(op for op in prog.global_block().ops if op.type == "relu")
    relu.set_attr("note", "edited")
    again = Program.from_bytes(prog.to_bytes())
    assert next(op for op in again.global_block().ops if op.type == "relu").attr("note") == "edited"


@pytest.mark.parametrize("data, message", [
    (b"\xff\xff\xff", "not a valid ProgramDesc"),
    (pb.ProgramDesc().SerializeToString(), "no blocks"),
    (pb.ProgramDesc(blocks=[pb.BlockDesc(idx=1, parent_idx=-1)]).SerializeToString(), "says its idx is 1"),
])
def test_bad_bytes_raise_serde_error_naming_the_source(data, message):
    with pytest.raises(SerdeError, match=message) as info:
        Program.from_bytes(data, source="bad.pdmodel")
    assert "bad.pdmodel" in str(info.value)


def test_duplicate_var_is_rejected():
    desc = pb.ProgramDesc()
    block = desc.blocks.add(idx=0, parent_idx=-1)
    for _ in range(2):
        block.vars.add(name="v").type.type = pb.VarType.FETCH_LIST
    with pytest.raises(SerdeError, match="declares var 'v' twice"):
        Program.from_bytes(desc.SerializeToString())


def test_tensor_desc_codec():
    data = serde.tensor_desc_to_bytes(DType.float16, (2, 3))
    assert serde.tensor_desc_from_bytes(data) == (DType.float16, (2, 3))
    with pytest.raises(SerdeError):
        serde.tensor_desc_from_bytes(b"\x08\x63")  # unknown enum value
    with pytest.raises(SerdeError, match="not an element type"):
        serde.tensor_desc_from_bytes(b"\x08\x07")  # DENSE_TENSOR is a var kind


def test_halfway_error_is_the_root():
    assert issubclass(SerdeError, halfway.HalfwayError)
