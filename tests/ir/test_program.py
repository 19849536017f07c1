"""The program model: use-def kept current by every edit, names guarded, clones independent."""

import numpy as np
import pytest

from halfway.ir import AttrType, DType, IRError, Operator, Program, Variable, VarKind, topological_order
from halfway.ir.program import sub_block_ops
from halfway.ir.schema import AttrSpec, OpSchema, Slot, register_op

register_op(OpSchema("tm_typed", inputs=[Slot("X")], outputs=[Slot("Out")],
                     attrs=[AttrSpec("ratio", AttrType.FLOAT, 0.5), AttrSpec("dims", AttrType.INTS, ()),
                            AttrSpec("seed", AttrType.LONG, 0), AttrSpec("needed", AttrType.INT)]),
            override=True)


def _chain() -> Program:
    """a -> relu -> b -> relu -> c -> add(c, b) -> d."""
    prog = Program()
    block = prog.global_block()
    for name in "abcd":
        block.create_var(name, shape=[2])
    block.append_op("relu", {"X": "a"}, {"Out": "b"})
    block.append_op("relu", {"X": "b"}, {"Out": "c"})
    block.append_op("add", {"X": "c", "Y": "b"}, {"Out": "d"})
    return prog


def _types(block) -> list[str]:
    return [op.type for op in block.ops]


# -- use-def -----------------------------------------------------------------------------------------
def test_uses_and_producers_follow_program_order():
    block = _chain().global_block()
    relu0, relu1, add = block.ops
    b = block.var("b")
    assert b.uses() == ((relu1, "X", 0), (add, "Y", 0))
    assert b.producers() == ((relu0, "Out", 0),)
    assert b.producer() is relu0
    assert block.var("a").producer() is None
    assert block.var("d").uses() == ()


def test_set_input_moves_the_use():
    block = _chain().global_block()
    add = block.ops[2]
    add.set_input("Y", ["a", "a"])
    assert block.var("b").uses() == ((block.ops[1], "X", 0),)
    assert block.var("a").uses() == ((block.ops[0], "X", 0), (add, "Y", 0), (add, "Y", 1))
    add.set_input("Y", [])
    assert block.var("a").uses() == ((block.ops[0], "X", 0),)
    assert add.inputs == {"X": ("c",), "Y": ()}


def test_set_output_moves_the_definition():
    block = _chain().global_block()
    block.ops[1].set_output("Out", "d")
    assert block.var("c").producers() == ()
    assert [op.type for op, _, _ in block.var("d").producers()] == ["relu", "add"]
    with pytest.raises(IRError, match="several writers"):
        block.var("d").producer()


def test_rename_input_and_output_on_one_op():
    block = _chain().global_block()
    add = block.ops[2]
    block.create_var("e", shape=[2])
    assert add.rename_input("b", "a") == 1
    assert add.rename_output("d", "e") == 1
    assert add.rename_input("zzz", "a") == 0
    assert block.var("e").producer() is add
    assert block.var("d").producers() == ()
    assert (add, "Y", 0) in block.var("a").uses()


def test_vars_of_parent_blocks_resolve_through_find_var():
    prog = _chain()
    sub = prog.create_block(0)
    op = sub.append_op("relu", {"X": "a"}, {"Out": "inner"})
    sub.create_var("inner", shape=[2])
    assert op.input_var("X") is prog.global_block().var("a")
    assert op.output_var("Out") is sub.var("inner")
    with pytest.raises(IRError, match="no var 'a'"):
        sub.var("a")
    with pytest.raises(IRError, match="has no entry #1"):
        op.input_var("X", 1)


# -- inserting, removing, replacing ops --------------------------------------------------------------
def test_insert_op_indexes_and_positions():
    block = _chain().global_block()
    scale = block.insert_op(1, Operator("scale", {"X": "b"}, {"Out": "b"}))
    assert _types(block) == ["relu", "scale", "relu", "add"]
    assert scale.index == 1 and block.ops[2].index == 2
    assert block.var("b").uses()[0] == (scale, "X", 0)
    assert [op.type for op, _, _ in block.var("b").producers()] == ["relu", "scale"]
    block.insert_op(-1, Operator("neg"))
    assert _types(block) == ["relu", "scale", "relu", "neg", "add"]


