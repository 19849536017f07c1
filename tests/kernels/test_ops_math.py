"""Math op schemas (halfway.ir.ops.math) and their layer functions, against numpy references."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import create_parameter
from halfway.ir.dtypes import DType
from halfway.ir.errors import IRError, SchemaError
from halfway.ir.initializers import Normal
from halfway.ir.ops.families import BINARY, REDUCE, UNARY
from halfway.ir.ops.math import broadcast_shape, numpy_operand_shapes, paddle_axis_to_numpy
from halfway.ir.schema import InferContext, InferError, TensorInfo, get_schema
from tests.support.oprun import run_op

RNG = np.random.default_rng(0)


def t(shape: tuple[int, ...], dtype: str = "float32") -> TensorInfo:
    return TensorInfo(tuple(shape), DType.from_any(dtype))


def infer(op_type: str, attrs: dict | None = None, **inputs: object) -> dict[str, list[TensorInfo]]:
    """Run ``op_type``'s inference; an input is an array, a TensorInfo, or a list of those."""

    def info(value: object) -> TensorInfo:
        return value if isinstance(value, TensorInfo) else TensorInfo(value.shape, DType.from_any(value.dtype))

    slots = {slot: [info(v) for v in (value if isinstance(value, list) else [value])]
             for slot, value in inputs.items()}
    schema = get_schema(op_type)
    ctx = InferContext(schema, slots, attrs or {})
    schema.infer(ctx)
    return ctx.outputs


def out(op_type: str, attrs: dict | None = None, **inputs: object) -> TensorInfo:
    return infer(op_type, attrs, **inputs)["Out"][0]


