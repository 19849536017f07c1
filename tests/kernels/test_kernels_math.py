"""numpy kernels of the math ops (halfway.kernels.numpy.math), run one op at a time through the
executor against independent float64 references: numpy formulas written here and, where ONNX
has the same op, ``onnx.reference.ReferenceEvaluator``.

Float32 results must match to ``float32_tolerance(n)``; float16 ones, computed from the same
float16 inputs, to ``float16_tolerance(n)`` — relative, with an absolute floor of that tolerance
times the reference's magnitude. Every run also checks that the kernel of the inputs' dtype was
chosen, that Out has the inferred dtype and shape, and that no input was written or aliased.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from halfway.ir.dtypes import DType
from halfway.ir.errors import HalfwayError
from halfway.ir.ops.families import BINARY, COMPARE, REDUCE, UNARY
from halfway.ir.ops.numpy_math import erfc
from halfway.ir.schema import TensorInfo
from halfway.kernels.numpy.math import KERNELS
from halfway.kernels.registry import KernelSpec, find_kernel, has_kernel
from tests.support.oprun import float16_tolerance, run_op

RNG = np.random.default_rng(7)
FLOAT_DTYPES = [np.float32, np.float16]
INT_DTYPES = [np.int32, np.int64]
OTHER_OPS = {"clip", "scale", "pow", "sum", "cast", "mean"}
INT_ROWS = {name for name, row in {**BINARY, **UNARY}.items() if DType.float32 not in row.dtypes}
"""The rows of integers only (the bitwise ops)."""


# -- helpers ------------------------------------------------------------------------------------
def run(op_type: str, inputs: dict[str, np.ndarray | list[np.ndarray]], attrs: dict | None = None) -> np.ndarray:
    """Out of one ``op_type`` op whose inputs are parameters, run by the kernel of its first input's dtype."""
    ran = run_op(op_type, inputs, attrs, params="all")
    first = next(iter(ran.inputs.values()))[0]
    assert ran.kernel_dtypes == [DType.from_any(first.dtype)]
    return ran.out


def float32_tolerance(n: int = 1) -> float:
    """A few float32 roundings of a composite formula, plus one per accumulated element."""
    eps32 = float(np.finfo(np.float32).eps)
    return 16 * eps32 + n * eps32


def assert_close(out: np.ndarray, ref: np.ndarray, n: int = 1) -> None:
    """``out`` (float32 or float16) against a float64 ``ref`` from the same inputs, with the
    tolerance of its dtype for a reduction of length ``n``."""
    tol = float16_tolerance(n) if out.dtype == np.float16 else float32_tolerance(n)
    ref = np.asarray(ref, dtype=np.float64)
    scale = float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0))
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol * scale)


def onnx_ref(op_type: str, inputs: list[np.ndarray], opset: int = 20, **attrs: object) -> np.ndarray:
    """The ONNX reference evaluator's output of one ``op_type`` node."""
    fed = {f"in{i}": a for i, a in enumerate(inputs)}
    node = helper.make_node(op_type, list(fed), ["out"], **attrs)
    graph = helper.make_graph(
        [node], "one_op",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in fed.items()],
        [helper.make_tensor_value_info("out", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, fed)[0]


def normal(shape: tuple[int, ...], dtype: type, scale: float = 3.0) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape) * scale, dtype=dtype)


def uniform(shape: tuple[int, ...], dtype: type, low: float, high: float) -> np.ndarray:
    return np.asarray(RNG.uniform(low, high, shape), dtype=dtype)


# -- coverage -----------------------------------------------------------------------------------
def test_every_math_op_has_kernels():
    assert set(KERNELS) == set(BINARY) | set(UNARY) | set(COMPARE) | set(REDUCE) | OTHER_OPS
    for op_type in KERNELS:
        if op_type in INT_ROWS:
            assert has_kernel(op_type, "numpy", DType.int32) and not has_kernel(op_type, "numpy", DType.float32)
        else:
            assert has_kernel(op_type, "numpy", DType.float32) and has_kernel(op_type, "numpy", DType.float16)


