import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.attrs import AttrType
from halfway.ir.builder import create_parameter
from halfway.ir.operator import Operator
from halfway.ir.schema import OpSchema, Slot, register_op
from halfway.passes import get_pass
from tests.support.passcheck import add_fetch_ops, check_pass, fetch_options, load_fixture, random_program

register_op(OpSchema("tdce_loop", inputs=[Slot("X", duplicable=True, dispensable=True)],
                     outputs=[Slot("Out", duplicable=True, dispensable=True)]), override=True)


def _program():
    """x -> relu -> h -> exp -> y (fetched); h -> tanh -> dead; w (unused parameter); z (unused data)."""
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 3])
        layers.data("z", [2, 3])
        create_parameter("w", [3])
        h = layers.relu(x)
        layers.tanh(h)
        y = layers.exp(h)
    scope = halfway.init_scope(program)
    feed = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "z": np.zeros((2, 3), np.float32)}
    return program, scope, feed, y.name


def _types(program):
    return [op.type for op in program.global_block().ops]


def test_dead_ops_and_vars_go_unused_parameters_leave_the_program_only():
    program, scope, feed, y = _program()
    result = check_pass("dce", program, scope, feed, [y], fetch_names=[y])
    assert _types(program) == ["relu", "exp"]
    assert set(program.global_block().vars) == {"x", "z", "relu.tmp_0", y}
    assert dict(result.stats) == {"ops_removed": 1, "vars_removed": 2, "params_removed": 1}
    assert "w_0" in scope


def test_drop_params_removes_their_values_from_the_scope():
    program, scope, _, y = _program()
    result = get_pass("dce", fetch_names=[y], drop_params=True)(program, scope)
    assert result.stats["params_removed"] == 1 and "w_0" not in scope
    with pytest.raises(halfway.PassError, match="drop_params=True needs the Scope"):
        get_pass("dce", fetch_names=[y], drop_params=True)(program)


def test_fetch_ops_are_the_targets():
    program, scope, feed, y = _program()
    add_fetch_ops(program, [y])
    check_pass("dce", program, scope, feed, [y])
    assert _types(program) == ["relu", "exp", "fetch"]


def test_without_fetch_targets_dce_refuses():
    program, _, _, _ = _program()
    before = program.to_bytes()
    with pytest.raises(halfway.PassError, match=r"pass 'dce': the program has no fetch ops.*fetch_names="):
        get_pass("dce")(program)
    with pytest.raises(halfway.PassError, match=r"fetch name 'exp.tmp' is not a var of block 0 \(did you mean"):
        get_pass("dce", fetch_names=["exp.tmp"])(program)
    assert program.to_bytes() == before


def test_fetched_intermediate_keeps_its_producers():
    program, scope, feed, y = _program()
    check_pass("dce", program, scope, feed, ["relu.tmp_0"], fetch_names=["relu.tmp_0"])
    assert _types(program) == ["relu"] and not program.global_block().has_var(y)


def test_writes_to_parameters_are_kept_in_place_updates_are_not_side_effects():
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 3])
        w = create_parameter("w", [2, 3])
        y = layers.relu(x)
    block = program.global_block()
    block.append_op("assign", {"X": [x.name]}, {"Out": [w.name]})  # writes a parameter: kept
    block.append_op("scale", {"X": [w.name]}, {"Out": [w.name]}, {"scale": 2.0})  # in place, dead
    halfway.verify(program)
    get_pass("dce", fetch_names=[y.name])(program)
    assert _types(program) == ["relu", "assign"]


def test_sub_block_reads_keep_their_producers_and_the_loop_op_stays():
    program, scope, feed, y = _program()
    block = program.global_block()
    sub = program.create_block(0)
    sub.create_var("inner", shape=[2, 3])
    sub.append_op("relu", {"X": ["tanh.tmp_0"]}, {"Out": ["inner"]})
    loop = Operator("tdce_loop", {"X": []}, {"Out": []})
    loop.set_attr("sub_block", 1, AttrType.BLOCK)
    block.insert_op(len(block.ops), loop)
    result = get_pass("dce", fetch_names=[y])(program)
    halfway.verify(program, feed_names=["x", "z"])
    assert _types(program) == ["relu", "tanh", "exp", "tdce_loop"] and result.stats["ops_removed"] == 0
    assert [op.type for op in program.blocks[1].ops] == ["relu"]


def test_resnet_dead_branch_and_folded_bias():
    program, scope, feed, fetches = load_fixture()
    block = program.global_block()
    relu = next(op for op in block.ops if op.type == "relu")
    out = relu.output("Out")[0]
    block.create_var("dead", shape=block.var(out).shape)
    block.insert_op(relu.index + 1, Operator("exp", {"X": [out]}, {"Out": ["dead"]}))
    count = len(block.ops)
    result = check_pass("dce", program, scope, feed, fetches, rtol=1e-6)
    assert result.stats["ops_removed"] == 1 and len(block.ops) == count - 1 and not block.has_var("dead")
    get_pass("fold_constants")(program, scope)
    result = check_pass("dce", program, scope, feed, fetches, rtol=1e-6)
    assert result.stats["params_removed"] == 1 and not block.has_var("conv2d_0.b_0")


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_outputs(seed):
    program, scope, feed, fetches = random_program(seed)
    check_pass("dce", program, scope, feed, fetches, **fetch_options(program, fetches))


@pytest.mark.parametrize("seed", range(40, 70))
def test_all_cleanup_passes_in_a_row(seed):
    program, scope, feed, fetches = random_program(seed)
    for name in ("fold_constants", "remove_identity", "cancel_casts", "dce"):
        check_pass(name, program, scope, feed, fetches, rtol=2e-3, atol=2e-3, **fetch_options(program, fetches))
    ops = program.global_block().ops
    assert "fill_constant" not in {op.type for op in ops}
    for op in ops:  # what is left of a copy are two fetched names
        if op.type == "assign" or (op.type == "reshape2" and op.attr("shape") == (2, 3, 4, 4)):
            assert {*op.input("X"), *op.output("Out")} <= set(fetches)
    assert all(not op.attr("is_test") for op in ops if op.type == "dropout")
