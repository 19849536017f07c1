"""The float16 transpiler on whole models: accuracy against the float32 run, float16 kernels, casts,
idempotence, and the caller's program and scope left untouched."""

from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor, Float16RangeError
from halfway.ir import DType, PassError
from halfway.ir.attrs import AttrType
from halfway.passes import get_pass
from halfway.passes.float16 import Float16Report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
EPS16 = float(np.finfo(np.float16).eps)


def build_cnn(batch: int = 4, seed: int = 0):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("image", [batch, 3, 16, 16])
        y = layers.conv2d(x, 8, 3, padding=1, act=None)
        y = layers.batch_norm(y, act="relu")
        y = layers.pool2d(y, 2, pool_stride=2)
        y = layers.conv2d(y, 8, 3, padding=1, groups=8, act="relu6")
        y = layers.pool2d(y, global_pooling=True, pool_type="avg")
        y = layers.fc(layers.flatten(y), 10)
        out = layers.softmax(y)
    return prog, ["image"], [out.name], halfway.init_scope(prog, seed=seed)


def load(name):
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / name))
    return program, feeds, fetches, scope


def run(program, scope, feed, fetches, **options):
    prepared = Executor().prepare(program, list(feed), fetches, scope, **options)
    return prepared.run(feed), prepared.report


def boundary_vars(program):
    """Vars of the program read or written by ops in both float16 and float32 (via a cast)."""
    return {op.input("X")[0] for op in program.global_block().ops if op.type == "cast"}


def check_accuracy(ref, got, scale=8):
    """float16 storage carries ~eps16 relative error per op; allow a few ops' worth."""
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=scale * EPS16, atol=scale * EPS16 * float(np.abs(ref).max()))
    assert np.array_equal(ref.argmax(-1), got.argmax(-1))


def image_feed(batch=4, seed=1):
    return {"image": np.random.default_rng(seed).standard_normal((batch, 3, 16, 16)).astype(np.float32)}


def kernels_by_type(report):
    return {(op_type, key.dtype) for _, op_type, key in report.kernels}


@pytest.mark.parametrize("model", ["builder_cnn", "resnet_tiny", "mlp_tiny"])
def test_float16_program_matches_float32_and_runs_float16_kernels(model):
    if model == "builder_cnn":
        program, feeds, fetches, scope = build_cnn()
        feed = image_feed()
    else:
        program, feeds, fetches, scope = load(model)
        io = np.load(FIXTURES / f"{model}_io.npz")
        feed = {n: io[n] for n in feeds}
    half, report = halfway.float16_transpile(program, scope)
    (ref,), _ = run(program, scope, feed, fetches)
    (got,), kernels = run(half, scope, feed, fetches)
    check_accuracy(ref, got)
    casts = [op for op in half.global_block().ops if op.type == "cast"]
    # one cast in after the feed, one out before the fetch, nothing in between
    assert len(casts) == len(report.casts) == len(boundary_vars(half)) == 2
    compute = [(t, d) for t, d in kernels_by_type(kernels) if t != "cast"]
    assert compute and all(d is DType.float16 for _, d in compute)
    assert report.float32_ops == []
    # every converted parameter (all float32, each now read only in float16) shrinks by half
    assert report.params_removed == [p.name for p in report.params]
    assert report.param_bytes_after == report.param_bytes_before - 2 * sum(p.elements for p in report.params)


def test_imported_resnet_agrees_with_paddle_within_float16_tolerance():
    program, feeds, fetches, scope = load("resnet_tiny")
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    half, _ = halfway.float16_transpile(program, scope)
    (got,), _ = run(half, scope, {n: io[n] for n in feeds}, fetches)
    check_accuracy(io[fetches[0]], got)