# -- erfc ---------------------------------------------------------------------------------------
def test_erfc_matches_math_erfc_relatively_and_erf_absolutely():
    x = np.concatenate([np.linspace(-6, 10, 4001), [0.0, 1e-8, -1e-8, 26.0]])
    ref = np.array([math.erfc(v) for v in x])
    np.testing.assert_allclose(erfc(x), ref, rtol=1.2e-7, atol=0)
    erf_ref = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(1 - erfc(x), erf_ref, rtol=0, atol=1.5e-7)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_erf_is_relatively_close_to_math_erf_from_tiny_values_to_saturation(dtype):
    x = np.concatenate([np.linspace(-6, 6, 4001), [1e-30, -1e-20, 1e-6, 3.9, 4.1, 30.0, np.inf, -np.inf]]).astype(dtype)
    if dtype == np.float16:
        x = x[np.isfinite(x) & (np.abs(x) < 60000)]
    wide = x.astype(np.float64)
    out = run("erf", {"X": x})
    assert out.dtype == x.dtype
    np.testing.assert_allclose(out.astype(np.float64), [math.erf(v) for v in wide],
                               rtol=1e-6 if dtype == np.float32 else 1e-3,
                               atol=0 if dtype == np.float32 else 2.0 ** -24)  # float16's subnormal step


# -- elementwise binary -------------------------------------------------------------------------
BINARY_REF = {
    "elementwise_add": (np.add, "Add"),
    "elementwise_sub": (np.subtract, "Sub"),
    "elementwise_mul": (np.multiply, "Mul"),
    "elementwise_div": (np.divide, "Div"),
    "elementwise_max": (np.maximum, "Max"),
    "elementwise_min": (np.minimum, "Min"),
    "elementwise_pow": (np.power, "Pow"),
}

# (X shape, Y shape, axis, X and Y as numpy broadcasts them), worked out by hand from Paddle's rule
BROADCASTS = [
    ((2, 3, 4), (2, 3, 4), -1, (2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), (2, 3, 4), 0, (2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), (4,), -1, (2, 3, 4), (4,)),
    ((2, 3, 4), (3,), 1, (2, 3, 4), (3, 1)),
    ((2, 3, 4), (3,), -2, (2, 3, 4), (3, 1)),
    ((2, 3, 4), (3, 4), 1, (2, 3, 4), (3, 4)),
    ((2, 3, 4), (2,), 0, (2, 3, 4), (2, 1, 1)),
    ((2, 3, 4), (2, 3), 0, (2, 3, 4), (2, 3, 1)),
    ((2, 3, 4), (4, 1), 2, (2, 3, 4), (4,)),
    ((2, 3, 4), (1, 3, 1), -1, (2, 3, 4), (1, 3, 1)),
    ((3,), (2, 3, 5), 1, (3, 1), (2, 3, 5)),
    ((5, 1, 7), (1, 6, 1), -1, (5, 1, 7), (1, 6, 1)),
    ((), (3,), -1, (), (3,)),
    ((), (), -1, (), ()),
    ((2, 0, 3), (3,), -1, (2, 0, 3), (3,)),
]