def rand(shape: tuple[int, ...], low: float = 0.1, high: float = 2.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


# -- elementwise --------------------------------------------------------------------------------
ELEMENTWISE_REF = {
    "elementwise_add": np.add,
    "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply,
    "elementwise_div": np.divide,
    "elementwise_max": np.maximum,
    "elementwise_min": np.minimum,
    "elementwise_pow": np.power,
    "elementwise_mod": np.mod,
    "elementwise_fmod": np.fmod,
    "elementwise_floordiv": np.floor_divide,
}

# (X shape, Y shape, axis, the lower-rank operand reshaped by hand for numpy)
BROADCAST_CASES = [
    ((2, 3, 4, 5), (3, 4), 1, (3, 4, 1)),
    ((2, 3, 4, 5), (4, 5), -1, (4, 5)),
    ((2, 3, 4, 5), (3,), 1, (3, 1, 1)),
    ((2, 3, 4, 5), (2,), 0, (2, 1, 1, 1)),
    ((2, 3, 4, 5), (5,), -1, (5,)),
    ((2, 3, 4, 5), (3, 4), -2, (3, 4, 1)),       # Y's last dim at X's dim -2
    ((2, 3, 4, 5), (4,), -2, (4, 1)),
    ((2, 3, 4, 5), (2,), -4, (2, 1, 1, 1)),
    ((3, 4), (2, 3, 4, 5), 1, (3, 4, 1)),        # X has the lower rank: X moves
    ((1, 3, 1, 5), (2, 1, 4, 1), -1, (2, 1, 4, 1)),  # both ways, equal ranks
    ((2, 3, 4, 5), (1, 3, 1, 1), 0, (1, 3, 1, 1)),
    ((2, 1, 5), (3, 1), -1, (3, 1)),
    ((2, 3, 4), (4, 1), 2, (4,)),                # fluid: trailing 1s of Y dropped to fit
    ((7,), (), -1, ()),
    ((), (2, 3), -1, ()),
    ((3, 5), (3, 5), 7, (3, 5)),                 # equal shapes ignore axis
]


@pytest.mark.parametrize("x_shape, y_shape, axis, moved", BROADCAST_CASES)
def test_elementwise_shapes_match_numpy(x_shape, y_shape, axis, moved):
    x, y = rand(x_shape), rand(y_shape)
    x_np, y_np = (x, y.reshape(moved)) if len(y_shape) <= len(x_shape) else (x.reshape(moved), y)
    assert set(ELEMENTWISE_REF) == {name for name, row in BINARY.items() if DType.float32 in row.dtypes}  # not the bitwise ops
    for op_type, ref in ELEMENTWISE_REF.items():
        expected = ref(x_np, y_np)
        got = out(op_type, {"axis": axis}, X=x, Y=y)
        assert got == (expected.shape, DType.float32), op_type
    xs, ys = numpy_operand_shapes(x_shape, y_shape, axis)
    np.testing.assert_array_equal(np.add(x.reshape(xs), y.reshape(ys)), np.add(x_np, y_np))


def test_paddle_axis_to_numpy():
    assert paddle_axis_to_numpy((3, 4), 4, 1) == (3, 4, 1)
    assert paddle_axis_to_numpy((3,), 4, -1) == (3,)
    assert paddle_axis_to_numpy((3,), 4, -3) == (3, 1, 1)
    assert paddle_axis_to_numpy((4, 1, 1), 4, 2) == (4, 1)
    assert paddle_axis_to_numpy((-1, 4), 3, 0) == (-1, 4, 1)


@pytest.mark.parametrize("x_shape, y_shape, axis, expected", [
    ((-1, 3, 4), (3, 4), -1, (-1, 3, 4)),
    ((-1, 3, 4), (3,), 1, (-1, 3, 4)),
    ((-1, 1, 4), (5, 1), -1, (-1, 5, 4)),
    ((2, -1), (2, 3), -1, (2, 3)),
    ((-1,), (1,), -1, (-1,)),
    ((-1, 3), (-1, 1), -1, (-1, 3)),
    ((1, -1), (-1, 1), -1, (-1, -1)),
    ((0, 3), (1, 3), -1, (0, 3)),
    ((-1, 3), (0, 1), -1, (0, 3)),
])
def test_elementwise_unknown_dims(x_shape, y_shape, axis, expected):
    """-1 propagates; every run-time size numpy accepts agrees with the known dims."""
    assert out("elementwise_mul", {"axis": axis}, X=t(x_shape), Y=t(y_shape)).shape == expected
    for size in (1, 5):
        xs, ys = (tuple(size if d == -1 else d for d in s) for s in (x_shape, y_shape))
        try:
            result = np.broadcast_shapes(*numpy_operand_shapes(xs, ys, axis))
        except ValueError:
            continue
        assert all(e in (-1, r) for e, r in zip(expected, result)), (xs, ys, result)


@pytest.mark.parametrize("x_shape, y_shape, axis, message", [
    ((2, 3), (4,), -1, "cannot broadcast X [2, 3] with Y [4] (axis=-1): dim 1 of the aligned shapes is 3 "
                       "against 4"),
    ((2, 3, 4), (3, 5), 1, "dim 2 of the aligned shapes is 4 against 5"),
    ((0, 3), (5, 3), -1, "dim 0 of the aligned shapes is 0 against 5"),
    ((2, 3, 4), (3, 4), 2, "a rank-2 operand placed at dim 2 runs past the last of 3 dims"),
    ((2, 3, 4, 5), (2, 3), -4, "axis -4 puts the rank-2 operand before dim 0 of the rank-4 one"),
    ((2, 3), (2, 1), 1, "axis must be -1 or 0 when both operands have rank 2, got 1"),
    ((2, 3, 4), (3,), 3, "axis must be in [-3, 3) for ranks 3 and 1, got 3"),
])
def test_elementwise_bad_shapes(x_shape, y_shape, axis, message):
    with pytest.raises(InferError) as err:
        out("elementwise_add", {"axis": axis}, X=t(x_shape), Y=t(y_shape))
    assert message in str(err.value)
    assert str(err.value).startswith("elementwise_add: ")
    with pytest.raises(InferError, match="cannot broadcast"):
        broadcast_shape(x_shape, y_shape, axis)


def test_elementwise_dtypes_and_slots():
    assert out("elementwise_sub", X=t((2, 3), "float16"), Y=t((3,), "float16")).dtype == DType.float16
    assert out("elementwise_max", X=t((4,), "int64"), Y=t((), "int64")).dtype == DType.int64
    with pytest.raises(InferError, match="X is float16 but Y is float32; both operands need one dtype"):
        out("elementwise_add", X=t((2, 3), "float16"), Y=t((3,)))
    with pytest.raises(InferError, match="input slot 'Y' needs at least 1 var"):
        out("elementwise_add", X=t((2, 3)))
    schema = get_schema("elementwise_div")
    assert schema.decisive_slots == ("X", "Y") and schema.inplace == {"X": "Out"}
    assert schema.defaults() == {"axis": -1}


# -- activations --------------------------------------------------------------------------------
# Paddle's attr defaults of the activations that have attrs.
PADDLE_DEFAULTS = {
    "relu6": {"threshold": 6.0},
    "leaky_relu": {"alpha": 0.02},
    "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0},
    "hard_sigmoid": {"slope": 0.2, "offset": 0.5},
    "swish": {"beta": 1.0},
    "gelu": {"approximate": False},
    "softplus": {"beta": 1.0, "threshold": 20.0},
}


@pytest.mark.parametrize("shape", [(2, 3, 5), (7,), ()])
def test_activations_keep_shape_and_dtype(shape):
    for op_type in UNARY:
        assert out(op_type, X=t(shape)) == (shape, DType.float32), op_type
        assert out(op_type, X=t((-1,) + shape, "float16")) == ((-1,) + shape, DType.float16), op_type


def test_activation_schemas():
    for op_type, defaults in PADDLE_DEFAULTS.items():
        assert get_schema(op_type).defaults() == pytest.approx(defaults), op_type
    for op_type in UNARY:
        schema = get_schema(op_type)
        assert schema.inplace == {"X": "Out"} and schema.decisive_slots == ("X",)


# -- scale, clip, pow, sum, cast, mean ----------------------------------------------------------
def test_scale_clip_pow():
    x = rand((3, 1, 4), -2.0, 2.0)
    assert out("scale", {"scale": 2.0, "bias": 1.0}, X=x).shape == (2.0 * x + 1.0).shape
    assert out("scale", X=x, ScaleTensor=t((1,))).shape == (3, 1, 4)
    assert out("clip", {"min": -1.0, "max": 1.0}, X=x).shape == np.clip(x, -1.0, 1.0).shape
    assert out("clip", {"min": 0.0, "max": 0.0}, X=x, Min=t(()), Max=t((1,))).shape == (3, 1, 4)
    assert out("pow", {"factor": 3.0}, X=t((-1, 4), "float16")) == ((-1, 4), DType.float16)
    assert out("pow", X=np.abs(x), FactorTensor=t((-1,))).shape == np.power(np.abs(x), 0.5).shape
    for op_type, tensor in (("clip", "Min"), ("scale", "ScaleTensor"), ("scale", "BiasTensor"),
                            ("pow", "FactorTensor")):
        assert tensor in get_schema(op_type).keep_dtype_slots


@pytest.mark.parametrize("after", [True, False])
def test_scale_tensors_replace_scale_and_bias(after):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    factor, bias = np.array([2.5], np.float32), np.array([-0.75], np.float32)
    got = run_op("scale", {"X": x, "ScaleTensor": factor, "BiasTensor": bias},
                 {"scale": 9.0, "bias": 9.0, "bias_after_scale": after}).out
    np.testing.assert_allclose(got, 2.5 * x - 0.75 if after else 2.5 * (x - 0.75), rtol=1e-6)
    only_bias = run_op("scale", {"X": x, "BiasTensor": bias}, {"scale": 3.0, "bias_after_scale": after}).out
    np.testing.assert_allclose(only_bias, 3.0 * x - 0.75 if after else 3.0 * (x - 0.75), rtol=1e-6)


def test_scale_clip_errors():
    with pytest.raises(InferError, match=r"clip: attr 'min' \(2.0\) must not exceed attr 'max' \(1.0\)"):
        out("clip", {"min": 2.0, "max": 1.0}, X=t((3,)))
    with pytest.raises(SchemaError, match="op clip needs attr"):
        out("clip", X=t((3,)))
    with pytest.raises(InferError, match=r"input 'ScaleTensor' must hold one value \(shape \[\] or \[1\]\), "
                                         r"got shape \[2\]"):
        out("scale", X=t((3,)), ScaleTensor=t((2,)))


def test_sum():
    xs = [rand((2, 3)) for _ in range(3)]
    assert out("sum", X=xs) == (np.sum(xs, axis=0).shape, DType.float32)
    assert out("sum", X=[t((-1, 3)), t((2, 3)), t((-1, 3))]).shape == (2, 3)
    assert out("sum", X=[t((-1, 3)), t((-1, 3))]).shape == (-1, 3)
    with pytest.raises(InferError, match=r"sum: X\[1\] has shape \[3, 2\], X\[0\] \[2, 3\]; "
                                         r"all inputs need one shape"):
        out("sum", X=[t((2, 3)), t((3, 2))])
    with pytest.raises(InferError, match=r"X\[1\] is float16 but X\[0\] is float32"):
        out("sum", X=[t((2, 3)), t((2, 3), "float16")])


def test_cast():
    x = rand((2, 3))
    attrs = {"in_dtype": int(DType.float32), "out_dtype": int(DType.float16)}
    assert out("cast", attrs, X=x) == (x.astype(np.float16).shape, DType.float16)
    assert out("cast", {"in_dtype": 3, "out_dtype": 0}, X=t((-1,), "int64")) == ((-1,), DType.bool)
    with pytest.raises(InferError, match=r"cast: attr 'in_dtype' is 5 \(float32\) but X is float16; "
                                         r"set in_dtype to 4"):
        out("cast", attrs, X=t((2,), "float16"))
    with pytest.raises(InferError, match=r"attr 'out_dtype' = 99 is not a dtype wire value; expected one of "
                                         r"0 \(bool\), 1 \(int16\)"):
        out("cast", {"in_dtype": 5, "out_dtype": 99}, X=x)
    with pytest.raises(SchemaError, match="op cast needs attr"):
        out("cast", X=x)


def test_mean():
    x = rand((2, 3, 4))
    assert out("mean", X=x) == (np.mean(x).shape, DType.float32) == ((), DType.float32)
    assert out("mean", X=t((-1, 8), "float16")) == ((), DType.float16)


# -- reductions ---------------------------------------------------------------------------------
REDUCE_REF = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_prod": np.prod,
}


