"""The op family tables (halfway.ir.ops.families) and what is derived from them: every row's schema,
layer function, numpy and OpenCL kernels, conv and fc epilogues, float16 class and ONNX converter;
the comparisons and logical ops against numpy, ONNX Runtime and onnx's reference evaluator.

``check_activation`` is the whole test of a new activation row: numpy and OpenCL against float64
math, ONNX import against ONNX Runtime, and a conv epilogue where the row is absorbable."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway import layers
from halfway.executor import Executor, OpenCLPlace
from halfway.ir.builder import apply_act
from halfway.ir.dtypes import DType
from halfway.ir.ops.families import BINARY, COMPARE, EPILOGUE_ALIASES, REDUCE, UNARY, fc_absorbable
from halfway.ir.ops.family import Elementwise, Float16, fused_params
from halfway.ir.schema import get_schema
from halfway.kernels import opencl  # noqa: F401  (registers the OpenCL kernels)
from halfway.kernels.registry import has_kernel
from halfway.passes import PassManager
from tests.support.oprun import run_op
from tests.support.passcheck import fuse_and_compare, op_types

RNG = np.random.default_rng(21)
ELEMENTWISE: dict[str, Elementwise] = {**BINARY, **UNARY, **COMPARE}
FLOAT_ROWS = {name: row for name, row in {**BINARY, **UNARY}.items() if DType.float32 in row.dtypes}
"""The arithmetic rows of floats (all but the bitwise ops of integers)."""
FLOAT_UNARY = sorted(name for name in UNARY if name in FLOAT_ROWS)
BITWISE = sorted(name for name in {**BINARY, **UNARY} if name not in FLOAT_ROWS)
POSITIVE = ("log", "sqrt", "acosh")
UNIT = ("asin", "acos", "atanh")


def _input(name: str, shape: tuple[int, ...] = (2, 3, 11), dtype: type = np.float32) -> np.ndarray:
    if name in POSITIVE:
        return RNG.uniform(1.0, 4.0, shape).astype(dtype)
    if name in UNIT:
        return RNG.uniform(-0.95, 0.95, shape).astype(dtype)
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def _wide_row_math(row: Elementwise, x: np.ndarray) -> np.ndarray:
    """The row's numpy math in float64 with its default attrs."""
    attrs = {k: np.float64(v) if isinstance(v, float) else v for k, v in row.defaults().items()}
    return row.numpy(x.astype(np.float64), **attrs)


# -- derivation: schema, layer, kernels -----------------------------------------------------------
@pytest.mark.parametrize("name", sorted({**ELEMENTWISE, **REDUCE}))
def test_every_row_has_a_schema_a_layer_and_numpy_kernels(name):
    row = ELEMENTWISE.get(name) or REDUCE[name]
    schema = get_schema(name)
    assert getattr(row, "doc") in schema.doc
    if isinstance(row, Elementwise):
        assert [s.name for s in schema.inputs] == ["X", "Y"][:row.arity]
        assert {a.name: a.default for a in schema.attrs} == {**({"axis": -1} if row.axis else {}), **row.defaults()}
    assert getattr(layers, name).__name__ == name
    for dtype in row.dtypes:
        assert has_kernel(name, "numpy", dtype), (name, dtype)


@pytest.mark.parametrize("name", sorted(n for n in ELEMENTWISE if n not in BITWISE))
def test_every_elementwise_row_has_opencl_kernels(name):
    assert has_kernel(name, "opencl", DType.float32) and has_kernel(name, "opencl", DType.float16)


@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_binary_rows_have_opencl_kernels_of_integers(name):
    """bitwise_not, the one unary row of integers, runs on numpy (the unary kernel is of floats)."""
    dtypes = (DType.int32, DType.int64) if name in BINARY else ()
    assert all(has_kernel(name, "opencl", d) for d in dtypes) and not has_kernel(name, "opencl", DType.float32)


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_every_unary_row_runs_on_opencl_as_its_float64_math(name, dtype):
    x = _input(name, dtype=dtype)
    ran = run_op(name, {"X": x}, place=OpenCLPlace())
    assert ran.report.fallbacks == [], ran.report.summary()
    want = _wide_row_math(UNARY[name], x)
    tol = 2e-3 if dtype is np.float16 else 2e-5
    np.testing.assert_allclose(ran.out.astype(np.float64), want, rtol=tol, atol=tol * np.abs(want).max())


# -- derivation: epilogues ------------------------------------------------------------------------
def _conv_then(name: str, attrs: dict | None = None) -> tuple[halfway.Program, halfway.Scope, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 6, 6])
        y = apply_act(layers.conv2d(x, 4, 3, padding=1), name, **(attrs or {}))
    return prog, halfway.init_scope(prog, seed=3), y.name