def binary_operands(op_type: str, x_shape: tuple, y_shape: tuple, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    if op_type == "elementwise_pow":
        return uniform(x_shape, dtype, 0.5, 2.0), uniform(y_shape, dtype, -2.0, 2.0)
    if op_type == "elementwise_div":
        return normal(x_shape, dtype), np.asarray(uniform(y_shape, dtype, 0.5, 2.0) * np.sign(normal(y_shape, dtype)))
    return normal(x_shape, dtype), normal(y_shape, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("x_shape, y_shape, axis, xs, ys", BROADCASTS)
@pytest.mark.parametrize("op_type", list(BINARY_REF))
def test_elementwise_float(op_type, x_shape, y_shape, axis, xs, ys, dtype):
    x, y = binary_operands(op_type, x_shape, y_shape, dtype)
    out = run(op_type, {"X": x, "Y": y}, {"axis": axis})
    fn, onnx_type = BINARY_REF[op_type]
    wide_x, wide_y = x.astype(np.float64).reshape(xs), y.astype(np.float64).reshape(ys)
    assert_close(out, fn(wide_x, wide_y))
    assert_close(out, onnx_ref(onnx_type, [wide_x, wide_y]))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op_type", list(BINARY_REF))
def test_elementwise_int(op_type, dtype):
    x = RNG.integers(-20, 21, (2, 3, 4)).astype(dtype)
    y = RNG.integers(1, 6, (3,)).astype(dtype) * np.array([1, -1, 1], dtype)
    if op_type == "elementwise_pow":
        x, y = RNG.integers(-4, 5, (2, 3, 4)).astype(dtype), np.array([0, 3, 5], dtype)
    out = run(op_type, {"X": x, "Y": y}, {"axis": 1})
    ref = BINARY_REF[op_type][0](x.astype(np.float64), y.astype(np.float64).reshape(3, 1))
    np.testing.assert_array_equal(out, np.trunc(ref).astype(dtype))


def test_integer_division_truncates_toward_zero_and_rejects_zero():
    x = np.array([7, -7, 7, -7, 6, -6, 0], np.int32)
    y = np.array([2, 2, -2, -2, 3, 4, -5], np.int32)
    np.testing.assert_array_equal(run("elementwise_div", {"X": x, "Y": y}), [3, -3, -3, 3, 2, -1, 0])
    with pytest.raises(HalfwayError, match=r"elementwise_div.*division by zero"):
        run("elementwise_div", {"X": x, "Y": np.array([1, 2, 0, 1, 1, 1, 1], np.int32)})


def test_integer_pow_goes_through_double_like_paddle():
    x = np.array([2, -2, 1, -1, 3, 0], np.int64)
    y = np.array([-1, -1, -3, -3, 2, 0], np.int64)
    np.testing.assert_array_equal(run("elementwise_pow", {"X": x, "Y": y}), [0, 0, 1, -1, 9, 1])


HALF_X = normal((3, 37), np.float16)
HALF_POSITIVE = uniform((3, 37), np.float16, 0.5, 1.5)
HALF_Y = np.array([0.7, -1.3, 2.1], np.float16)
HALF_ATTRS = {"clip": {"min": -1.5, "max": 2.25}, "pow": {"factor": 1.7}, "scale": {"scale": 0.3, "bias": 0.1},
              "gelu": {"approximate": True}}


def float16_case(op_type: str, dtype: type) -> tuple[dict, dict]:
    """Inputs holding float16 values (as ``dtype``) and attrs that exercise ``op_type``."""
    positive = op_type in ("log", "sqrt", "pow", "elementwise_pow", "reduce_prod")
    x = (HALF_POSITIVE if positive else HALF_X).astype(dtype)
    if op_type == "sum":
        return {"X": [x, (HALF_X * 0.5).astype(dtype)]}, {}
    if op_type in BINARY:
        return {"X": x, "Y": HALF_Y.astype(dtype)}, {"axis": 0}
    if op_type in REDUCE:
        return {"X": x}, {"dim": [-1]}
    if op_type in COMPARE:
        return {"X": x, "Y": np.round(x[:, ::-1])} if COMPARE[op_type].arity == 2 else {"X": np.round(x)}, {}
    if op_type == "cast":
        return {"X": x}, {"in_dtype": int(DType.from_any(dtype)), "out_dtype": int(DType.int32)}
    return {"X": x}, HALF_ATTRS.get(op_type, {})


@pytest.mark.parametrize("op_type", sorted(set(KERNELS) - INT_ROWS))
def test_float16_kernel_is_the_float32_kernel_rounded_once(op_type):
    """float16 storage, float32 arithmetic: the float16 kernel's Out is bit for bit the float32
    kernel's on the same (widened) values, narrowed — so no intermediate was rounded to float16."""
    out16 = run(op_type, *float16_case(op_type, np.float16))
    out32 = run(op_type, *float16_case(op_type, np.float32))
    np.testing.assert_array_equal(out16, out32.astype(out16.dtype))


def test_float16_elementwise_runs_natively_and_rounds_once():
    x = normal((64, 64), np.float16, 30.0)
    y = (uniform((64,), np.float16, 0.01, 1.0) * np.sign(normal((64,), np.float16))).astype(np.float16)
    for op_type in ("elementwise_add", "elementwise_mul", "elementwise_div"):
        fn = BINARY_REF[op_type][0]
        exact = fn(x.astype(np.float64), y.astype(np.float64)).astype(np.float16)
        np.testing.assert_array_equal(run(op_type, {"X": x, "Y": y}), exact)


# -- activations --------------------------------------------------------------------------------
def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2))


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


