"""prune: a backward slice from the fetch targets, stopping at feeds; the input stays as it was."""

import importlib
from pathlib import Path

import pytest

from halfway.ir import AttrType, IRError, Operator, Program, VarKind
from halfway.ir.prune import prune
from halfway.ir.schema import OpSchema, Slot, has_schema, register_op, same_as
from halfway.ir.text import program_to_text
from halfway.ir.verifier import verify

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"

for _schema in [
    OpSchema("tp_unary", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X")),
    OpSchema("tp_binary", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")], infer=same_as("X")),
    OpSchema("tp_inplace", inputs=[Slot("X"), Slot("Mean")], outputs=[Slot("Y"), Slot("MeanOut")],
             infer=same_as("X", "Y")),
    OpSchema("tp_loop", inputs=[Slot("X", duplicable=True, dispensable=True)],
             outputs=[Slot("Out", duplicable=True, dispensable=True)]),
]:
    register_op(_schema, override=True)


def _program() -> Program:
    """x -> h = unary(x) -> y = binary(h, w);  z = unary(x) (w2 only feeds z's branch)."""
    prog = Program()
    block = prog.global_block()
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    block.create_var("fetch", kind=VarKind.FETCH_LIST, persistable=True)
    for name in ["x", "h", "y", "z", "z2"]:
        block.create_var(name, shape=[2, 3])
    block.create_var("w", shape=[2, 3], persistable=True)
    block.create_var("w2", shape=[2, 3], persistable=True)
    block.append_op("feed", {"X": "feed"}, {"Out": "x"}, {"col": 0})
    block.append_op("tp_unary", {"X": "x"}, {"Out": "h"})
    block.append_op("tp_binary", {"X": "h", "Y": "w"}, {"Out": "y"})
    block.append_op("tp_unary", {"X": "x"}, {"Out": "z"})
    block.append_op("tp_binary", {"X": "z", "Y": "w2"}, {"Out": "z2"})
    block.append_op("fetch", {"X": "y"}, {"Out": "fetch"}, {"col": 0})
    block.append_op("fetch", {"X": "z2"}, {"Out": "fetch"}, {"col": 1})
    return prog


def _ops(prog: Program, block: int = 0) -> list[str]:
    return [f"{op.type}:{','.join(op.output_names())}" for op in prog.blocks[block].ops]


def test_keeps_the_slice_and_leaves_the_input_alone():
    prog = _program()
    before = prog.to_bytes()
    pruned = prune(prog, ["y"])
    assert prog.to_bytes() == before
    assert _ops(pruned) == ["feed:x", "tp_unary:h", "tp_binary:y", "fetch:fetch"]
    assert sorted(pruned.global_block().vars) == ["feed", "fetch", "h", "w", "x", "y"]
    assert pruned.fetch_names() == ["y"] and pruned.feed_names() == ["x"]
    verify(pruned)


def test_program_prune_method_and_a_single_name():
    assert _ops(_program().prune("z2")) == ["feed:x", "tp_unary:z", "tp_binary:z2", "fetch:fetch"]


def test_fetch_cols_follow_fetch_names():
    pruned = prune(_program(), ["z2", "y"])
    assert pruned.fetch_names() == ["z2", "y"]
    verify(pruned)


def test_fetching_an_intermediate_adds_a_fetch_op():
    pruned = prune(_program(), ["h"])
    assert _ops(pruned) == ["feed:x", "tp_unary:h", "fetch:fetch"]
    assert pruned.fetch_names() == ["h"]
    verify(pruned)


def test_feed_names_stop_the_slice():
    pruned = prune(_program(), ["y"], ["h"])
    assert _ops(pruned) == ["feed:h", "tp_binary:y", "fetch:fetch"]
    assert "x" not in pruned.global_block().vars
    assert pruned.feed_names() == ["h"]
    verify(pruned)


def test_unneeded_feeds_are_dropped_and_cols_renumbered():
    prog = _program()
    block = prog.global_block()
    block.create_var("x2", shape=[2, 3])
    block.insert_op(0, Operator("feed", {"X": "feed"}, {"Out": "x2"}, {"col": 1}))
    block.ops[2].set_input("X", "x2")  # h = unary(x2)
    assert prune(prog, ["y"]).feed_names() == ["x2"]
    pruned = prune(prog, ["y", "z2"], ["x2", "x"])
    assert pruned.feed_names() == ["x2", "x"]
    verify(pruned)


def test_a_fetched_feed_is_kept():
    pruned = prune(_program(), ["x"], ["x"])
    assert _ops(pruned) == ["feed:x", "fetch:fetch"]
    verify(pruned)


def test_a_redefined_var_needs_only_its_last_writer():
    prog = _program()
    block = prog.global_block()
    block.insert_op(4, Operator("tp_unary", {"X": "h"}, {"Out": "z"}))  # z written again, from h
    assert _ops(prune(prog, ["z2"])) == ["feed:x", "tp_unary:h", "tp_unary:z", "tp_binary:z2", "fetch:fetch"]


def test_in_place_updates_keep_their_inputs():
    prog = _program()
    block = prog.global_block()
    block.create_var("mean", shape=[2, 3], persistable=True)
    block.insert_op(2, Operator("tp_inplace", {"X": "h", "Mean": "mean"}, {"Y": "h", "MeanOut": "mean"}))
    pruned = prune(prog, ["y"])
    assert _ops(pruned) == ["feed:x", "tp_unary:h", "tp_inplace:h,mean", "tp_binary:y", "fetch:fetch"]
    verify(pruned)


def test_without_feed_and_fetch_ops_none_are_added():
    prog = Program()
    block = prog.global_block()
    block.create_var("a", shape=[1], persistable=True)
    for name in ["b", "c", "d"]:
        block.create_var(name, shape=[1])
    block.append_op("tp_unary", {"X": "a"}, {"Out": "b"})
    block.append_op("tp_unary", {"X": "b"}, {"Out": "c"})
    block.append_op("tp_unary", {"X": "a"}, {"Out": "d"})
    pruned = prune(prog, ["c"], ["b"])
    assert _ops(pruned) == ["tp_unary:c"]
    assert sorted(pruned.global_block().vars) == ["b", "c"]


def _program_with_loops() -> Program:
    """Two loop ops with sub-blocks 1 and 2; only the second feeds y2."""
    prog = _program()
    block = prog.global_block()
    for i, reads in [(1, "w2"), (2, "w")]:
        sub = prog.create_block(0)
        sub.create_var(f"inner{i}", shape=[2, 3])
        sub.append_op("tp_unary", {"X": reads}, {"Out": f"inner{i}"})
        block.create_var(f"loop{i}", shape=[2, 3])
        loop = Operator("tp_loop", {"X": []}, {"Out": [f"loop{i}"]})
        loop.set_attr("sub_block", i, AttrType.BLOCK)
        block.insert_op(len(block.ops) - 2, loop)
    block.create_var("y2", shape=[2, 3])
    block.insert_op(len(block.ops) - 2, Operator("tp_binary", {"X": "y", "Y": "loop2"}, {"Out": "y2"}))
    return prog


def test_sub_blocks_are_kept_and_orphans_dropped():
    prog = _program_with_loops()
    verify(prog)
    pruned = prune(prog, ["y2"])
    assert _ops(pruned) == ["feed:x", "tp_unary:h", "tp_binary:y", "tp_loop:loop2", "tp_binary:y2", "fetch:fetch"]
    assert len(pruned.blocks) == 2
    loop = pruned.global_block().ops[3]
    assert loop.attr("sub_block") == 1 and loop.attr_type("sub_block") is AttrType.BLOCK
    assert pruned.blocks[1].idx == 1 and pruned.blocks[1].parent_idx == 0
    assert list(pruned.blocks[1].vars) == ["inner2"]
    assert "w2" not in pruned.global_block().vars and "w" in pruned.global_block().vars
    verify(pruned)


def test_sub_block_reads_keep_their_producers():
    prog = _program_with_loops()
    prog.blocks[2].ops[0].set_input("X", "z")  # the second loop now reads z inside its block
    pruned = prune(prog, ["loop2"])
    assert _ops(pruned) == ["feed:x", "tp_unary:z", "tp_loop:loop2", "fetch:fetch"]
    verify(pruned)


def test_unknown_and_duplicate_names():
    prog = _program()
    before = prog.to_bytes()
    with pytest.raises(IRError, match=r"unknown fetch name\(s\) 'yy' \(did you mean 'y'\?\)"):
        prune(prog, ["yy"])
    with pytest.raises(IRError, match=r"unknown feed name\(s\) 'nope'"):
        prune(prog, ["y"], ["nope"])
    with pytest.raises(IRError, match=r"fetch name\(s\) 'y' listed more than once"):
        prune(prog, ["y", "y"])
    with pytest.raises(IRError, match="at least one fetch name"):
        prune(prog, [])
    assert prog.to_bytes() == before


def _load(name: str) -> Program:
    return Program.from_bytes((FIXTURES / f"{name}.pdmodel").read_bytes())


def test_paddle_fixture_prune_to_its_own_fetches_keeps_every_op():
    prog = _load("resnet_tiny")
    pruned = prune(prog, prog.fetch_names(), prog.feed_names())
    assert _ops(pruned) == _ops(prog)
    removed = set(prog.global_block().vars) - set(pruned.global_block().vars)
    assert removed == {"flatten_0.tmp_1"}  # declared by Paddle, used by no op


def test_paddle_fixture_prune_to_a_middle_slice():
    pruned = prune(_load("resnet_tiny"), ["pool2d_0.tmp_0"], ["relu_2.tmp_0"])
    assert [op.type for op in pruned.global_block().ops] == [
        "feed", "depthwise_conv2d", "batch_norm", "relu6", "pool2d", "fetch"]
    assert pruned.feed_names() == ["relu_2.tmp_0"] and pruned.fetch_names() == ["pool2d_0.tmp_0"]
    assert "conv2d_0.w_0" not in pruned.global_block().vars
    assert "var conv2d_3.w_0 : float32[8, 1, 3, 3] persistable" in program_to_text(pruned)


def _real_schemas() -> bool:
    try:
        importlib.import_module("halfway.ir.ops")
    except ImportError:
        return False
    return has_schema("depthwise_conv2d")


@pytest.mark.skipif(not _real_schemas(), reason="the built-in op schemas are not registered yet")
def test_paddle_fixture_slices_verify():
    prog = _load("resnet_tiny")
    verify(prune(prog, ["pool2d_0.tmp_0"], ["relu_2.tmp_0"]))
    verify(prune(prog, ["relu_1.tmp_0", "linear_0.tmp_0"]))