@pytest.mark.parametrize("shape, dim, keep_dim, reduce_all", [
    ((2, 3, 4), [1], False, False),
    ((2, 3, 4), [-1, 0], True, False),
    ((2, 3, 4), [0, 2], False, False),
    ((2, 3, 4), [0, 1, 2], False, False),
    ((2, 3, 4), [-3, 1, -1], True, False),
    ((2, 3, 4), [], False, False),
    ((2, 3, 4), [0], False, True),
    ((2, 3, 4), [0], True, True),
    ((5,), [0], True, False),
    ((5,), [-1], False, False),
    ((), [0], False, False),
    ((), [-1], True, False),
])
def test_reduce_shapes_match_numpy(shape, dim, keep_dim, reduce_all):
    assert set(REDUCE_REF) == set(REDUCE)
    x = rand(shape)
    axes = None if reduce_all or not dim or not shape else tuple(dim)
    attrs = {"dim": dim, "keep_dim": keep_dim, "reduce_all": reduce_all}
    for op_type, ref in REDUCE_REF.items():
        assert out(op_type, attrs, X=x) == (ref(x, axis=axes, keepdims=keep_dim).shape, DType.float32), op_type


@pytest.mark.parametrize("dtype, lowest, highest", [("float32", -np.inf, np.inf), ("int32", -2**31, 2**31 - 1),
                                                     ("uint8", 0, 255), ("bool", False, True)])