def _fc_then(name: str) -> tuple[halfway.Program, halfway.Scope, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        y = apply_act(layers.fc(layers.data("x", [4, 6]), 5), name)
    return prog, halfway.init_scope(prog, seed=3), y.name


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # log and sqrt of negative conv outputs
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_conv_absorbs_exactly_the_absorbable_rows(name):
    prog, scope, out = _conv_then(name)
    types = op_types(fuse_and_compare(prog, scope, "fuse_conv_act", [out]).program)
    assert (types == {"fused_conv2d": 1}) == (UNARY[name].absorb is not None or name in EPILOGUE_ALIASES), types


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_fc_absorbs_the_rows_its_parameterless_epilogue_computes(name):
    prog, scope, out = _fc_then(name)
    types = op_types(fuse_and_compare(prog, scope, "fuse_fc", [out]).program)
    assert (types == {"fc": 1}) == fc_absorbable(UNARY[name]), types


@pytest.mark.parametrize("name", sorted(n for n, row in UNARY.items() if row.absorb is not None))
def test_fused_params_read_back_as_the_attrs_or_are_refused(name):
    """Non-default attrs reach the epilogue or the pass leaves the op alone; never other math."""
    row = UNARY[name]
    attrs = {a.name: (not a.default) if isinstance(a.default, bool) else a.default * 0.75 for a in row.attrs}
    prog, scope, out = _conv_then(name, attrs)
    types = op_types(fuse_and_compare(prog, scope, "fuse_conv_act", [out]).program)
    assert (types == {"fused_conv2d": 1}) == (fused_params(row, attrs) is not None), types


# -- derivation: float16 classes ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted({**FLOAT_ROWS, **REDUCE}))
def test_float16_class_of_each_row_reaches_the_float16_pass(name):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        y = layers.conv2d(layers.data("x", [1, 3, 4, 4]), 2, 3, padding=1)
        if name in BINARY:
            z = getattr(layers, name)(y, y)
        else:
            z = getattr(layers, name)(y)
    _, report = halfway.float16_transpile(prog, halfway.init_scope(prog), fetch_names=[z.name])
    entry = next(e for e in report.ops if e.output == z.name)
    row = BINARY.get(name) or UNARY.get(name) or REDUCE[name]
    if row.float16 is Float16.NEVER:
        assert (entry.dtype, entry.reason) == ("float32", "black list")
    else:
        assert (entry.dtype, entry.reason) == ("float16", "follows its float16 inputs")


# -- ONNX -------------------------------------------------------------------------------------------
def _onnx_model(op_type: str, inputs: dict[str, np.ndarray], out_dtype: type = np.float32, opset: int = 20,
                **attrs: object):
    node = helper.make_node(op_type, list(inputs), ["out"], **attrs)
    graph = helper.make_graph(
        [node], "one_op",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info("out", helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype)), None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _imported(model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    prog, feeds, fetches, scope = halfway.load(model)
    return Executor().run(prog, inputs, fetches, scope)[0]


def _onnxruntime(model, inputs: dict[str, np.ndarray]) -> np.ndarray:
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


@pytest.mark.parametrize("name", sorted(n for n, row in FLOAT_ROWS.items() if row.onnx is not None))
def test_one_to_one_onnx_ops_import_as_their_rows(name):
    row = ELEMENTWISE[name]
    inputs = {f"in{i}": _input(name, (3, 4)) for i in range(row.arity)}
    model = _onnx_model(row.onnx.name, inputs)
    prog = halfway.load(model)[0]
    assert [op.type for op in prog.global_block().ops if op.type not in ("feed", "fetch")] == [name]
    np.testing.assert_allclose(_imported(model, inputs), _onnxruntime(model, inputs), rtol=1e-5, atol=1e-6)


# -- bitwise ops of integers --------------------------------------------------------------------------
_BITWISE_ONNX = {"bitwise_and": ("BitwiseAnd", {}), "bitwise_or": ("BitwiseOr", {}), "bitwise_xor": ("BitwiseXor", {}),
                 "bitwise_not": ("BitwiseNot", {}), "bitwise_left_shift": ("BitShift", {"direction": "LEFT"}),
                 "bitwise_right_shift": ("BitShift", {"direction": "RIGHT"})}


def _bitwise_inputs(name: str, dtype: type) -> dict[str, np.ndarray]:
    """X of any bits; a shift's Y a count below the width, broadcast along X's rows."""
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (3, 4), dtype=dtype, endpoint=True)
    if name in UNARY:
        return {"in0": x}
    shifts = "shift" in name
    y = RNG.integers(0, info.bits if shifts else info.max, (4,), dtype=dtype)
    return {"in0": x, "in1": y}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int32])