def test_insert_ops_keeps_their_order_at_negative_indices():
    block = _chain().global_block()
    block.insert_ops(-1, [Operator("n1"), Operator("n2")])
    assert _types(block) == ["relu", "relu", "n1", "n2", "add"]
    block.insert_ops(100, [Operator("n3"), Operator("n4")])
    assert _types(block)[-2:] == ["n3", "n4"]
    block.insert_ops(-100, [Operator("n5"), Operator("n6")])
    assert _types(block)[:2] == ["n5", "n6"]


def test_insert_ops_is_all_or_nothing():
    block = _chain().global_block()
    taken = block.ops[0]
    with pytest.raises(IRError, match="already belongs to block 0"):
        block.insert_ops(0, [Operator("fresh"), taken])
    fresh = Operator("fresh")
    with pytest.raises(IRError, match="listed twice"):
        block.insert_ops(0, [fresh, fresh])
    assert _types(block) == ["relu", "relu", "add"]
    assert fresh.block is None


def test_remove_op_unindexes():
    block = _chain().global_block()
    relu1 = block.ops[1]
    block.remove_op(relu1)
    assert relu1.block is None
    assert _types(block) == ["relu", "add"]
    assert block.var("c").producers() == ()
    assert [op.type for op, _, _ in block.var("b").uses()] == ["add"]
    with pytest.raises(IRError, match="not in block 0"):
        block.remove_op(relu1)
    block.insert_op(0, relu1)  # a removed op can go back
    assert block.var("c").producer() is relu1


def test_replace_op_puts_new_ops_in_place():
    block = _chain().global_block()
    relu1 = block.ops[1]
    block.create_var("t", shape=[2])
    new = block.replace_op(relu1, [Operator("exp", {"X": "b"}, {"Out": "t"}),
                                   Operator("log", {"X": "t"}, {"Out": "c"})])
    assert _types(block) == ["relu", "exp", "log", "add"]
    assert block.var("c").producer() is new[1]
    assert relu1.block is None


def test_replace_op_may_wrap_the_old_op():
    block = _chain().global_block()
    relu1 = block.ops[1]
    block.replace_op(relu1, [Operator("before"), relu1, Operator("after")])
    assert _types(block) == ["relu", "before", "relu", "after", "add"]
    assert block.var("c").producer() is relu1


def test_failed_replace_op_changes_nothing():
    block = _chain().global_block()
    relu0, relu1, add = block.ops
    with pytest.raises(IRError, match="already belongs"):
        block.replace_op(relu0, [Operator("z"), add])
    with pytest.raises(IRError, match="listed twice"):
        block.replace_op(relu0, [relu0, relu0])
    assert block.ops == (relu0, relu1, add)
    assert block.var("b").producer() is relu0


def test_move_ops_needs_a_permutation():
    block = _chain().global_block()
    relu0, relu1, add = block.ops
    block.move_ops([relu1, relu0, add])
    assert relu0.index == 1 and block.var("b").uses()[0][0] is relu1
    with pytest.raises(IRError, match="permutation"):
        block.move_ops([relu0, relu0, add])
    with pytest.raises(IRError, match="permutation"):
        block.move_ops([relu0, add])


def test_ops_is_an_immutable_snapshot():
    block = _chain().global_block()
    snapshot = block.ops
    block.append_op("neg")
    assert len(snapshot) == 3 and len(block.ops) == 4
    with pytest.raises(AttributeError):
        snapshot.append(Operator("x"))  # type: ignore[attr-defined]