def test_max_and_min_of_nothing_are_the_extremes(dtype, lowest, highest):
    """ONNX's ReduceMax of an empty set is -inf (an integer type's least value), ReduceMin +inf
    (its greatest); an empty dim kept elsewhere leaves nothing to reduce."""
    x = np.zeros((2, 0, 3), dtype)
    for op_type, want in (("reduce_max", lowest), ("reduce_min", highest)):
        got = run_op(op_type, {"X": x}, {"dim": [1]}).out
        assert got.dtype == x.dtype and got.shape == (2, 3)
        np.testing.assert_array_equal(got, np.full((2, 3), want, dtype))
        assert run_op(op_type, {"X": x}, {"dim": [2]}).out.shape == (2, 0)


def test_reduce_defaults_unknown_dims_and_dtypes():
    assert out("reduce_mean", X=t((4, 5))).shape == (5,)          # dim defaults to [0]
    assert out("reduce_max", {"dim": [1]}, X=t((-1, 3, 4))).shape == (-1, 4)
    assert out("reduce_min", {"dim": [1], "keep_dim": True}, X=t((-1, 3, -1))).shape == (-1, 1, -1)
    assert out("reduce_prod", {"dim": [0]}, X=t((-1, 3))).shape == (3,)
    assert out("reduce_sum", X=t((4,), "int32")).dtype == DType.int64
    assert out("reduce_sum", X=t((4,), "bool")).dtype == DType.int64
    assert out("reduce_sum", {"out_dtype": int(DType.float64)}, X=t((4,))).dtype == DType.float64
    assert out("reduce_max", X=t((4,), "int32")).dtype == DType.int32
    assert out("reduce_mean", X=t((4,), "float16")).dtype == DType.float16


def test_reduce_errors():
    with pytest.raises(InferError, match=r"reduce_sum: attr 'dim' = \[0, 3\]: \[3\] out of range \[-3, 3\) "
                                         r"for X of rank 3"):
        out("reduce_sum", {"dim": [0, 3]}, X=t((2, 3, 4)))
    with pytest.raises(InferError, match=r"\[1\] out of range \[-1, 1\) for X of rank 0"):
        out("reduce_mean", {"dim": [1]}, X=t(()))
    with pytest.raises(InferError, match="attr 'out_dtype' = 42 is not a dtype wire value"):
        out("reduce_sum", {"out_dtype": 42}, X=t((2,)))