@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_ops_import_and_match_onnxruntime(name, dtype):
    onnx_op, attrs = _BITWISE_ONNX[name]
    if onnx_op == "BitShift" and np.dtype(dtype).kind == "i":
        pytest.skip("ONNX's BitShift is of unsigned integers")
    inputs = _bitwise_inputs(name, dtype)
    model = _onnx_model(onnx_op, inputs, out_dtype=dtype, opset=18, **attrs)
    assert [op.type for op in halfway.load(model)[0].global_block().ops if op.type not in ("feed", "fetch")] == [name]
    np.testing.assert_array_equal(_imported(model, inputs), _onnxruntime(model, inputs))


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("name", sorted(n for n in BITWISE if n in BINARY))
def test_bitwise_binary_ops_run_on_opencl(name, dtype):
    inputs = _bitwise_inputs(name, dtype)
    x, y = inputs["in0"], np.broadcast_to(inputs["in1"], inputs["in0"].shape).copy()
    ran = run_op(name, {"X": x, "Y": y}, place=OpenCLPlace())
    assert ran.report.fallbacks == [], ran.report.summary()
    np.testing.assert_array_equal(ran.out, BINARY[name].numpy(x, y))


# -- comparisons and logical ops --------------------------------------------------------------------
def _values(dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    """Small integers (so comparisons often tie), as ``dtype``."""
    return RNG.integers(-2, 3, shape).astype(dtype)


COMPARE_DTYPES = [np.float32, np.float16, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("dtype", COMPARE_DTYPES)
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_comparisons_and_logical_ops_match_numpy(name, dtype):
    row, x = COMPARE[name], _values(dtype, (2, 3, 4))
    ref: Callable[..., np.ndarray] = row.numpy
    if row.arity == 1:
        got, want = run_op(name, {"X": x})["Out"][0], ref(x)
    else:
        y = _values(dtype, (2, 3, 4))
        np.testing.assert_array_equal(run_op(name, {"X": x, "Y": y})["Out"][0], ref(x, y))
        y = _values(dtype, (3,) if row.axis else (4,))  # Paddle's axis puts [3] on dim 1
        attrs = {"axis": 1} if row.axis else {}
        got = run_op(name, {"X": x, "Y": y}, attrs)["Out"][0]
        want = ref(x, y[:, None] if row.axis else y)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


ONNX_COMPARE = [(row.onnx.name, name) for name, row in COMPARE.items() if row.onnx is not None]


@pytest.mark.parametrize("onnx_op, name", ONNX_COMPARE)
def test_onnx_comparisons_and_logical_ops_match_onnxruntime_and_the_reference(onnx_op, name):
    row = COMPARE[name]
    dtype = np.bool_ if name.startswith("logical") else np.float32
    inputs = {"a": _values(dtype, (2, 3, 4)), "b": _values(dtype, (3, 4))}
    inputs = dict(list(inputs.items())[:row.arity])
    model = _onnx_model(onnx_op, inputs, np.bool_)
    got = _imported(model, inputs)
    np.testing.assert_array_equal(got, _onnxruntime(model, inputs))
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, inputs)[0])


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(n for n, row in COMPARE.items() if row.arity == 2))
def test_comparisons_of_floats_run_on_opencl(name, dtype):
    row, x = COMPARE[name], _values(dtype, (3, 5, 7))
    x[0, 0, :2] = np.nan
    small = (_values(dtype, (5,)), {"axis": 1}) if row.axis else (_values(dtype, (7,)), {})
    for y, attrs in ((_values(dtype, (3, 5, 7)), {}), small):
        ran = run_op(name, {"X": x, "Y": y}, attrs, place=OpenCLPlace())
        assert ran.report.fallbacks == [], ran.report.summary()
        np.testing.assert_array_equal(ran.out, run_op(name, {"X": x, "Y": y}, attrs)["Out"][0])


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64])
@pytest.mark.parametrize("name", sorted(n for n, row in COMPARE.items() if row.arity == 2))
def test_comparisons_of_bool_and_integers_run_on_opencl(name, dtype):
    x = _values(dtype, (3, 5, 7)) if dtype == np.bool_ else RNG.integers(-3, 4, (3, 5, 7)).astype(dtype)
    y = x[:, ::-1].copy() if dtype == np.bool_ else RNG.integers(-3, 4, (5, 7)).astype(dtype)
    ran = run_op(name, {"X": x, "Y": y}, place=OpenCLPlace())
    assert ran.report.fallbacks == [], ran.report.summary()
    np.testing.assert_array_equal(ran.out, COMPARE[name].numpy(x, y))


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.bool_, np.int64])
@pytest.mark.parametrize("name", sorted(n for n, row in COMPARE.items() if row.arity == 1))
def test_one_operand_comparisons_run_on_opencl(name, dtype):
    if name != "logical_not" and dtype not in (np.float32, np.float16):
        pytest.skip("isnan, isinf and isfinite take floats")
    x = _values(np.float32, (3, 5, 7)) * 4 - 2
    x[0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    x = x.astype(dtype) if dtype in (np.float32, np.float16) else np.nan_to_num(x, posinf=5, neginf=-5).astype(dtype)
    ran = run_op(name, {"X": x}, place=OpenCLPlace())
    assert ran.report.fallbacks == [], ran.report.summary()
    np.testing.assert_array_equal(ran.out, COMPARE[name].numpy(x))


# -- a new activation, whole ----------------------------------------------------------------------
def _activation_input() -> np.ndarray:
    return np.concatenate([RNG.uniform(-8, 8, 200), [0.0, -0.0, 1e-3, -1e-3, 30.0, -30.0]]).astype(np.float32)


def check_activation(name: str, attrs: dict, ref: Callable[[np.ndarray], np.ndarray], onnx_op: str,
                     onnx_attrs: dict) -> None:
    """Row ``name`` with ``attrs`` against ``ref`` (float64 math) on numpy in float32 and float16,
    imported from ONNX against ONNX Runtime, and in a conv epilogue where the row is absorbable."""
    x = _activation_input()
    np.testing.assert_allclose(run_op(name, {"X": x}, attrs)["Out"][0], ref(x.astype(np.float64)),
                               rtol=2e-6, atol=1e-6)
    half = x.astype(np.float16)
    np.testing.assert_allclose(run_op(name, {"X": half}, attrs)["Out"][0].astype(np.float64),
                               ref(half.astype(np.float64)), rtol=1e-3, atol=1e-3)
    feed = {"x": x.reshape(2, -1)}
    model = _onnx_model(onnx_op, feed, **onnx_attrs)
    np.testing.assert_allclose(_imported(model, feed), _onnxruntime(model, feed), rtol=1e-5, atol=1e-6)
    prog, scope, out = _conv_then(name, attrs)
    types = op_types(fuse_and_compare(prog, scope, "fuse_conv_act", [out]).program)
    assert (types == {"fused_conv2d": 1}) == (UNARY[name].absorb is not None)


def check_activation_on_opencl(name: str, attrs: dict, ref: Callable[[np.ndarray], np.ndarray]) -> None:
    """Row ``name`` on OpenCL against ``ref``, and its fused conv epilogue (where the row is
    absorbable) against the unfused program on numpy."""
    x = _activation_input()
    ran = run_op(name, {"X": x}, attrs, place=OpenCLPlace())
    assert ran.report.fallbacks == [], ran.report.summary()
    np.testing.assert_allclose(ran.out, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
    if UNARY[name].absorb is None:
        return
    prog, scope, out = _conv_then(name, attrs)
    feed = {"x": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)}
    fused = PassManager("fuse_conv_act").run(prog, scope)
    prepared = Executor(OpenCLPlace()).prepare(fused.program, ["x"], [out], fused.scope)
    assert prepared.report.fallbacks == [], prepared.report.summary()
    np.testing.assert_allclose(prepared.run(feed)[0], Executor().run(prog, feed, [out], scope)[0],
                               rtol=1e-4, atol=1e-5)


def _mish(x: np.ndarray) -> np.ndarray:
    return x * np.tanh(np.log1p(np.exp(x)))


def test_mish():
    check_activation("mish", {}, _mish, "Mish", {})


@pytest.mark.opencl
def test_mish_on_opencl():
    check_activation_on_opencl("mish", {}, _mish)


def _selu(scale: float, alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: scale * np.where(x > 0, x, alpha * (np.exp(x) - 1))


def test_selu():
    assert get_schema("selu").defaults() == {"scale": 1.0507009873554805, "alpha": 1.6732632423543772}
    check_activation("selu", {}, _selu(1.0507009873554805, 1.6732632423543772), "Selu", {})
    check_activation("selu", {"scale": 2.0, "alpha": 0.5}, _selu(2.0, 0.5), "Selu", {"gamma": 2.0, "alpha": 0.5})


@pytest.mark.opencl
def test_selu_on_opencl():
    check_activation_on_opencl("selu", {"scale": 2.0, "alpha": 0.5}, _selu(2.0, 0.5))