# (op type, attrs, float64 reference, ONNX op and attrs or None, input range)
ACTIVATION_CASES = [
    ("relu", {}, lambda x: np.maximum(x, 0), ("Relu", {}), 8),
    ("relu6", {}, lambda x: np.minimum(np.maximum(x, 0), 6), None, 8),
    ("relu6", {"threshold": 2.5}, lambda x: np.minimum(np.maximum(x, 0), 2.5), None, 8),
    ("leaky_relu", {}, lambda x: np.where(x > 0, x, 0.02 * x), ("LeakyRelu", {"alpha": 0.02}), 8),
    ("leaky_relu", {"alpha": 0.25}, lambda x: np.where(x > 0, x, 0.25 * x), ("LeakyRelu", {"alpha": 0.25}), 8),
    ("sigmoid", {}, _sigmoid, ("Sigmoid", {}), 30),
    ("tanh", {}, np.tanh, ("Tanh", {}), 12),
    ("hard_swish", {}, lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6, ("HardSwish", {}), 8),
    ("hard_swish", {"threshold": 5.0, "scale": 4.0, "offset": 2.0},
     lambda x: x * np.minimum(np.maximum(x + 2, 0), 5) / 4, None, 8),
    ("hard_sigmoid", {}, lambda x: np.minimum(np.maximum(0.2 * x + 0.5, 0), 1),
     ("HardSigmoid", {"alpha": 0.2, "beta": 0.5}), 8),
    ("hard_sigmoid", {"slope": 0.125, "offset": 0.25}, lambda x: np.minimum(np.maximum(0.125 * x + 0.25, 0), 1),
     ("HardSigmoid", {"alpha": 0.125, "beta": 0.25}), 8),
    ("swish", {}, lambda x: x * _sigmoid(x), None, 30),
    ("swish", {"beta": 0.5}, lambda x: x * _sigmoid(0.5 * x), None, 30),
    ("silu", {}, lambda x: x * _sigmoid(x), None, 30),
    ("gelu", {}, _gelu, ("Gelu", {}), 12),
    ("gelu", {"approximate": True}, lambda x: _gelu(x, True), ("Gelu", {"approximate": "tanh"}), 12),
    ("softplus", {}, _softplus, ("Softplus", {}), 30),
    ("softplus", {"beta": 2.0, "threshold": 5.0}, lambda x: _softplus(x, 2.0, 5.0), None, 8),
    ("exp", {}, np.exp, ("Exp", {}), 8),
    ("log", {}, np.log, ("Log", {}), None),
    ("sqrt", {}, np.sqrt, ("Sqrt", {}), None),
    ("abs", {}, np.abs, ("Abs", {}), 8),
]


def activation_input(dtype: type, spread: float | None) -> np.ndarray:
    """Random values over the op's range plus its edges, in an odd shape; positive without a spread."""
    if spread is None:
        return np.concatenate([uniform((3, 5, 7), dtype, 1e-3, 50.0).ravel(), np.array([1e-3, 1.0], dtype)])
    edges = np.array([0.0, -0.0, spread, -spread, 1e-3, -1e-3], dtype)
    return np.concatenate([uniform((3, 5, 7), dtype, -spread, spread).ravel(), edges]).reshape(1, 111)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op_type, attrs, ref, onnx_op, spread", ACTIVATION_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ACTIVATION_CASES)])
