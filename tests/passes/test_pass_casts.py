import itertools

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.dtypes import DType
from halfway.ir.operator import Operator
from halfway.passes import get_pass
from halfway.passes.casts import exact_round_trip
from halfway.passes.rewrite import collect_near_misses
from tests.support.passcheck import (
    add_fetch_ops,
    check_pass,
    fetch_options,
    insert_after,
    load_fixture,
    random_program,
    run,
)

VALUES = np.array([[-300.7, -1.3333, 0.1, 1e-6], [3.0, 6000.0, 2.5, 1234.567]])


def _program(body, dtype="float32", fetch_ops=True):
    """x [2, 4] of ``dtype`` -> body(x) -> relu (fetched)."""
    program = halfway.Program()
    with halfway.program_guard(program):
        x = layers.data("x", [2, 4], dtype)
        out = layers.relu(body(x))
    if fetch_ops:
        add_fetch_ops(program, [out.name])
    return program, {"x": VALUES.astype(dtype)}, [out.name]


def _types(program):
    return [op.type for op in program.global_block().ops if op.type != "fetch"]


def _apply(program, feed, fetches, **options):
    return check_pass("cancel_casts", program, halfway.Scope(), feed, fetches, **options)


def test_cast_to_the_same_dtype_is_removed():
    program, feed, fetches = _program(lambda x: layers.cast(x, "float32"))
    result = _apply(program, feed, fetches)
    assert _types(program) == ["relu"] and result.stats["casts_removed"] == 1


def test_duplicate_casts_merge():
    program, feed, fetches = _program(
        lambda x: layers.cast(layers.elementwise_add(layers.cast(x, "float16"), layers.cast(x, "float16")), "float32"))
    result = _apply(program, feed, fetches)
    assert _types(program) == ["cast", "elementwise_add", "cast", "relu"]
    add = program.global_block().ops[1]
    assert add.input("X") == add.input("Y") == ("cast.tmp_0",)
    assert result.stats["casts_merged"] == 1 and result.stats["vars_removed"] == 1


def test_exact_round_trip_cancels_both_casts():
    program, feed, fetches = _program(lambda x: layers.cast(layers.cast(x, "float32"), "float16"), "float16")
    result = _apply(program, feed, fetches)
    assert _types(program) == ["relu"] and program.global_block().ops[0].input("X") == ("x",)
    assert result.stats["casts_cancelled"] == 1 and result.stats["ops_removed"] == 2


def test_lossy_float32_float16_round_trip_cancels_unless_told_not_to():
    body = lambda x: layers.cast(layers.cast(x, "float16"), "float32")  # noqa: E731
    program, feed, fetches = _program(body)
    rounded = run(program.clone(), halfway.Scope(), feed, fetches)[0]
    result = get_pass("cancel_casts")(program)
    halfway.verify(program, feed_names=["x"])
    assert _types(program) == ["relu"] and result.stats["casts_cancelled"] == 1
    got = run(program, halfway.Scope(), feed, fetches)[0]
    np.testing.assert_array_equal(got, np.maximum(feed["x"], 0))  # x itself, not x rounded to float16
    assert not np.array_equal(got, rounded)
    np.testing.assert_allclose(rounded, got, rtol=1e-3, atol=1e-4)
    assert not get_pass("cancel_casts")(program).modified

    program, feed, fetches = _program(body)
    assert not get_pass("cancel_casts", lossy=False)(program).modified


def test_pair_whose_middle_is_read_keeps_the_first_cast():
    def body(x):
        low = layers.cast(x, "float16")
        layers.relu(low)
        return layers.cast(low, "float32")

    program, feed, fetches = _program(body)
    result = get_pass("cancel_casts")(program)
    halfway.verify(program, feed_names=["x"])
    assert _types(program) == ["cast", "relu", "relu"] and result.stats["casts_cancelled"] == 1
    assert program.global_block().ops[2].input("X") == ("x",)


@pytest.mark.parametrize("first, dtype", [("int32", "float32"), ("float32", "int32"), ("int64", "int32"),
                                          ("float16", "int64")])
def test_value_changing_round_trips_stay(first, dtype):
    program, feed, fetches = _program(lambda x: layers.cast(layers.cast(x, dtype), first), first)
    before = program.to_bytes()
    assert not get_pass("cancel_casts")(program).modified and program.to_bytes() == before


def test_casts_to_different_dtypes_do_not_merge():
    program, feed, fetches = _program(
        lambda x: layers.elementwise_add(layers.cast(layers.cast(x, "float16"), "float32"),
                                         layers.cast(layers.cast(x, "float64"), "float32")))
    result = _apply(program, feed, fetches, lossy=False)
    assert result.stats["casts_merged"] == 0 and result.stats["casts_cancelled"] == 1
    assert [program.global_block().var(op.output("Out")[0]).dtype for op in program.global_block().ops
            if op.type == "cast"] == [DType.float16, DType.float32]


