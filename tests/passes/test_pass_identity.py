import numpy as np
import pytest

import halfway
import halfway.frontends.onnx
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.operator import Operator
from halfway.passes import get_pass
from halfway.passes.rewrite import collect_near_misses
from tests.support.onnx_zoo import dummy_inputs, light_model, with_random_weights
from tests.support.passcheck import (
    add_fetch_ops,
    check_pass,
    fetch_options,
    insert_after,
    load_fixture,
    random_program,
    run,
)

FEED = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}


def _build(body, fetch_ops=True):
    """x [2, 3, 4] -> body(x) -> relu; the relu's output is fetched (by a fetch op, or named)."""
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 3, 4])
        out = layers.relu(body(x))
    if fetch_ops:
        add_fetch_ops(program, [out.name])
    return program, halfway.Scope(), [out.name]


def _types(program):
    return [op.type for op in program.global_block().ops if op.type != "fetch"]


def _apply(program, fetches, **options):
    before = run(program.clone(), halfway.Scope(), FEED, fetches)
    result = get_pass("remove_identity", **options)(program)
    halfway.verify(program, feed_names=["x"])
    for got, want in zip(run(program, halfway.Scope(), FEED, fetches), before):
        np.testing.assert_array_equal(got, want)
    return result


@pytest.mark.parametrize("implementation, p", [("upscale_in_train", 0.5), ("downgrade_in_infer", 0.0)])
def test_identity_dropout_is_removed(implementation, p):
    program, _, fetches = _build(lambda x: layers.dropout(x, p, dropout_implementation=implementation))
    result = _apply(program, fetches)
    assert _types(program) == ["relu"] and program.global_block().ops[0].input("X") == ("x",)
    assert result.stats["dropouts_removed"] == 1 and result.stats["ops_removed"] == 1
    assert result.stats["vars_removed"] == 1 and not program.global_block().has_var("dropout_0.tmp_0")


def test_downgrade_in_infer_dropout_becomes_a_scale():
    program, _, fetches = _build(lambda x: layers.dropout(x, 0.25))
    result = _apply(program, fetches)
    assert _types(program) == ["scale", "relu"]
    scale = program.global_block().ops[0]
    assert scale.attr("scale") == pytest.approx(0.75) and scale.attr("bias") == 0.0
    assert scale.output("Out") == ("dropout_0.tmp_0",)
    assert result.stats["dropouts_to_scale"] == 1 and result.stats["ops_removed"] == 0


def test_scale_one_zero_and_assign_chains_collapse():
    program, _, fetches = _build(lambda x: layers.assign(layers.assign(layers.scale(layers.assign(x), 1.0, 0.0))))
    result = _apply(program, fetches)
    assert _types(program) == ["relu"] and program.global_block().ops[0].input("X") == ("x",)
    assert result.stats["assigns_removed"] == 3 and result.stats["scales_removed"] == 1
    assert set(program.global_block().vars) == {"x", "relu.tmp_0", "fetch"}


def test_reshape_of_reshape_reads_the_first_input():
    program, _, fetches = _build(lambda x: layers.reshape(layers.reshape(x, [6, 4]), [0, 2, 2]))
    result = _apply(program, fetches)
    assert _types(program) == ["reshape2", "relu"]
    reshape = program.global_block().ops[0]
    assert reshape.input("X") == ("x",) and list(reshape.attr("shape")) == [6, 2, 2]
    assert result.stats["reshapes_merged"] == 1


def test_paddle_style_reshapes_with_xshape_merge():
    def body(x):
        first = append_op("reshape2", {"X": x}, {"shape": [6, 4]}, outputs={"Out": 1, "XShape": 1})["Out"][0]
        return append_op("reshape2", {"X": first}, {"shape": [2, -1]}, outputs={"Out": 1, "XShape": 1})["Out"][0]

    program, _, fetches = _build(body)
    _apply(program, fetches)
    (reshape, _) = program.global_block().ops[:2]
    assert _types(program) == ["reshape2", "relu"] and reshape.input("X") == ("x",)
    assert program.global_block().var(reshape.output("XShape")[0]).shape == (0, 2, 3, 4)