def test_black_listed_ops_get_one_shared_cast_per_boundary_var():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8, 8])
        a = layers.conv2d(x, 4, 3, padding=1, bias_attr=False)
        s = layers.scale(a, scale=0.1)
        both = layers.elementwise_add(layers.exp(s), layers.pow(s, 2.0))  # two float32 readers of s
        r = layers.relu(both)                            # FOLLOW: float32
        b = layers.conv2d(r, 4, 1, bias_attr=False)      # white list: back to float16
        out = layers.elementwise_add(b, layers.relu(a))
    scope = halfway.init_scope(prog, seed=3)
    feed = {"x": np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    half, report = halfway.float16_transpile(prog, scope, fetch_names=[out.name])
    decided = {e.output: (e.dtype, e.reason) for e in report.ops}
    assert decided[r.name] == ("float32", f"follows float32 input {both.name!r}")
    assert {(e.type, e.reason) for e in report.float32_ops} >= {("exp", "black list"), ("pow", "black list")}
    block = half.global_block()
    casts = [op for op in block.ops if op.type == "cast"]
    sources = [op.input("X")[0] for op in casts]
    assert sorted(sources) == sorted(["x", s.name, r.name, f"{out.name}.fp16"])
    assert {op.type for op, _, _ in block.var(f"{s.name}.fp32").uses()} == {"exp", "pow"}
    for op in casts:  # no cast reads a cast
        assert all(w.type != "cast" for w, _, _ in block.var(op.input("X")[0]).producers())
    (ref,), _ = run(prog, scope, feed, [out.name])
    (got,), kernels = run(half, scope, feed, [out.name])
    check_accuracy(ref, got, scale=16)
    used = kernels_by_type(kernels)
    assert {("exp", DType.float32), ("pow", DType.float32), ("conv2d", DType.float16)} <= used
    assert ("conv2d", DType.float32) not in used


def test_parameter_read_by_float16_and_float32_ops_gets_both_copies():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4])
        w = halfway.ir.builder.create_parameter("w", [4])
        h = layers.elementwise_mul(layers.fc(x, 4), w)   # float16
        g = layers.elementwise_mul(layers.log(layers.abs(x)), w)  # float32 (after the black-listed log)
        out = layers.elementwise_add(layers.cast(h, "float32"), g)
    scope = halfway.init_scope(prog, seed=0)
    half, report = halfway.float16_transpile(prog, scope, fetch_names=[out.name])
    converted = {p.name: p.float16_name for p in report.params}
    assert converted[w.name] == f"{w.name}.fp16"
    block = half.global_block()
    assert block.var(w.name).dtype is DType.float32 and block.var(f"{w.name}.fp16").dtype is DType.float16
    readers = {op.type for op, _, _ in block.var(f"{w.name}.fp16").uses()} | {
        op.type for op, _, _ in block.var(w.name).uses()}
    assert readers == {"elementwise_mul"}
    # the fc weight is read only in float16: removed from the program, kept in the scope
    fc_w = next(n for n in report.params_removed if n.startswith("fc"))
    assert not block.has_var(fc_w) and fc_w in scope
    np.testing.assert_array_equal(scope[f"{w.name}.fp16"], scope[w.name].astype(np.float16))


def test_integer_and_shape_paths_get_no_casts():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 4, 4])
        y = layers.conv2d(x, 6, 1, bias_attr=False)
        dims = layers.shape(y)                              # reads float16, writes int32
        flat = layers.reshape(y, layers.cast(dims, "int64"))  # int shape tensor: kept slot
        out = layers.relu(flat)
    scope = halfway.init_scope(prog)
    half, report = halfway.float16_transpile(prog, scope, fetch_names=[out.name])
    block = half.global_block()
    assert {(c.from_dtype, c.to_dtype) for c in report.casts} == {("float32", "float16"), ("float16", "float32")}
    assert len(report.casts) == 2  # the feed and the fetch; the int32 -> int64 cast is the user's
    int_casts = [op for op in block.ops if op.type == "cast" and not block.var(op.input("X")[0]).dtype.is_floating]
    assert [op.input("X")[0] for op in int_casts] == [dims.name]
    assert block.var(dims.name).dtype is DType.int32
    feed = {"x": np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)}
    (ref,), _ = run(prog, scope, feed, [out.name])
    (got,), _ = run(half, scope, feed, [out.name])
    check_accuracy(ref, got)


def test_the_programs_own_casts_read_their_input_in_its_new_dtype():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 4, 4])
        y = layers.conv2d(x, 6, 1, bias_attr=False)
        same = layers.relu(layers.cast(y, "float32"))
        wide = layers.cast(y, "float64")
        whole = layers.cast(y, "int32")
    scope = halfway.init_scope(prog)
    fetches = [same.name, wide.name, whole.name]
    half, report = halfway.float16_transpile(prog, scope, fetch_names=fetches)
    halfway.verify(half)
    block = half.global_block()
    user_casts = [op for op in block.ops if op.type == "cast" and op.input("X")[0] == y.name]
    assert block.var(y.name).dtype is DType.float16 and len(user_casts) == 3
    assert all(op.attr("in_dtype") == int(DType.float16) for op in user_casts)
    # the float32 -> float32 cast casts to the model's float type: float16 now, and relu follows it
    assert [DType(op.attr("out_dtype")) for op in user_casts] == [DType.float16, DType.float64, DType.int32]
    assert [e.dtype for e in report.ops if e.type in ("cast", "relu")][:2] == ["float16", "float16"]
    feed = {"x": np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)}
    refs, _ = run(prog, scope, feed, fetches)
    gots, _ = run(half, scope, feed, fetches)
    assert [got.dtype for got in gots] == [ref.dtype for ref in refs]
    for ref, got in zip(refs[:2], gots[:2]):
        np.testing.assert_allclose(got, ref, rtol=4 * EPS16, atol=4 * EPS16 * float(np.abs(ref).max()))
    np.testing.assert_allclose(gots[2], refs[2], atol=1)  # truncation may fall on either side of an integer
    assert get_pass("float16")(half, scope).modified is False