# -- vars --------------------------------------------------------------------------------------------
def test_add_and_remove_vars():
    block = _chain().global_block()
    with pytest.raises(IRError, match="already has a var 'a'"):
        block.create_var("a")
    with pytest.raises(IRError, match="still used by relu"):
        block.remove_var("b")
    with pytest.raises(IRError, match="no var 'zz'"):
        block.remove_var("zz")
    e = block.create_var("e", shape=[1])
    block.remove_var("e")
    assert e.block is None and not block.has_var("e")
    block.remove_var("d", force=True)
    assert not block.has_var("d")
    other = Program().global_block()
    other.add_var(e)
    with pytest.raises(IRError, match="already belongs to block 0"):
        block.add_var(e)


def test_remove_var_counts_uses_in_sub_blocks():
    prog = _chain()
    block = prog.global_block()
    block.create_var("only_inner", shape=[2])
    sub = prog.create_block(0)
    sub.create_var("x", shape=[2])
    sub.append_op("relu", {"X": "only_inner"}, {"Out": "x"})
    with pytest.raises(IRError, match=r"still used by relu \(block 1\)"):
        block.remove_var("only_inner")


def test_rename_var_updates_references_here_and_in_sub_blocks():
    prog = _chain()
    block = prog.global_block()
    sub = prog.create_block(0)
    sub.create_var("inner", shape=[2])
    inner_op = sub.append_op("relu", {"X": "b"}, {"Out": "inner"})
    b = block.var("b")
    block.rename_var("b", "b2")
    assert b.name == "b2" and block.var("b2") is b and not block.has_var("b")
    assert list(block.vars)[:2] == ["a", "b2"]  # declaration order kept
    assert block.ops[1].inputs == {"X": ("b2",)} and block.ops[0].outputs == {"Out": ("b2",)}
    assert inner_op.inputs == {"X": ("b2",)}
    assert sub.uses("b2") == ((inner_op, "X", 0),) and sub.uses("b") == ()
    assert [op.type for op, _, _ in b.uses()] == ["relu", "add"]


def test_rename_var_leaves_shadowing_sub_blocks_alone():
    prog = _chain()
    sub = prog.create_block(0)
    sub.create_var("b", shape=[3])  # its own b
    inner_op = sub.append_op("relu", {"X": "b"}, {"Out": "b"})
    prog.global_block().rename_var("b", "b2")
    assert inner_op.inputs == {"X": ("b",)}


def test_rename_var_refuses_collisions_and_changes_nothing():
    prog = _chain()
    block = prog.global_block()
    sub = prog.create_block(0)
    sub.create_var("taken", shape=[2])
    sub.append_op("relu", {"X": "b"}, {"Out": "taken"})
    before = prog.to_bytes()
    with pytest.raises(IRError, match="block 0 already has 'c'"):
        block.rename_var("b", "c")
    with pytest.raises(IRError, match="block 1 already has 'taken'"):
        block.rename_var("b", "taken")
    with pytest.raises(IRError, match="non-empty string"):
        block.rename_var("b", "")
    sub.create_var("local", shape=[2])
    sub.append_op("relu", {"X": "a"}, {"Out": "local"})
    with pytest.raises(IRError, match="ops of block 1 refer to 'a'"):
        sub.rename_var("local", "a")  # would capture the sub-block's reads of the parent's a
    sub.remove_op(sub.ops[-1])
    sub.remove_var("local")
    assert prog.to_bytes() == before


def test_unique_name_skips_names_in_any_block():
    prog = Program()
    prog.global_block().create_var("tmp_0")
    prog.create_block(0).create_var("tmp_1")
    assert prog.unique_name("tmp") == "tmp_2"
    assert prog.global_block().unique_name("tmp") == "tmp_3"
    assert prog.unique_name("other") == "other_0"
    detached = Program().global_block()
    detached.program = None
    detached.create_var("t_0")
    assert detached.unique_name("t") == "t_1"


