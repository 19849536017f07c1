"""The verifier: valid programs pass; each broken rule gives a message naming where it broke."""

import importlib
from pathlib import Path

import pytest

from halfway.ir import AttrType, Operator, Program, VarKind, VerifyError
from halfway.ir.schema import AttrSpec, OpSchema, Slot, has_schema, register_op, same_as
from halfway.ir.verifier import MAX_REPORTED, verify

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"


def _infer_add(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(x.dtype == y.dtype, f"X is {x.dtype.name} but Y is {y.dtype.name}")
    ctx.set_output("Out", x.shape, x.dtype)


def _infer_concat(ctx):
    parts = ctx.inputs("X")
    axis = ctx.attr("axis")
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    ctx.set_output("Out", shape, parts[0].dtype)


def _infer_bn(ctx):
    x = ctx.input("X")
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("MeanOut", ctx.input("Mean").shape, ctx.input("Mean").dtype)
    ctx.set_output("SavedMean", [x.shape[1]], x.dtype)


def _infer_broken(ctx):
    raise ZeroDivisionError("oops")


for _schema in [
    OpSchema("tv_relu", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X")),
    OpSchema("tv_add", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")], infer=_infer_add),
    OpSchema("tv_concat", inputs=[Slot("X", duplicable=True)], outputs=[Slot("Out")],
             attrs=[AttrSpec("axis", AttrType.INT, 0)], infer=_infer_concat),
    OpSchema("tv_pool", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X"),
             attrs=[AttrSpec("ksize", AttrType.INTS),
                    AttrSpec("pooling_type", AttrType.STRING, "max", choices=("max", "avg"))]),
    OpSchema("tv_bn", inputs=[Slot("X"), Slot("Mean")],
             outputs=[Slot("Y"), Slot("MeanOut"), Slot("SavedMean", dispensable=True)], infer=_infer_bn),
    OpSchema("tv_opt", inputs=[Slot("X"), Slot("Bias", dispensable=True)], outputs=[Slot("Out")],
             infer=same_as("X")),
    OpSchema("tv_while", inputs=[Slot("X", duplicable=True, dispensable=True)],
             outputs=[Slot("Out", duplicable=True, dispensable=True)],
             attrs=[AttrSpec("sub_block", AttrType.BLOCK)]),
    OpSchema("tv_broken", inputs=[Slot("X")], outputs=[Slot("Out")], infer=_infer_broken),
]:
    register_op(_schema, override=True)


def _program(*names: str, shape=(2, 3)) -> Program:
    """feed -> x, then tv_relu along ``names`` (x -> names[0] -> ...), fetch the last one."""
    prog = Program()
    block = prog.global_block()
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    block.create_var("fetch", kind=VarKind.FETCH_LIST, persistable=True)
    block.create_var("x", shape=shape)
    block.append_op("feed", {"X": "feed"}, {"Out": "x"}, {"col": 0})
    previous = "x"
    for name in names:
        block.create_var(name, shape=shape)
        block.append_op("tv_relu", {"X": previous}, {"Out": name})
        previous = name
    block.append_op("fetch", {"X": previous}, {"Out": "fetch"}, {"col": 0})
    return prog


def _message(prog: Program, **kwargs) -> str:
    with pytest.raises(VerifyError) as info:
        verify(prog, **kwargs)
    return str(info.value)


def test_valid_program_passes():
    verify(_program("h", "y"))


def test_program_is_not_modified():
    prog = _program("h", "y")
    prog.global_block().ops[1].set_input("X", "nope")
    before = prog.to_bytes()
    _message(prog)
    assert prog.to_bytes() == before


def test_read_before_defined_names_block_op_slot_var_and_shows_context():
    prog = _program("a", "b", "c", "d")
    block = prog.global_block()
    block.ops[3].set_input("X", "d")  # op #3 reads d, which op #4 writes
    message = _message(prog)
    assert "program failed verification: 1 problem" in message
    assert "block 0, op #3 tv_relu, input slot 'X', var 'd': read before it is defined" in message
    assert "op #4 tv_relu writes it later" in message
    lines = message.splitlines()
    marked = [line for line in lines if ">>" in line]
    assert marked == ["      >> #3   (Out=%c) = tv_relu(X=%d)"]
    context = [line.strip() for line in lines if line.strip().startswith("#")]
    assert [line.split()[0] for line in context] == ["#1", "#2", "#4", "#5"]


def test_cycle_is_a_read_before_definition():
    prog = _program("a", "b")
    block = prog.global_block()
    block.ops[1].set_input("X", "b")  # a = relu(b); b = relu(a)
    assert "var 'b': read before it is defined" in _message(prog)


def test_undeclared_var_is_an_error_with_a_hint():
    prog = _program("hidden")
    prog.global_block().ops[1].set_input("X", "hiden")
    message = _message(prog)
    assert "input slot 'X', var 'hiden': not declared in block 0 or its parents (did you mean 'hidden'?)" in message


def test_undeclared_output_is_an_error():
    prog = _program("h")
    prog.global_block().ops[1].set_output("Out", "ghost")
    assert "output slot 'Out', var 'ghost': not declared" in _message(prog, check_shapes=False)


def test_persistable_vars_and_parent_vars_count_as_defined():
    prog = _program("h")
    block = prog.global_block()
    block.create_var("w", shape=[2, 3], persistable=True)
    block.create_var("s", shape=[2, 3])
    block.insert_op(2, Operator("tv_add", {"X": "h", "Y": "w"}, {"Out": "s"}))
    verify(prog)


def test_unknown_op_type_lists_the_op():
    prog = _program("h")
    prog.global_block().insert_op(2, Operator("tv_nope", {"X": "h"}, {"Out": "h"}))
    message = _message(prog)
    assert "block 0, op #2 tv_nope: unknown op type 'tv_nope'" in message
    assert ">> #2   (Out=%h) = tv_nope(X=%h)" in message


def test_unknown_slot():
    prog = _program("h")
    prog.global_block().ops[1].set_input("Z", "x")
    assert "input slot 'Z': tv_relu has no input slot 'Z' (its input slots: X)" in _message(prog)


def test_slot_arity():
    prog = _program("h")
    block = prog.global_block()
    block.ops[1].set_input("X", ["x", "x"])
    assert "input slot 'X': holds 2 vars ['x', 'x'], but the slot takes one" in _message(prog)
    block.ops[1].set_input("X", [])
    assert "input slot 'X': is empty, but tv_relu requires it" in _message(prog)
    block.ops[1].set_output("Out", [])
    block.ops[1].set_input("X", ["x"])
    assert "output slot 'Out': is empty, but tv_relu requires it" in _message(prog)


def test_missing_required_slot_but_dispensable_may_be_absent_or_empty():
    prog = _program()
    block = prog.global_block()
    block.create_var("o", shape=[2, 3])
    block.insert_op(1, Operator("tv_opt", {"X": "x"}, {"Out": "o"}))
    block.insert_op(2, Operator("tv_opt", {"X": "x", "Bias": []}, {"Out": "o"}))
    block.ops[2].set_input("X", "o")
    verify(prog)
    block.insert_op(3, Operator("tv_opt", {"Bias": ["x"]}, {"Out": "o"}))
    assert "op #3 tv_opt, input slot 'X': is missing, but tv_opt requires it" in _message(prog)


def test_duplicable_slot_holds_many():
    prog = _program("h")
    block = prog.global_block()
    block.create_var("cat", shape=[4, 3])
    block.insert_op(2, Operator("tv_concat", {"X": ["x", "h"]}, {"Out": "cat"}))
    verify(prog)


def test_attrs_required_type_and_choices():
    prog = _program()
    block = prog.global_block()
    block.create_var("p", shape=[2, 3])
    pool = block.insert_op(1, Operator("tv_pool", {"X": "x"}, {"Out": "p"}))
    assert "op #1 tv_pool, attr 'ksize': is required (INTS) but missing" in _message(prog)
    pool.set_attr("ksize", "3x3", AttrType.STRING)
    assert "attr 'ksize': is STRING = '3x3', but the schema declares INTS" in _message(prog)
    pool.set_attr("ksize", [3, 3], AttrType.LONGS)  # LONGS stands for INTS
    pool.set_attr("pooling_type", "median")
    assert "attr 'pooling_type': = 'median' is not one of ['max', 'avg']" in _message(prog)
    pool.set_attr("pooling_type", "avg")
    pool.set_attr("op_callstack", ["a", "b"])  # undeclared bookkeeping attrs are ignored
    pool.set_attr("op_role", 7)
    verify(prog)


def test_shape_mismatch_names_declared_and_inferred():
    prog = _program("h", "y")
    prog.global_block().var("y").set_shape([2, 4])
    message = _message(prog)
    assert ("block 0, op #2 tv_relu, output slot 'Out', var 'y': declared float32[2, 4], but tv_relu's "
            "schema infers float32[2, 3]") in message
    verify(prog, check_shapes=False)


def test_shape_rank_and_dtype_mismatch():
    prog = _program("h", "y")
    block = prog.global_block()
    block.var("y").set_shape([2, 3, 1])
    assert "declared float32[2, 3, 1], but tv_relu's schema infers float32[2, 3]" in _message(prog)
    block.var("y").set_shape([2, 3])
    block.var("y").dtype = block.var("y").dtype.float16
    assert "declared float16[2, 3], but tv_relu's schema infers float32[2, 3]" in _message(prog)


def test_unknown_dims_match_anything():
    prog = _program("h", "y", shape=(-1, 3))
    prog.global_block().var("h").set_shape([5, -1])
    verify(prog)


def test_inference_failure_and_broken_infer_are_reported():
    prog = _program("h")
    block = prog.global_block()
    block.create_var("i", dtype="int32", shape=[2, 3])
    block.create_var("s", shape=[2, 3])
    block.create_var("b", shape=[2, 3])
    block.create_var("fill", dtype="int32", shape=[2, 3], persistable=True)
    block.insert_op(2, Operator("tv_add", {"X": "h", "Y": "fill"}, {"Out": "s"}))
    block.insert_op(3, Operator("tv_broken", {"X": "s"}, {"Out": "b"}))
    message = _message(prog)
    assert "op #2 tv_add: shape inference failed: tv_add: X is float32 but Y is int32" in message
    assert "op #3 tv_broken: shape inference raised ZeroDivisionError: oops" in message


def test_unread_placeholder_outputs_are_not_compared():
    prog = _program("h")
    block = prog.global_block()
    block.create_var("mean", shape=[3], persistable=True)
    block.create_var("y", shape=[2, 3])
    block.create_var("saved", shape=[])  # Paddle declares SavedMean with dims []
    block.insert_op(2, Operator("tv_bn", {"X": "h", "Mean": "mean"},
                                {"Y": "y", "MeanOut": "mean", "SavedMean": "saved"}))
    verify(prog)
    block.create_var("use", shape=[])
    block.insert_op(3, Operator("tv_relu", {"X": "saved"}, {"Out": "use"}))
    assert "var 'saved': declared float32[], but tv_bn's schema infers float32[3]" in _message(prog)


def test_in_place_update_is_not_a_second_writer():
    prog = _program("h")
    block = prog.global_block()
    block.create_var("mean", shape=[3], persistable=True)
    block.create_var("y", shape=[2, 3])
    block.insert_op(2, Operator("tv_bn", {"X": "h", "Mean": "mean"}, {"Y": "y", "MeanOut": "mean"}))
    block.insert_op(3, Operator("tv_bn", {"X": "y", "Mean": "mean"}, {"Y": "h", "MeanOut": "mean"}))
    message = _message(prog)  # h is written by op #1 and, not in place, by op #3
    assert "[1/1] block 0, op #3 tv_bn, output slot 'Y', var 'h': also written by op #1 tv_relu" in message
    block.ops[3].set_output("Y", "y")
    block.ops[3].set_input("X", "y")
    verify(prog)  # y is updated in place by op #3: it reads y too


def test_one_op_writing_a_var_twice():
    prog = _program()
    block = prog.global_block()
    block.create_var("m", shape=[3], persistable=True)
    block.insert_op(1, Operator("tv_bn", {"X": "x", "Mean": "m"}, {"Y": "x", "MeanOut": "m", "SavedMean": "m"}))
    assert "op #1 tv_bn, var 'm': written twice by this op (slots MeanOut, SavedMean)" in _message(
        prog, check_shapes=False)


def test_feed_and_fetch_cols():
    prog = _program("h")
    block = prog.global_block()
    block.create_var("x2", shape=[2, 3])
    block.insert_op(1, Operator("feed", {"X": "feed"}, {"Out": "x2"}, {"col": 0}))
    message = _message(prog)
    assert "block 0, op #1 feed, attr 'col': = 0 is also the col of op #0" in message
    block.ops[1].set_attr("col", 2)
    assert "block 0: the cols of the feed ops are [0, 2]; expected 0..1, each once" in _message(prog)
    block.ops[1].set_attr("col", 1)
    block.append_op("fetch", {"X": "x2"}, {"Out": "fetch"}, {"col": 1})  # fetch writes are exempt
    verify(prog)


def test_feed_and_fetch_shape():
    prog = _program("h")
    block = prog.global_block()
    block.ops[0].set_input("X", "x")
    assert "op #0 feed, input slot 'X': must hold the FEED_MINIBATCH var 'feed', holds ['x']" in _message(prog)
    block.ops[0].set_input("X", "feed")
    block.ops[-1].set_output("Out", ["fetch", "fetch"])
    message = _message(prog)
    assert "op #2 fetch, output slot 'Out': must hold the FETCH_LIST var 'fetch'" in message
    block.ops[-1].set_output("Out", "fetch")
    block.ops[-1].remove_attr("col")
    assert "op #2 fetch, attr 'col': is required (INT) but missing" in _message(prog)


def _program_with_loop() -> Program:
    prog = _program("h")
    block = prog.global_block()
    sub = prog.create_block(0)
    sub.create_var("inner", shape=[2, 3])
    sub.append_op("tv_relu", {"X": "h"}, {"Out": "inner"})  # reads a var of the parent block
    block.create_var("loop_out", shape=[2, 3])
    loop = Operator("tv_while", {"X": ["h"]}, {"Out": ["loop_out"]})
    loop.set_attr("sub_block", 1, AttrType.BLOCK)
    block.insert_op(2, loop)
    return prog


def test_sub_blocks_read_parent_vars():
    verify(_program_with_loop())


def test_bad_block_attr_and_parent():
    prog = _program_with_loop()
    loop = prog.global_block().ops[2]
    loop.set_attr("sub_block", 5)
    assert "op #2 tv_while, attr 'sub_block': names block 5, but the program has 2 blocks" in _message(prog)
    loop.set_attr("sub_block", 0)
    assert "names block 0, whose parent is block -1, not this op's block 0" in _message(prog)


def test_bad_block_structure():
    prog = _program_with_loop()
    prog.blocks[1].parent_idx = 7
    assert "block 1: parent_idx 7 is not a block (the program has 2)" in _message(prog)
    prog.blocks[1].parent_idx = 1
    assert "block 1: the parent chain does not reach block 0 (1 -> 1)" in _message(prog)
    prog.blocks[1].parent_idx = 0
    prog.blocks[0].parent_idx = 0
    assert "block 0: the global block must have parent -1, not 0" in _message(prog)


def test_a_program_without_blocks():
    prog = Program()
    prog.blocks = []
    assert "block 0: the program has no blocks" in _message(prog)


def test_feed_in_a_sub_block():
    prog = _program_with_loop()
    prog.blocks[1].append_op("feed", {"X": "feed"}, {"Out": "inner"}, {"col": 0})
    assert "block 1, op #1 feed: feed ops belong in block 0" in _message(prog)


def test_all_problems_are_collected_and_capped():
    prog = _program("h")
    block = prog.global_block()
    for i in range(MAX_REPORTED + 5):
        block.create_var(f"o{i}", shape=[2, 3])
        block.insert_op(2, Operator("tv_relu", {"X": f"missing{i}"}, {"Out": f"o{i}"}))
    message = _message(prog)
    assert f"program failed verification: {MAX_REPORTED + 5} problems" in message
    assert f"[{MAX_REPORTED}/{MAX_REPORTED + 5}]" in message
    assert f"[{MAX_REPORTED + 1}/" not in message
    assert "... and 5 more problems (the first 20 are shown)" in message


def test_long_neighbour_lines_are_cut():
    prog = _program("a", "b", "c")
    block = prog.global_block()
    block.ops[1].set_attr("op_note", "n" * 400)
    block.ops[2].set_input("X", "c")
    lines = _message(prog).splitlines()
    neighbour = next(line for line in lines if "op_note" in line)
    assert neighbour.endswith("...") and len(neighbour.strip()) <= 160


def _load(name: str) -> Program:
    return Program.from_bytes((FIXTURES / f"{name}.pdmodel").read_bytes())


def _real_schemas() -> bool:
    try:
        importlib.import_module("halfway.ir.ops")
    except ImportError:
        return False
    return has_schema("conv2d")


@pytest.mark.skipif(not _real_schemas(), reason="the built-in op schemas are not registered yet")
@pytest.mark.parametrize("name", ["resnet_tiny", "mlp_tiny"])
def test_paddle_fixtures_verify(name):
    verify(_load(name))


@pytest.mark.skipif(not _real_schemas(), reason="the built-in op schemas are not registered yet")
def test_broken_paddle_fixture_names_the_conv():
    prog = _load("resnet_tiny")
    block = prog.global_block()
    conv = next(op for op in block.ops if op.type == "conv2d")
    conv.set_input("Filter", "conv2d_9.w_0")
    message = _message(prog)
    assert f"block 0, op #{conv.index} conv2d, input slot 'Filter', var 'conv2d_9.w_0': not declared" in message
    assert ">> #1   (Output=%conv2d_0.tmp_0) = conv2d(Filter=%conv2d_9.w_0, Input=%image)" in message