def _twins(update_between):
    """h = relu(x); two casts of h to float16 (h updated in place between them if asked)."""
    program = halfway.Program()
    with halfway.program_guard(program):
        h = layers.relu(layers.data("x", [2, 4]))
        out = layers.relu(layers.elementwise_add(layers.cast(h, "float16"), layers.cast(h, "float16")))
    if update_between:
        program.global_block().insert_op(2, Operator("scale", {"X": [h.name]}, {"Out": [h.name]}, {"scale": 2.0}))
    add_fetch_ops(program, [out.name])
    return program, {"x": VALUES.astype("float32")}, [out.name]


def test_var_written_between_twin_casts_stops_the_merge():
    program, feed, fetches = _twins(update_between=True)
    result = _apply(program, feed, fetches)
    assert not result.modified and _types(program).count("cast") == 2
    program, feed, fetches = _twins(update_between=False)
    assert _apply(program, feed, fetches).stats["casts_merged"] == 1


def test_fetched_output_of_a_pair_keeps_its_cast():
    program, feed, fetches = _program(lambda x: x, "float16", fetch_ops=False)
    with halfway.program_guard(program):
        z = layers.cast(layers.cast(program.global_block().var("x"), "float32"), "float16")
    assert not get_pass("cancel_casts", fetch_names=[z.name, *fetches])(program).modified


def test_exact_round_trip_matches_numpy_on_extreme_values():
    dtypes = [DType.bool, DType.uint8, DType.int8, DType.int16, DType.int32, DType.int64, DType.float16,
              DType.float32, DType.float64]
    for a, b in itertools.product(dtypes, dtypes):
        if a.numpy.kind == "b":
            values = np.array([False, True])
        elif a.numpy.kind == "f":
            info = np.finfo(a.numpy)
            values = np.array([info.min, info.max, info.tiny, info.eps, 1 + info.eps, -2.5, 0.1], a.numpy)
        else:
            info = np.iinfo(a.numpy)
            values = np.array([info.min, info.max, info.max - 1, 0, 1], a.numpy)
        with np.errstate(all="ignore"):
            back = values.astype(b.numpy).astype(a.numpy)
        assert exact_round_trip(a, b) == bool(np.array_equal(back, values)), (a, b)


def test_resnet_with_a_float16_boundary_inserted():
    program, scope, feed, fetches = load_fixture()
    want = run(program.clone(), scope, feed, fetches)
    block = program.global_block()
    out = next(op for op in block.ops if op.type == "relu").output("Out")[0]
    block.create_var("low", shape=block.var(out).shape, dtype="float16")
    block.create_var("high", shape=block.var(out).shape)
    insert_after(block, out, [Operator("cast", {"X": [out]}, {"Out": ["low"]}, {"in_dtype": 5, "out_dtype": 4}),
                              Operator("cast", {"X": ["low"]}, {"Out": ["high"]}, {"in_dtype": 4, "out_dtype": 5})],
                 "high")
    result = check_pass("cancel_casts", program, scope, feed, fetches, rtol=1e-2, atol=1e-3)
    assert result.stats["casts_cancelled"] == 1 and "cast" not in _types(program)
    np.testing.assert_array_equal(run(program, scope, feed, fetches)[0], want[0])


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_outputs(seed):
    program, scope, feed, fetches = random_program(seed)
    check_pass("cancel_casts", program, scope, feed, fetches, rtol=2e-3, atol=2e-3, **fetch_options(program, fetches))


def test_pair_read_by_a_sub_block_stays():
    program, feed, fetches = _program(lambda x: layers.cast(layers.cast(x, "float32"), "float16"), "float16")
    back = program.global_block().ops[1].output("Out")[0]
    sub = program.create_block(0)
    sub.create_var("inner", shape=[2, 4], dtype="float16")
    sub.append_op("relu", {"X": [back]}, {"Out": ["inner"]})
    assert not get_pass("cancel_casts")(program).modified


def test_a_round_trip_kept_by_lossy_false_is_a_near_miss_with_its_reason():
    program, _, fetches = _program(lambda x: layers.cast(layers.cast(x, "float16"), "float32"))
    with collect_near_misses() as misses:
        assert not get_pass("cancel_casts", lossy=False)(program).modified
    assert [(m.rule, m.reason) for m in misses] == [
        ("cast round trip -> removed", "float32 -> float16 -> float32 changes values (lossy=False)")]