def test_variable_validation_and_numel():
    with pytest.raises(IRError, match="non-empty string"):
        Variable("")
    with pytest.raises(IRError, match="dims must be >= -1"):
        Variable("x", shape=[2, -3])
    with pytest.raises(IRError, match="sequence of ints"):
        Variable("x", shape=["a"])
    assert Variable("x", shape=[2, 3]).numel == 6
    assert Variable("x", shape=[]).numel == 1
    assert Variable("x", shape=[-1, 3]).numel is None
    feed = Variable("feed", kind=VarKind.FEED_MINIBATCH)
    assert feed.dtype is None and feed.shape is None
    assert Variable("h", dtype="fp16").dtype is DType.float16
    assert repr(Variable("w", shape=[2], persistable=True)) == "Variable('w', float32[2], persistable)"


def test_detached_var_has_no_use_def():
    with pytest.raises(IRError, match="not in a block"):
        Variable("x").uses()


# -- clone -------------------------------------------------------------------------------------------
def test_clone_is_deep_and_independent():
    prog = _chain()
    prog.global_block().ops[2].set_attr("axis", -1)
    prog.global_block().var("a").attrs = [("tag", AttrType.STRING, "t")]
    clone = prog.clone()
    assert clone.to_bytes() == prog.to_bytes()
    block = clone.global_block()
    block.ops[2].set_attr("axis", 1)
    block.ops[0].set_input("X", "d")
    block.var("a").set_shape([7])
    block.var("a").attrs.append(("more", AttrType.INT, 1))
    block.rename_var("c", "c2")
    block.remove_op(block.ops[1])
    original = prog.global_block()
    assert original.ops[2].attr("axis") == -1
    assert original.ops[0].inputs == {"X": ("a",)}
    assert original.var("a").shape == (2,) and original.var("a").attrs == [("tag", AttrType.STRING, "t")]
    assert original.has_var("c") and len(original.ops) == 3
    assert all(op.block is original for op in original.ops)
    assert original.var("b").uses()[0][0] is original.ops[1]


# -- topological order -------------------------------------------------------------------------------
def test_topological_order_is_stable_and_reorders():
    block = _chain().global_block()
    relu0, relu1, add = block.ops
    assert topological_order(block) == [relu0, relu1, add]
    block.move_ops([add, relu1, relu0])
    assert topological_order(block) == [relu0, relu1, add]


def test_topological_order_ignores_in_place_self_reads_and_finds_cycles():
    block = _chain().global_block()
    block.insert_op(1, Operator("scale", {"X": "b"}, {"Out": "b"}))
    assert _types(block) == [op.type for op in topological_order(block)]
    block.ops[0].set_input("X", "d")  # relu0 now waits on add, which waits on relu0
    with pytest.raises(IRError, match="dependency cycle among ops #0 relu"):
        topological_order(block)


def test_topological_order_follows_sub_block_reads():
    prog = _chain()
    block = prog.global_block()
    sub = prog.create_block(0)
    sub.create_var("inner", shape=[2])
    sub.append_op("relu", {"X": "c"}, {"Out": "inner"})
    loop = Operator("while")
    loop.set_attr("sub_block", 1, AttrType.BLOCK)
    block.insert_op(0, loop)
    assert loop.sub_blocks() == (1,)
    assert [op.type for op in sub_block_ops(loop)] == ["relu"]
    assert [op.type for op in topological_order(block)] == ["relu", "relu", "while", "add"]


# -- attrs -------------------------------------------------------------------------------------------
def test_attr_types_are_inferred_from_values():
    op = Operator("untyped", attrs={"i": 3, "big": 2**40, "f": 0.1, "s": "x", "b": True, "ints": [1, 2],
                                    "longs": [1, 2**40], "floats": (0.5, 1.5), "strs": ["a"],
                                    "np": np.float32(2.5), "npi": np.int64(4), "arr": np.array([1, 2])})
    types = {name: attr.type for name, attr in op.typed_attrs().items()}
    assert types == {"i": AttrType.INT, "big": AttrType.LONG, "f": AttrType.FLOAT, "s": AttrType.STRING,
                     "b": AttrType.BOOLEAN, "ints": AttrType.INTS, "longs": AttrType.LONGS,
                     "floats": AttrType.FLOATS, "strs": AttrType.STRINGS, "np": AttrType.FLOAT,
                     "npi": AttrType.INT, "arr": AttrType.INTS}
    assert op.attr("f") == float(np.float32(0.1))
    assert op.attr("ints") == (1, 2) and isinstance(op.attr("arr")[0], int)