def test_activation(op_type, attrs, ref, onnx_op, spread, dtype):
    x = activation_input(dtype, spread)
    out = run(op_type, {"X": x}, attrs)
    wide = x.astype(np.float64)
    assert_close(out, ref(wide))
    if onnx_op is not None:
        assert_close(out, onnx_ref(onnx_op[0], [wide], **onnx_op[1]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_activations_keep_precision_in_the_tails(dtype):
    x = np.array([-30.0, -20.0, -12.0, -9.0], dtype) if dtype is np.float32 else np.array([-9.0, -7.0], dtype)
    wide = x.astype(np.float64)
    tol = float16_tolerance() if dtype is np.float16 else float32_tolerance()
    for op_type, ref in (("sigmoid", _sigmoid), ("silu", lambda v: v * _sigmoid(v)), ("softplus", _softplus)):
        np.testing.assert_allclose(run(op_type, {"X": x}).astype(np.float64), ref(wide), rtol=tol)
    gelu_x = x[x >= -12] if dtype is np.float32 else np.array([-4.0, -3.0], dtype)
    np.testing.assert_allclose(run("gelu", {"X": gelu_x}).astype(np.float64), _gelu(gelu_x.astype(np.float64)),
                               rtol=tol)
    tanh_x = np.array([-5.0, -4.0, -3.0] if dtype is np.float32 else [-4.0, -3.0], dtype)  # float64 is exact enough
    np.testing.assert_allclose(run("gelu", {"X": tanh_x}, {"approximate": True}).astype(np.float64),
                               _gelu(tanh_x.astype(np.float64), True), rtol=tol)


@pytest.mark.filterwarnings("error")
def test_activations_do_not_overflow_on_large_inputs():
    x = np.array([-1000.0, -100.0, 100.0, 1000.0], np.float32)
    for op_type in ("sigmoid", "silu", "swish", "softplus", "gelu"):
        out = run(op_type, {"X": x})
        np.testing.assert_allclose(out[1:3], np.maximum(x[1:3], 0) if op_type != "sigmoid" else [0, 1], atol=1e-30)
    np.testing.assert_array_equal(run("gelu", {"X": x}, {"approximate": True}), [-0.0, -0.0, 100.0, 1000.0])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_abs_of_integers(dtype):
    x = RNG.integers(-50, 50, (4, 5)).astype(dtype)
    np.testing.assert_array_equal(run("abs", {"X": x}), np.abs(x))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_activation_of_a_0d_tensor(dtype):
    out = run("sigmoid", {"X": np.array(0.5, dtype)})
    assert_close(out, _sigmoid(0.5))


# -- reductions ---------------------------------------------------------------------------------
REDUCE_REF = {
    "reduce_sum": (np.sum, "ReduceSum"),
    "reduce_mean": (np.mean, "ReduceMean"),
    "reduce_max": (np.max, "ReduceMax"),
    "reduce_min": (np.min, "ReduceMin"),
    "reduce_prod": (np.prod, "ReduceProd"),
}

# (X shape, attrs, the numpy axes they mean, keepdims)
REDUCE_CASES = [
    ((3, 4, 5), {}, (0,), False),
    ((3, 4, 5), {"dim": [1]}, (1,), False),
    ((3, 4, 5), {"dim": [-1], "keep_dim": True}, (2,), True),
    ((3, 4, 5), {"dim": [0, -1]}, (0, 2), False),
    ((3, 4, 5), {"dim": [2, 0], "keep_dim": True}, (0, 2), True),
    ((3, 4, 5), {"dim": []}, (0, 1, 2), False),
    ((3, 4, 5), {"dim": [1], "reduce_all": True, "keep_dim": True}, (0, 1, 2), True),
    ((3, 4, 5), {"dim": [0, 1, 2]}, (0, 1, 2), False),
    ((7, 1000), {"dim": [1]}, (1,), False),
    ((), {"dim": [0]}, (), False),
    ((), {"dim": [-1], "keep_dim": True}, (), True),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape, attrs, axes, keep", REDUCE_CASES)
@pytest.mark.parametrize("op_type", list(REDUCE_REF))
def test_reduce(op_type, shape, attrs, axes, keep, dtype):
    low, high = (0.9, 1.1) if op_type == "reduce_prod" else (0.5, 1.5)  # one sign: no cancellation
    x = normal(shape, dtype) if op_type in ("reduce_max", "reduce_min") else uniform(shape, dtype, low, high)
    out = run(op_type, {"X": x}, attrs)
    fn, onnx_type = REDUCE_REF[op_type]
    wide = x.astype(np.float64)
    n = math.prod(shape[a] for a in axes)
    assert_close(out, fn(wide, axis=axes, keepdims=keep), n)
    if axes:
        assert_close(out, onnx_ref(onnx_type, [wide, np.array(axes, np.int64)], 18, keepdims=int(keep)), n)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
def test_reduce_int(op_type, dtype):
    x = RNG.integers(-5, 6, (3, 4, 5)).astype(dtype)
    out = run(op_type, {"X": x}, {"dim": [0, 2]})
    ref = REDUCE_REF[op_type][0](x, axis=(0, 2))
    assert out.dtype == (np.int64 if op_type == "reduce_sum" else dtype)
    np.testing.assert_array_equal(out, ref)


def test_reduce_sum_of_bool_counts_in_int64():
    x = RNG.random((4, 6)) > 0.5
    out = run("reduce_sum", {"X": x}, {"dim": [1]})
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.count_nonzero(x, axis=1))


def test_reduce_out_dtype_widens_float16_to_float32():
    x = uniform((5, 3000), np.float16, 0.5, 1.5)
    out = run("reduce_sum", {"X": x}, {"dim": [1], "out_dtype": int(DType.float32)})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=float32_tolerance(3000))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 5), (1,), (), (2000,)])
