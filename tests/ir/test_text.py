"""The text form: what it looks like, and that verbose text parses back to the same bytes."""

from pathlib import Path

import numpy as np
import pytest

from halfway.ir import AttrType, DType, Operator, Program, SerdeError, VarKind
from halfway.ir.text import op_to_text, program_from_text, program_to_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"

ALL_ATTRS = {
    "i": (AttrType.INT, -7), "f": (AttrType.FLOAT, 0.1), "s": (AttrType.STRING, 'hé "quoted"\nline'),
    "ints": (AttrType.INTS, [1, -2, 3]), "floats": (AttrType.FLOATS, [0.5, -1.25, 1e-5]),
    "strings": (AttrType.STRINGS, ["a", ""]), "b": (AttrType.BOOLEAN, True),
    "bools": (AttrType.BOOLEANS, [True, False]), "blk": (AttrType.BLOCK, 1),
    "l": (AttrType.LONG, 2**40), "small_long": (AttrType.LONG, 3), "blks": (AttrType.BLOCKS, [1]),
    "longs": (AttrType.LONGS, [2**40, -1]), "f64s": (AttrType.FLOAT64S, [1e-300, 2.5]),
    "var": (AttrType.VAR, "x"), "vars": (AttrType.VARS, ["x", "y"]), "f64": (AttrType.FLOAT64, 0.1),
    "scalar": (AttrType.SCALAR, 3 + 4j), "scalars": (AttrType.SCALARS, [True, 5, 2.5, 1j]),
    "empty_ints": (AttrType.INTS, []), "empty_strings": (AttrType.STRINGS, []),
    "f_big": (AttrType.FLOAT, float(np.finfo(np.float32).max)), "f_tiny": (AttrType.FLOAT, 1e-45),
    "f_inf": (AttrType.FLOAT, float("-inf")), "f_neg0": (AttrType.FLOAT, -0.0),
    "whole": (AttrType.FLOAT, 3.0), "@ENABLE_CACHE@": (AttrType.BOOLEAN, False),
}


def _everything() -> Program:
    prog = Program()
    prog.version = 7
    prog.op_version_map = {"conv2d": 1, "abs": 0}
    block = prog.global_block()
    block.create_var("x", dtype="float16", shape=[-1, 3])
    block.create_var("y", dtype=DType.int64, shape=[])
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    block.create_var("rows", kind=VarKind.SELECTED_ROWS, dtype="float32", shape=[4, 2])
    block.create_var("arr", kind=VarKind.DENSE_TENSOR_ARRAY, dtype="int32", shape=[2], lod_level=1)
    block.create_var("odd name/ü", shape=[1], need_check_feed=True, is_parameter=True, stop_gradient=True)
    block.create_var("nodtype", dtype=None, shape=[3])
    raw = block.create_var("reader", kind=VarKind.RAW)
    raw.type_extra = bytes([0x08, 15, 0x32, 0x00])
    tagged = block.create_var("tagged", shape=[1])
    tagged.attrs = [("tag", AttrType.STRING, "t"), ("n", AttrType.INT, 3), ("dims", AttrType.INTS, (1, 2)),
                    ("other", AttrType.FLOAT, None)]
    sub = prog.create_block(0)
    sub.forward_block_idx = 0
    sub.create_var("inner", dtype="float32", shape=[1])
    op = Operator("custom_everything", {"X": ["x", "y"], "Empty": [], "Odd": ["odd name/ü"]}, {"Out": ["y"]})
    for name, (attr_type, value) in ALL_ATTRS.items():
        op.set_attr(name, value, attr_type)
    op.is_target = True
    block.insert_op(0, op)
    sub.append_op("weird op-type", {}, {"Out": "inner"})
    return prog


def test_verbose_text_round_trips_to_the_same_bytes():
    prog = _everything()
    text = program_to_text(prog, verbose=True)
    back = program_from_text(text)
    assert back.to_bytes() == prog.to_bytes()
    assert program_to_text(back, verbose=True) == text