def test_near_misses_are_left_alone():
    cases = [
        lambda x: layers.dropout(x, 0.5, is_test=False),                # training mode
        lambda x: layers.dropout(x, 0.5, is_test=False, dropout_implementation="upscale_in_train"),
        lambda x: layers.scale(x, 1.0, 0.5),                              # wrong attr
        lambda x: layers.scale(x, 2.0, 0.0),
        lambda x: layers.scale(x, layers.fill_constant([1], "float32", 1.0)),  # ScaleTensor
        lambda x: layers.reshape(x, [2, 12]),                             # one reshape
    ]
    for body in cases:
        program, _, fetches = _build(body)
        before = program.to_bytes()
        result = _apply(program, fetches)
        assert not result.modified and program.to_bytes() == before, body


def test_reshape_intermediate_with_two_readers_or_fetched_stays():
    def two_readers(x):
        middle = layers.reshape(x, [6, 4])
        return layers.elementwise_add(layers.reshape(middle, [2, 3, 4]), layers.reshape(layers.relu(middle), [2, 3, 4]))

    program, _, fetches = _build(two_readers)
    assert not _apply(program, fetches).modified

    program, _, fetches = _build(lambda x: layers.reshape(layers.reshape(x, [6, 4]), [2, 12]), fetch_ops=False)
    middle = program.global_block().ops[0].output("Out")[0]
    assert not _apply(program, [middle, *fetches], fetch_names=[middle]).modified


def test_fetched_identity_output_keeps_its_name():
    program = halfway.Program()
    with halfway.program_guard(program):
        h = layers.relu(layers.data("x", [2, 3, 4]))
        out = layers.assign(layers.scale(h, 1.0, 0.0))
    add_fetch_ops(program, [out.name])
    result = _apply(program, [out.name])
    assert _types(program) == ["relu"] and program.global_block().ops[0].output("Out") == (out.name,)
    assert result.stats["ops_removed"] == 2 and not program.global_block().has_var(h.name)


def test_fetched_or_fed_input_is_not_renamed():
    program = halfway.Program()
    with halfway.program_guard(program):
        h = layers.relu(layers.data("x", [2, 3, 4]))
        out = layers.assign(h)
    add_fetch_ops(program, [h.name, out.name])
    assert not _apply(program, [h.name, out.name]).modified

    program = halfway.Program()
    with halfway.program_guard(program):
        out = layers.assign(layers.data("x", [2, 3, 4]))
    assert not _apply(program, [out.name], fetch_names=[out.name]).modified


def test_without_fetch_names_an_unread_output_is_left_alone():
    program = halfway.Program()
    with halfway.program_guard(program):
        layers.scale(layers.relu(layers.data("x", [2, 3, 4])), 1.0, 0.0)
    assert not get_pass("remove_identity")(program).modified


def test_dropout_whose_mask_is_read_stays():
    def body(x):
        outs = append_op("dropout", {"X": x}, {"dropout_prob": 0.0, "is_test": True}, outputs={"Out": 1, "Mask": 1})
        layers.cast(outs["Mask"][0], "float32")
        return outs["Out"][0]

    program, _, fetches = _build(body)
    with collect_near_misses() as misses:
        assert not _apply(program, fetches).modified
    assert [(m.rule, m.root.split("(")[0], m.reason) for m in misses] == [
        ("inference dropout -> removed", "dropout", "another output of the op is read, kept or written elsewhere")]


def test_vars_of_sub_blocks_are_not_touched():
    program, _, fetches = _build(lambda x: layers.assign(x))
    block = program.global_block()
    copied = block.ops[0].output("Out")[0]
    sub = program.create_block(0)
    sub.create_var("inner", shape=[2, 3, 4])
    sub.append_op("relu", {"X": [copied]}, {"Out": ["inner"]})
    assert not get_pass("remove_identity")(program).modified
    assert _types(program) == ["assign", "relu"]


def test_unknown_fetch_name_is_an_error():
    program, _, _ = _build(lambda x: layers.assign(x))
    with pytest.raises(halfway.PassError, match=r"remove_identity.*'relu.tmp'.*did you mean 'relu.tmp_0'"):
        get_pass("remove_identity", fetch_names=["relu.tmp"])(program)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_outputs(seed):
    program, scope, feed, fetches = random_program(seed)
    check_pass("remove_identity", program, scope, feed, fetches, **fetch_options(program, fetches))