def test_keep_io_types_false_feeds_and_fetches_float16():
    program, feeds, fetches, scope = load("mlp_tiny")
    io = np.load(FIXTURES / "mlp_tiny_io.npz")
    half, report = halfway.float16_transpile(program, scope, keep_io_types=False)
    block = half.global_block()
    assert block.var(feeds[0]).dtype is DType.float16 and block.var(fetches[0]).dtype is DType.float16
    assert not [op for op in block.ops if op.type == "cast"] and report.casts == []
    (got,), _ = run(half, scope, {feeds[0]: io[feeds[0]].astype(np.float16)}, fetches)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), io[fetches[0]], rtol=8 * EPS16,
                               atol=8 * EPS16 * float(np.abs(io[fetches[0]]).max()))


def test_transpiling_twice_changes_nothing_the_second_time():
    program, feeds, fetches, scope = load("resnet_tiny")
    half, _ = halfway.float16_transpile(program, scope)
    names = list(scope)
    before = half.to_bytes()
    result = get_pass("float16")(half, scope)
    assert not result.modified and half.to_bytes() == before and list(scope) == names


def test_input_program_and_scope_entries_are_untouched():
    program, feeds, fetches, scope = load("resnet_tiny")
    program_bytes = program.to_bytes()
    entries = {n: scope[n] for n in scope}
    copies = {n: v.copy() for n, v in entries.items()}
    half, report = halfway.float16_transpile(program, scope)
    assert program.to_bytes() == program_bytes
    for name, value in entries.items():
        assert scope[name] is value and scope[name].dtype == copies[name].dtype
        np.testing.assert_array_equal(scope[name], copies[name])
    assert set(scope) == set(entries) | {p.float16_name for p in report.params}
    same, _ = halfway.float16_transpile(program, scope, in_place=True)
    assert same is program and program.to_bytes() == half.to_bytes()


def test_parameter_beyond_float16_range_keeps_its_op_float32():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 8])
        h = layers.fc(x, 8, bias_attr=False, act="relu")
        big = layers.fc(h, 4, bias_attr=False)
        out = layers.scale(big, scale=1e-4)
    scope = halfway.init_scope(prog, seed=0)
    w_big = big.producer().input("Y")[0]
    scope[w_big] = scope[w_big] * 1e5  # beyond 65504
    feed = {"x": np.abs(np.random.default_rng(0).standard_normal((2, 8))).astype(np.float32)}
    half, report = halfway.float16_transpile(prog, scope, fetch_names=[out.name])
    kept = report.kept_float32()
    assert any("matmul_v2" in op and w_big in why for op, why in kept.items())
    assert report.out_of_range[w_big] > 0
    (ref,), _ = run(prog, scope, feed, [out.name])
    (got,), _ = run(half, scope, feed, [out.name])
    assert np.all(np.isfinite(ref)) and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=16 * EPS16)


def _overflowing_program():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 16])
        y = layers.fc(x, 16, bias_attr=False)   # weights 100: |y| ~ 16 * 100 * 60
        z = layers.relu(y)
        out = layers.scale(z, scale=1e-3)       # small again
    scope = halfway.init_scope(prog, seed=0)
    w = y.producer().input("Y")[0]
    scope[w] = np.full_like(scope[w], 100.0)
    feed = {"x": np.full((2, 16), 60.0, np.float32)}
    return prog, scope, feed, out.name


def test_activations_overflowing_float16_stay_float32_with_calibration():
    prog, scope, feed, out = _overflowing_program()
    (ref,), _ = run(prog, scope, feed, [out])
    assert np.all(np.isfinite(ref)) and ref.max() > 65.504
    plain, _ = halfway.float16_transpile(prog, scope, fetch_names=[out])
    with pytest.raises(Float16RangeError, match=r"op #\d+ matmul_v2\(.*overflowed float16's range"):
        run(plain, scope, feed, [out])  # without calibration the float16 program overflows
    with pytest.warns(RuntimeWarning, match="overflow"):
        (bad,), _ = run(plain, scope, feed, [out], check_float16_range=False)
    assert not np.all(np.isfinite(bad))
    half, report = halfway.float16_transpile(prog, scope, fetch_names=[out], calibration_feeds=feed)
    (got,), _ = run(half, scope, feed, [out])
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=16 * EPS16)
    kept = report.kept_float32()
    assert any(op.endswith("matmul_v2") and "calibration" in why for op, why in kept.items())
    assert any(op.endswith("relu") for op in kept)