def test_mean(shape, dtype):
    x = uniform(shape, dtype, 0.5, 1.5)
    out = run("mean", {"X": x})
    assert out.shape == ()
    assert_close(out, x.astype(np.float64).mean(), math.prod(shape))


# -- clip ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("bounds", ["attrs", "tensors", "min tensor", "0-d tensors"])
def test_clip(bounds, dtype):
    x = normal((4, 9), dtype)
    inputs: dict = {"X": x}
    attrs = {"min": -1.5, "max": 2.25}
    if bounds != "attrs":
        tensor_shape = () if bounds == "0-d tensors" else (1,)
        inputs["Min"] = np.full(tensor_shape, -0.5, np.float32)  # keeps its own dtype under float16
        if bounds != "min tensor":
            inputs["Max"] = np.full(tensor_shape, 1.0, dtype)
    low = -0.5 if "Min" in inputs else -1.5
    high = 1.0 if "Max" in inputs else 2.25
    out = run("clip", inputs, attrs)
    wide = x.astype(np.float64)
    assert_close(out, np.minimum(np.maximum(wide, low), high))
    assert_close(out, onnx_ref("Clip", [wide, np.array(low), np.array(high)], 13))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_clip_of_integers_truncates_float_bounds(dtype):
    x = np.arange(-5, 6, dtype=dtype)
    out = run("clip", {"X": x}, {"min": -2.5, "max": 3.7})
    np.testing.assert_array_equal(out, np.minimum(np.maximum(x, -2), 3))


def test_clip_rejects_tensor_bounds_out_of_order():
    x = normal((3,), np.float32)
    with pytest.raises(HalfwayError, match=r"clip.*min \(2\.0\) must not exceed max \(1\.0\)"):
        run("clip", {"X": x, "Min": np.array([2.0], np.float32), "Max": np.array([1.0], np.float32)},
            {"min": 0.0, "max": 5.0})


# -- scale, pow, sum ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("after", [True, False])
@pytest.mark.parametrize("tensor", [False, True])
def test_scale(tensor, after, dtype):
    x = normal((3, 7, 2), dtype)
    inputs = {"X": x, "ScaleTensor": np.array([-1.25], np.float32)} if tensor else {"X": x}
    factor = -1.25 if tensor else 0.75
    out = run("scale", inputs, {"scale": 0.75, "bias": 0.5, "bias_after_scale": after})
    wide = x.astype(np.float64)
    assert_close(out, factor * wide + 0.5 if after else factor * (wide + 0.5))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("after", [True, False])
def test_scale_of_integers_truncates_scale_and_bias(after, dtype):
    x = np.arange(-4, 5, dtype=dtype)
    out = run("scale", {"X": x}, {"scale": 2.7, "bias": -1.5, "bias_after_scale": after})
    np.testing.assert_array_equal(out, 2 * x - 1 if after else 2 * (x - 1))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("factor, tensor", [(2.0, False), (0.5, False), (-1.5, False), (3.0, True), (3.0, False),
                                            (4.0, False), (-0.5, False)])