def test_resnet_with_identities_inserted():
    program, scope, feed, fetches = load_fixture()
    block = program.global_block()
    out = next(op for op in block.ops if op.type == "relu").output("Out")[0]
    block.create_var("dropped", shape=block.var(out).shape)
    block.create_var("scaled", shape=block.var(out).shape)
    dropout = {"dropout_prob": 0.5, "is_test": True, "dropout_implementation": "upscale_in_train"}
    insert_after(block, out, [Operator("dropout", {"X": [out]}, {"Out": ["dropped"]}, dropout),
                              Operator("scale", {"X": ["dropped"]}, {"Out": ["scaled"]}, {"scale": 1.0})], "scaled")
    count = len(block.ops)
    result = check_pass("remove_identity", program, scope, feed, fetches, rtol=1e-6)
    assert result.stats["ops_removed"] == 2 and len(block.ops) == count - 2
    assert not block.has_var("dropped") and not block.has_var("scaled")


def test_resnet_as_saved_has_nothing_to_remove():
    program, scope, _, _ = load_fixture()
    before = program.to_bytes()
    assert not get_pass("remove_identity")(program, scope).modified
    assert program.to_bytes() == before



def test_copies_of_a_parameter_read_the_parameter():
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 3, 4])
        w = create_parameter("w", [4])
        out = layers.elementwise_add(x, layers.assign(layers.scale(w, 1.0, 0.0)))
    scope = halfway.init_scope(program)
    result = check_pass("remove_identity", program, scope, FEED, [out.name], fetch_names=[out.name])
    assert _types(program) == ["elementwise_add"] and program.global_block().ops[0].input("Y") == (w.name,)
    assert result.stats["ops_removed"] == 2


def test_reshape_and_its_inverse_disappear():
    program, _, fetches = _build(lambda x: layers.reshape(layers.reshape(x, [6, 4]), [2, 3, 4]))
    result = _apply(program, fetches)
    assert _types(program) == ["relu"] and program.global_block().ops[0].input("X") == ("x",)
    assert result.stats["reshapes_merged"] == 1 and result.stats["reshapes_removed"] == 1


def test_reshape_to_an_unknown_or_different_shape_stays():
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [-1, 3, 4])
        out = layers.relu(layers.reshape(x, [0, 3, 4]))
    assert not get_pass("remove_identity", fetch_names=[out.name])(program).modified


def test_onnx_squeezenet_loses_its_dropout():
    model = with_random_weights(light_model("squeezenet"), seed=1)
    program, feed_names, fetch_names, scope = halfway.frontends.onnx.load(model)
    feeds = dummy_inputs(model, seed=2)
    result = check_pass("remove_identity", program, scope, {n: feeds[n] for n in feed_names}, fetch_names)
    assert result.stats["dropouts_removed"] == 1 and "dropout" not in _types(program)



@pytest.mark.parametrize("pool, removed", [
    (lambda x: layers.adaptive_pool2d(x, 5, pool_type="avg"), True),  # VGG's 7x7 map pooled to 7x7
    (lambda x: layers.adaptive_pool2d(x, [5, 5], pool_type="max"), True),
    (lambda x: layers.pool2d(x, pool_size=1, pool_stride=1, pool_type="max"), True),
    (lambda x: layers.pool2d(x, pool_size=1, pool_stride=1, pool_type="avg"), True),
    (lambda x: layers.adaptive_pool2d(x, 4, pool_type="avg"), False),  # a smaller map
    (lambda x: layers.pool2d(x, pool_size=3, pool_stride=1, pool_padding=1, pool_type="max"), False),
    (lambda x: layers.pool2d(x, pool_size=1, pool_stride=2, pool_type="avg"), False),  # 3x3
])
def test_pools_of_one_pixel_windows_are_removed(pool, removed):
    program = halfway.Program()
    with halfway.program_guard(program):
        out = layers.relu(pool(layers.data("x", [1, 3, 5, 5])))
    add_fetch_ops(program, [out.name])
    feed = {"x": np.random.default_rng(1).standard_normal((1, 3, 5, 5)).astype(np.float32)}
    before = run(program.clone(), halfway.Scope(), feed, [out.name])
    result = get_pass("remove_identity")(program)
    halfway.verify(program, feed_names=["x"])
    assert result.stats["pools_removed"] == int(removed)
    assert _types(program) == ["relu"] if removed else len(_types(program)) == 2
    np.testing.assert_array_equal(run(program, halfway.Scope(), feed, [out.name])[0], before[0])