def test_tiny_parameter_values_are_counted():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 4])
        out = layers.fc(x, 4, bias_attr=False)
    scope = halfway.init_scope(prog)
    w = out.producer().input("Y")[0]
    scope[w] = np.array([[1e-9, 1e-6, 1.0, 0.0]] * 4, np.float32)
    _, report = halfway.float16_transpile(prog, scope, fetch_names=[out.name])
    assert (report.values_flushed_to_zero, report.values_to_subnormal) == (4, 4)
    text = str(report)
    assert "values flushed to zero / to subnormal" in text and "4 / 4" in text


def test_lists_reductions_and_missing_kernels_decide_float32():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [4, 64, 64])
        small = layers.reduce_sum(x, dim=-1)           # 64 elements
        large = layers.reduce_mean(x)                   # 16384 elements
        out = layers.softmax(small)
    scope = halfway.init_scope(prog)
    _, report = halfway.float16_transpile(prog, scope, black_list=["softmax"], fetch_names=[out.name, large.name])
    dtypes = {e.output: (e.dtype, e.reason) for e in report.ops}
    assert dtypes[small.name][0] == "float16"
    assert dtypes[large.name] == ("float32", "reduces 16384 elements (more than 4096)")
    assert dtypes[out.name] == ("float32", "black list")
    _, report = halfway.float16_transpile(prog, scope, target="nowhere", fetch_names=[out.name])
    assert {e.reason for e in report.float32_ops} == {"no float16 kernel for reduce_sum on the nowhere backend",
                                                       "no float16 kernel for reduce_mean on the nowhere backend",
                                                       "no float16 kernel for softmax on the nowhere backend"}


def test_bad_input_is_refused_with_nothing_changed():
    prog, feeds, fetches, scope = build_cnn()
    with pytest.raises(PassError, match="float16.*white and the black list.*conv2d"):
        halfway.float16_transpile(prog, scope, black_list=["conv2d"])
    with pytest.raises(PassError, match="fetch name.*nope"):
        halfway.float16_transpile(prog, scope, fetch_names=["nope"])
    op = prog.global_block().ops[0]
    prog.create_block(0)
    op.set_attr("sub_block", 1, AttrType.BLOCK)
    before, names = prog.to_bytes(), set(scope)
    with pytest.raises(PassError, match=r"op #0 conv2d runs sub-block\(s\) \[1\]"):
        halfway.float16_transpile(prog, scope, in_place=True)
    assert prog.to_bytes() == before and set(scope) == names


def test_report_renders_as_text_and_rich():
    program, feeds, fetches, scope = build_cnn()
    _, report = halfway.float16_transpile(program, scope)
    text = str(report)
    assert text.splitlines()[0].split() == ["#", "op", "output", "dtype", "reason"]
    assert "conv2d" in text and "white list" in text and "casts inserted" in text
    rich = pytest.importorskip("rich.console")
    console = rich.Console(record=True, width=200)
    console.print(report)
    assert "white list" in console.export_text()


def test_pass_runs_in_a_pipeline_and_drop_unused_parameters_leaves_the_callers_scope():
    program, feeds, fetches, scope = load("resnet_tiny")
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    (before,), _ = run(program, scope, {"image": io["image"]}, fetches)
    result = halfway.PassManager(["fuse_conv_bn", "float16"]).run(program, scope)
    record = result.records[-1]
    assert record.name == "float16" and record.modified and record.stats["casts"] == 2
    assert isinstance(record.report, Float16Report) and len(record.report.casts) == record.stats["casts"]
    assert result.records[0].report is None  # a pass without a report
    (got,), kernels = run(result.program, result.scope, {"image": io["image"]}, fetches)
    check_accuracy(io[fetches[0]], got)
    assert {d for t, d in kernels_by_type(kernels) if t != "cast"} == {DType.float16}
    half, report = halfway.float16_transpile(program, scope, drop_unused_params=True, in_place=False)
    assert report.params_removed and all(name in scope for name in report.params_removed)
    assert not any(half.global_block().has_var(name) for name in report.params_removed)
    (again,), _ = run(half, scope, {"image": io["image"]}, fetches)
    check_accuracy(io[fetches[0]], again)
    (after,), _ = run(program, scope, {"image": io["image"]}, fetches)  # the float32 program runs as before
    np.testing.assert_array_equal(after, before)