def test_pow(factor, tensor, dtype):
    x = uniform((5, 6), dtype, 0.5, 3.0)
    inputs = {"X": x, "FactorTensor": np.array([factor], np.float32)} if tensor else {"X": x}
    out = run("pow", inputs, {"factor": 1.0 if tensor else factor})
    wide = x.astype(np.float64)
    assert_close(out, wide ** factor)
    assert_close(out, onnx_ref("Pow", [wide, np.array(factor)]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("factor", [2.0, 3.0, 4.0])
def test_pow_by_multiplies_keeps_signs_infinities_and_nan(factor, dtype):
    x = np.array([-3.5, -1.0, -0.0, 0.25, 2.0, np.inf, -np.inf, np.nan], dtype)
    with np.errstate(invalid="ignore"):
        assert_close(run("pow", {"X": x}, {"factor": factor}), x.astype(np.float64) ** factor)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_pow_of_integers_truncates_the_factor(dtype):
    x = np.arange(-3, 4, dtype=dtype)
    np.testing.assert_array_equal(run("pow", {"X": x}, {"factor": 2.9}), x ** 2)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("count", [1, 2, 5])
def test_sum(count, dtype):
    xs = [normal((3, 1, 4), dtype) for _ in range(count)]
    out = run("sum", {"X": xs})
    wide = [x.astype(np.float64) for x in xs]
    assert_close(out, np.sum(wide, axis=0), count)
    assert_close(out, onnx_ref("Sum", wide), count)


def test_sum_of_integers_and_of_0d_tensors():
    xs = [RNG.integers(-9, 9, (2, 3)).astype(np.int32) for _ in range(3)]
    np.testing.assert_array_equal(run("sum", {"X": xs}), xs[0] + xs[1] + xs[2])
    assert_close(run("sum", {"X": [np.array(1.5, np.float16)] * 3}), 4.5)


# -- cast ---------------------------------------------------------------------------------------
CAST_NUMPY = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dst", CAST_NUMPY)
@pytest.mark.parametrize("src", CAST_NUMPY)
def test_cast_every_pair_on_values_all_can_hold(src, dst):
    values = [0, 1, 0, 1] if np.dtype(src) == np.bool_ or np.dtype(dst) == np.bool_ else [0, 1, 2, 5, 100, 127]
    x = np.array(values, src).reshape(-1, 1)
    out = run("cast", {"X": x}, {"in_dtype": int(DType.from_any(src)), "out_dtype": int(DType.from_any(dst))})
    assert out.dtype == dst
    assert out.ravel().tolist() == [dst(v).item() for v in values]


def cast(x: np.ndarray, dst: type) -> np.ndarray:
    return run("cast", {"X": x}, {"in_dtype": int(DType.from_any(x.dtype)), "out_dtype": int(DType.from_any(dst))})


def test_cast_semantics():
    floats = np.array([-2.7, -0.5, 0.0, 0.5, 1.5, 3.9, 100.25], np.float32)
    np.testing.assert_array_equal(cast(floats, np.int32), [-2, 0, 0, 0, 1, 3, 100])  # toward zero
    np.testing.assert_array_equal(cast(floats, np.bool_), [True, True, False, True, True, True, True])
    np.testing.assert_array_equal(cast(np.array([True, False]), np.float16), [1.0, 0.0])
    ties = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 70000.0, -1e-9], np.float32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(cast(ties, np.float16), [1.0, 1 + 2 ** -9, np.inf, -0.0])  # to nearest even
    halves = np.array([65504.0, 6e-8, -0.0, np.nan], np.float16)
    out = cast(halves, np.float32)
    np.testing.assert_array_equal(out, halves.astype(np.float64))
    assert np.signbit(out[2]) and np.isnan(out[3])


def _cast_kernel(src: DType, dst: DType, shape: tuple[int, ...]):
    spec = KernelSpec("cast", src, {"in_dtype": int(src), "out_dtype": int(dst)},
                      {"X": (TensorInfo(shape, src),)}, {"Out": (TensorInfo(shape, dst),)})
    return find_kernel("cast", "numpy", src)(spec)


def test_cast_to_and_from_bfloat16_bits():
    values = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5, np.inf,
                       np.finfo(np.float32).max, np.nan, -np.nan], np.float32)
    bits = _cast_kernel(DType.float32, DType.bfloat16, values.shape)(values)
    assert bits.dtype == np.uint16
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x7F80, 0x7F80, 0x7FC0, 0xFFC0]
    back = _cast_kernel(DType.bfloat16, DType.float32, values.shape)(bits)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back[:5], [1.0, 1.0, 1 + 2 ** -6, 1 + 2 ** -7, -2.5])
    halves = _cast_kernel(DType.bfloat16, DType.float16, (2,))(np.array([0x3F81, 0xC020], np.uint16))
    np.testing.assert_array_equal(halves, np.array([1.0078125, -2.5], np.float16))