def test_attrs_keep_type_and_value():
    back = program_from_text(program_to_text(_everything(), verbose=True))
    op = back.global_block().ops[0]
    for name, (attr_type, value) in ALL_ATTRS.items():
        assert op.attr_type(name) is attr_type, name
    assert op.attr("f") == float(np.float32(0.1))
    assert op.attr("f64") == 0.1
    assert op.attr("f_big") == float(np.finfo(np.float32).max)
    assert op.attr("scalar") == 3 + 4j
    assert np.signbit(op.attr("f_neg0"))


def test_loaded_fields_stay_explicit():
    prog = _everything()
    prog.global_block().var("x").explicit = frozenset({"persistable", "lod_level"})
    prog.global_block().ops[0].explicit = frozenset({"is_target"})
    prog.blocks[1].explicit = frozenset({"forward_block_idx"})
    back = program_from_text(program_to_text(prog, verbose=True))
    assert back.to_bytes() == prog.to_bytes()


def test_text_looks_like_this():
    prog = Program()
    block = prog.global_block()
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    block.create_var("x", shape=[-1, 3])
    block.create_var("w", shape=[3, 4], persistable=True)
    block.create_var("y", shape=[-1, 4])
    block.append_op("feed", {"X": "feed"}, {"Out": "x"}, {"col": 0, "op_callstack": ["trace"]})
    block.append_op("matmul_v2", {"X": "x", "Y": ["w"], "Extra": ["x", "w"], "None": []}, {"Out": "y"},
                    {"trans_x": False, "alpha": 0.1, "op_role": 0})
    block.ops[1].set_attr("op_role_var", [], AttrType.STRINGS)
    assert program_to_text(prog) == (
        "program\n"
        "\n"
        "block 0 (parent -1):\n"
        "  var feed : FEED_MINIBATCH persistable\n"
        "  var x : float32[-1, 3]\n"
        "  var w : float32[3, 4] persistable\n"
        "  var y : float32[-1, 4]\n"
        "  (Out=%x) = feed(X=%feed) {col=0}\n"
        "  (Out=%y) = matmul_v2(X=%x, Y=%w, Extra=[%x, %w], None=[]) {trans_x=false, alpha=0.1}\n"
    )
    assert op_to_text(block.ops[1], verbose=True) == (
        "(Out=%y) = matmul_v2(X=%x, Y=%w, Extra=[%x, %w], None=[]) "
        "{trans_x=false, alpha=0.1, op_role=0, op_role_var: strings = []}")


def test_op_version_map_is_summarised_unless_verbose():
    prog = _everything()
    assert "# op_version_map: 2 entries (verbose=True shows them)" in program_to_text(prog)
    assert "op_version_map {conv2d=1, abs=0}" in program_to_text(prog, verbose=True)


def test_typed_attrs_are_annotated_only_where_the_literal_is_ambiguous():
    text = op_to_text(_everything().global_block().ops[0])
    for part in ["i=-7", "f=0.1", "ints=[1, -2, 3]", "floats=[0.5, -1.25, 1e-05]", "b=true",
                 "l: long = 1099511627776", "small_long: long = 3", "blk: block = 1", "var: var = \"x\"",
                 "empty_ints: ints = []", "scalar: scalar = complex(3.0, 4.0)",
                 "scalars: scalars = [true, 5, 2.5, complex(0.0, 1.0)]", "f64: float64 = 0.1",
                 "f_inf=-inf", "whole=3.0", "@ENABLE_CACHE@=false", 's="hé \\"quoted\\"\\nline"']:
        assert part in text, part
    assert text.startswith("(Out=%y) = custom_everything(X=[%x, %y], Empty=[], Odd=%\"odd name/ü\")")
    assert text.endswith(" is_target")


