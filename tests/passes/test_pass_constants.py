import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.schema import OpSchema, Slot, register_op, same_as
from halfway.passes import get_pass
from tests.support.passcheck import add_fetch_ops, check_pass, fetch_options, load_fixture, random_program


def _program(body, fetch_ops=True):
    """out = x + body(w) with x [4, 8] fed and w [8] a parameter; out is fetched."""
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [4, 8])
        w = create_parameter("w", [8])
        out = layers.elementwise_add(x, body(w))
    if fetch_ops:
        add_fetch_ops(program, [out.name])
    scope = halfway.init_scope(program, seed=1)
    feed = {"x": np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)}
    return program, scope, feed, [out.name]


def _types(program):
    return [op.type for op in program.global_block().ops if op.type != "fetch"]


def test_scale_of_a_parameter_becomes_a_new_parameter():
    program, scope, feed, fetches = _program(lambda w: layers.scale(w, 2.0, 1.0))
    w = scope["w_0"]
    result = check_pass("fold_constants", program, scope, feed, fetches)
    assert _types(program) == ["elementwise_add"]
    param = program.global_block().ops[0].input("Y")[0]
    assert param.startswith("scale.tmp_0.folded_") and program.global_block().var(param).persistable
    np.testing.assert_array_equal(scope[param], 2 * w + 1)
    assert dict(result.stats) == {"folded": 1, "params_added": 1, "ops_removed": 1, "vars_removed": 1}
    assert scope["w_0"] is w and program.global_block().has_var("w_0")  # dce removes it


def test_chains_and_fills_fold_into_one_parameter():
    def body(w):
        filled = layers.fill_constant([8], "float32", 0.5)
        return layers.reshape(layers.elementwise_mul(layers.exp(w), filled), [1, 8])

    program, scope, feed, fetches = _program(body)
    w = scope["w_0"].copy()
    result = check_pass("fold_constants", program, scope, feed, fetches)
    assert _types(program) == ["elementwise_add"]
    assert result.stats["folded"] == 3 and result.stats["params_added"] == 1 and result.stats["ops_removed"] == 4
    param = program.global_block().ops[0].input("Y")[0]
    np.testing.assert_allclose(scope[param], (np.exp(w) * 0.5).reshape(1, 8), rtol=1e-6)
    assert sorted(scope) == sorted(["w_0", param])


def test_new_names_avoid_names_the_scope_already_holds():
    program, scope, feed, fetches = _program(lambda w: layers.scale(w, 3.0))
    stale = np.zeros(1, np.float32)
    scope["scale.tmp_0.folded_0"] = stale
    check_pass("fold_constants", program, scope, feed, fetches)
    assert program.global_block().ops[0].input("Y") == ("scale.tmp_0.folded_1",)
    assert scope["scale.tmp_0.folded_0"] is stale


def _unchanged(program, scope, **options):
    before = program.to_bytes()
    assert not get_pass("fold_constants", **options)(program, scope).modified
    assert program.to_bytes() == before


def _spread(w):
    """[256, 8] from 32 bytes of w: 8 KiB, too large to fold by default."""
    return layers.reduce_sum(layers.elementwise_add(layers.fill_constant([256, 8], "float32", 1.0), w), dim=[0])


def test_random_ops_and_large_outputs_are_not_folded():
    for body in (lambda w: layers.dropout(w, 0.5, is_test=False), _spread):
        program, scope, _, _ = _program(body)
        _unchanged(program, scope)


def test_size_limit_can_be_raised():
    program, scope, feed, fetches = _program(_spread)
    check_pass("fold_constants", program, scope, feed, fetches, rtol=1e-6, max_growth=1000.0)
    assert _types(program) == ["elementwise_add"]


def test_fetched_and_sub_block_vars_stop_folding():
    program, scope, _, _ = _program(lambda w: layers.relu(w), fetch_ops=False)
    _unchanged(program, scope, fetch_names=["relu.tmp_0"])

    program, scope, _, _ = _program(lambda w: layers.relu(w))
    sub = program.create_block(0)
    sub.create_var("inner", shape=[8])
    sub.append_op("relu", {"X": ["w_0"]}, {"Out": ["inner"]})
    _unchanged(program, scope)


def test_written_parameters_are_not_constants():
    program, scope, feed, fetches = _program(lambda w: layers.relu(w))
    block = program.global_block()
    block.insert_op(0, halfway.Operator("scale", {"X": ["w_0"]}, {"Out": ["w_0"]}, {"scale": 2.0}))
    halfway.verify(program, feed_names=["x"])
    assert not get_pass("fold_constants")(program, scope).modified


def test_needs_the_scope():
    program, _, _, _ = _program(lambda w: layers.relu(w))
    with pytest.raises(halfway.PassError, match="fold_constants.*Scope"):
        get_pass("fold_constants")(program)


def test_resnet_bias_reshape_folds():
    program, scope, feed, fetches = load_fixture()
    block = program.global_block()
    result = check_pass("fold_constants", program, scope, feed, fetches)
    assert result.stats["folded"] == 1 and "reshape2" not in _types(program)
    bias = next(n for n in block.vars if ".folded_" in n)
    np.testing.assert_array_equal(scope[bias], scope["conv2d_0.b_0"].reshape(1, 8, 1, 1))


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_outputs(seed):
    program, scope, feed, fetches = random_program(seed)
    check_pass("fold_constants", program, scope, feed, fetches, rtol=1e-6, **fetch_options(program, fetches))


def test_ops_without_a_numpy_kernel_are_left_alone():
    register_op(OpSchema("tfold_custom", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X")),
                override=True)
    program, scope, _, _ = _program(lambda w: append_op("tfold_custom", {"X": w})["Out"][0])
    _unchanged(program, scope)