def test_schema_declared_types_win_and_defaults_apply():
    op = Operator("tm_typed", attrs={"ratio": 1, "dims": [], "seed": 3})
    assert op.attr_type("ratio") is AttrType.FLOAT and op.attr("ratio") == 1.0
    assert op.attr_type("dims") is AttrType.INTS and op.attr("dims") == ()
    assert op.attr_type("seed") is AttrType.LONG
    fresh = Operator("tm_typed")
    assert fresh.attr("ratio") == 0.5 and not fresh.has_attr("ratio")
    assert fresh.attr("missing", 9) == 9
    with pytest.raises(IRError, match="has no attr 'needed' and its schema gives no default"):
        fresh.attr("needed")


def test_a_set_attr_keeps_its_type():
    op = Operator("untyped", attrs={"n": 1})
    op.set_attr("n", 2.0)  # integral float into INT
    assert op.attr("n") == 2 and op.attr_type("n") is AttrType.INT
    op.set_attr("n", 5, AttrType.LONG)
    assert op.attr_type("n") is AttrType.LONG
    op.remove_attr("n")
    assert not op.has_attr("n")
    with pytest.raises(IRError, match="has no attr 'n'"):
        op.attr_type("n")


def test_bad_attr_values_name_the_op_and_attr():
    op = Operator("untyped", attrs={"n": 1})
    with pytest.raises(IRError, match=r"op untyped, attr 'n': invalid INT attr value: .*does not fit in int32"):
        op.set_attr("n", 2**40)
    with pytest.raises(IRError, match=r"op untyped, attr 'n': invalid INT attr value: expected an integer"):
        op.set_attr("n", "3")
    with pytest.raises(IRError, match=r"op untyped, attr 'empty': cannot infer the type of an empty list"):
        op.set_attr("empty", [])
    with pytest.raises(IRError, match="overflows float32"):
        op.set_attr("f", 1e39, AttrType.FLOAT)
    with pytest.raises(IRError, match="expected a bool"):
        op.set_attr("b", 1, AttrType.BOOLEAN)
    assert op.attrs == {"n": 1}


def test_attr_values_are_immutable_copies():
    values = [1, 2]
    op = Operator("untyped", attrs={"ints": values})
    values.append(3)
    assert op.attr("ints") == (1, 2)
    attrs = op.attrs
    attrs["ints"] = ()
    assert op.attr("ints") == (1, 2)


def test_operator_validation():
    with pytest.raises(IRError, match="op type must be a non-empty string"):
        Operator("")
    with pytest.raises(IRError, match="expected var names"):
        Operator("relu", {"X": [1]})
    op = Operator("relu", {"X": Variable("a")}, {"Out": ("b",)})
    assert op.inputs == {"X": ("a",)} and op.input_names() == ["a"] and op.output_names() == ["b"]
    assert op.describe() == "relu(X=a) -> (Out=b)"
    with pytest.raises(IRError, match="not in a block"):
        op.index


# -- program -----------------------------------------------------------------------------------------
def test_blocks_and_feed_fetch_names():
    prog = Program()
    block = prog.global_block()
    with pytest.raises(IRError, match="no block 3"):
        prog.block(3)
    with pytest.raises(IRError, match="no block 5"):
        prog.create_block(5)
    assert prog.create_block(0).parent is block
    for name in ["feed", "fetch", "x", "y"]:
        block.create_var(name)
    block.append_op("feed", {"X": "feed"}, {"Out": "y"}, {"col": 1})
    block.append_op("feed", {"X": "feed"}, {"Out": "x"}, {"col": 0})
    block.append_op("fetch", {"X": "y"}, {"Out": "fetch"}, {"col": 0})
    assert prog.feed_names() == ["x", "y"] and prog.fetch_names() == ["y"]
    assert repr(prog) == "Program(2 blocks, 3 ops)"