def test_var_lines():
    text = program_to_text(_everything(), verbose=True)
    for line in ["var x : float16[-1, 3]", "var y : int64[]", "var rows : SELECTED_ROWS float32[4, 2]",
                 "var arr : DENSE_TENSOR_ARRAY int32[2] lod_level=1", "var nodtype : ?[3]",
                 'var "odd name/ü" : float32[1] need_check_feed is_parameter stop_gradient',
                 'var reader : RAW vartype="080f3200"',
                 'var tagged : float32[1] {tag="t", n=3, dims=[1, 2], other: float = none}']:
        assert f"  {line}\n" in text, line
    assert "block 1 (parent 0, forward_block 0):" in text


@pytest.mark.parametrize("name", ["resnet_tiny", "mlp_tiny"])
def test_paddle_fixture_round_trips(name):
    data = (FIXTURES / f"{name}.pdmodel").read_bytes()
    prog = Program.from_bytes(data)
    assert program_from_text(program_to_text(prog, verbose=True)).to_bytes() == data
    short = program_to_text(prog)
    assert "op_callstack" not in short and "op_namescope" not in short
    back = program_from_text(short)
    assert program_to_text(back) == short.replace("# op_version_map: 76 entries (verbose=True shows them)\n", "")
    assert [op.type for op in back.global_block().ops] == [op.type for op in prog.global_block().ops]
    assert back.global_block().ops[1].attrs == {k: v for k, v in prog.global_block().ops[1].attrs.items()
                                               if not k.startswith("op_")}


def test_hand_written_text_parses():
    prog = program_from_text("""
        # a comment
        program
        block 0 (parent -1):
          var x : float32[2, 3]
          var y : float32[2, 3]
          (Out = %y) = scale(X=%x) { scale = 2.0 , bias=0.5, bias_after_scale=true }
    """)
    op = prog.global_block().ops[0]
    assert op.inputs == {"X": ("x",)} and op.outputs == {"Out": ("y",)}
    assert op.typed_attrs()["scale"].type is AttrType.FLOAT and op.attr("bias_after_scale") is True
    assert prog.global_block().var("y").uses() == ()
    assert [o for o, _, _ in prog.global_block().var("x").uses()] == [op]


@pytest.mark.parametrize("text, message", [
    ("", "holds no block"),
    ("block 0 (parent -1):", "line 1, column 1: expected 'program'"),
    ("program\n  var x : float32[1]", "line 2, column 1: expected a 'block N (parent P):' header"),
    ("program\nblock 1 (parent -1):", "block 1 out of order: expected block 0"),
    ("program\nblock 0 (parent -1):\n var x : floaty[1]", "unknown dtype or var kind 'floaty'"),
    ("program\nblock 0 (parent -1):\n var x : float32[1] shiny", "unknown var field 'shiny'"),
    ("program\nblock 0 (parent -1):\n var x : float32[1]\n var x : float32[1]", "line 4: block 0 already has"),
    ("program\nblock 0 (parent -1):\n (Out=%y) = relu(X=%x) {a=[]}", "cannot tell the type of attr 'a'"),
    ("program\nblock 0 (parent -1):\n (Out=%y) = relu(X=%x) {a: matrix = 1}", "unknown attr type 'matrix'"),
    ("program\nblock 0 (parent -1):\n (Out=%y) = relu(X=%x) {a: int = 1.5}", "attr 'a': invalid INT"),
    ("program\nblock 0 (parent -1):\n (Out=%y) = relu(X=%x, X=%z)", "slot 'X' is listed twice"),
    ("program\nblock 0 (parent -1):\n (Out=%y) = relu(X=x)", "line 3, column 19: expected '%'"),
])
def test_parse_errors_name_line_and_column(text, message):
    with pytest.raises(SerdeError) as info:
        program_from_text(text)
    assert message in str(info.value)


def test_parse_error_points_at_the_column():
    with pytest.raises(SerdeError) as info:
        program_from_text("program\nblock 0 (parent -1):\n(Out=%y) = relu(X=%x) {a=[1, 2.5]}")
    lines = str(info.value).splitlines()
    assert lines[1] == "  (Out=%y) = relu(X=%x) {a=[1, 2.5]}"
    assert lines[2] == " " * lines[1].index("[1, 2.5]") + "^"