# -- builder ------------------------------------------------------------------------------------
def test_layer_functions_cover_the_tables():
    for op_type in (*BINARY, *UNARY, *REDUCE, "clip", "scale", "sums", "cast", "mean", "pow"):
        assert op_type in layers.__all__ and callable(getattr(layers, op_type))
    assert list(inspect.signature(layers.hard_swish).parameters) == ["x", "threshold", "scale", "offset", "name"]
    assert list(inspect.signature(layers.elementwise_pow).parameters) == ["x", "y", "axis", "act", "name"]
    assert layers.reduce_prod.__name__ == "reduce_prod" and "product" in layers.reduce_prod.__doc__


def _build() -> tuple[halfway.Program, dict[str, halfway.Variable]]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [-1, 4, 3, 5])
        bias = create_parameter("bias", [4], initializer=Normal())
        v = {"x": x, "bias": bias}
        v["add"] = layers.elementwise_add(x, bias, axis=1, act="relu6")
        v["leaky"] = layers.leaky_relu(v["add"], alpha=0.1)
        v["scale"] = layers.scale(v["leaky"], scale=2.0, bias=1.0)
        v["clip"] = layers.clip(v["scale"], -1.0, 1.0)
        v["pow"] = layers.pow(v["clip"], factor=2.0)
        v["rmean"] = layers.reduce_mean(v["pow"], dim=[2, -1], keep_dim=True)
        v["rsum"] = layers.reduce_sum(v["pow"])
        v["half"] = layers.cast(v["rmean"], "float16")
        v["sums"] = layers.sums([v["add"], v["leaky"]])
        v["mean"] = layers.mean(v["sums"])
    return prog, v


def test_builder_program():
    prog, v = _build()
    ops = prog.global_block().ops
    assert [op.type for op in ops] == ["elementwise_add", "relu6", "leaky_relu", "scale", "clip", "pow",
                                       "reduce_mean", "reduce_sum", "cast", "sum", "mean"]
    add, relu6, leaky, scale, clip, pow_, rmean, rsum, cast, sum_, mean = ops
    assert add.attrs == {"axis": 1} and add.input("Y") == (v["bias"].name,)
    assert relu6.attrs == {"threshold": 6.0}
    assert leaky.attrs["alpha"] == pytest.approx(0.1)
    assert scale.attrs == {"scale": 2.0, "bias": 1.0, "bias_after_scale": True}
    assert clip.attrs == {"min": -1.0, "max": 1.0} and pow_.attrs == {"factor": 2.0}
    assert rmean.attrs == {"dim": (2, -1), "keep_dim": True, "reduce_all": False, "in_dtype": -1, "out_dtype": -1}
    assert rsum.attrs["dim"] == (0,) and rsum.attrs["reduce_all"] is True
    assert cast.attrs == {"in_dtype": int(DType.float32), "out_dtype": int(DType.float16)}
    assert sum_.input("X") == (v["add"].name, v["leaky"].name)
    for key in ("add", "leaky", "scale", "clip", "pow", "sums"):
        assert v[key].shape == (-1, 4, 3, 5) and v[key].dtype == DType.float32, key
    assert v["rmean"].shape == (-1, 4, 1, 1) and v["half"].dtype == DType.float16
    assert v["rsum"].shape == () and v["mean"].shape == ()


def test_builder_tensor_scalars_and_bad_arguments():
    with halfway.program_guard(halfway.Program()):
        x = layers.data("x", [2, 3])
        low = layers.data("low", [1])
        clipped = layers.clip(x, low, 5.0)
        scaled = layers.scale(x, scale=low)
        assert clipped.producer().input("Min") == ("low",) and clipped.producer().attrs["max"] == 5.0
        assert scaled.producer().input("ScaleTensor") == ("low",)
        with pytest.raises(TypeError):
            layers.relu(x, alpha=1.0)
        with pytest.raises(IRError, match="op leaky_relu, attr 'alpha': invalid FLOAT attr value"):
            layers.leaky_relu(x, alpha="big")
        with pytest.raises(InferError, match="elementwise_add: cannot broadcast X \\[2, 3\\] with Y \\[4\\]"):
            layers.elementwise_add(x, layers.data("y", [4]))


def test_init_scope_is_reproducible():
    prog, v = _build()
    first, again = halfway.init_scope(prog, seed=0), halfway.init_scope(prog, seed=0)
    bias = v["bias"].name
    assert first.get(bias).shape == (4,) and first.get(bias).dtype == np.float32
    np.testing.assert_array_equal(first.get(bias), again.get(bias))
    assert not np.array_equal(first.get(bias), halfway.init_scope(prog, seed=1).get(bias))
