"""The op family tables: unary elementwise ops and activations (``UNARY``), binary elementwise
ops (``BINARY``), comparisons and logical ops (``COMPARE``) and reductions (``REDUCE``), one row
per op (``halfway.ir.ops.family`` describes the fields).

Adding an activation is one row here: its schema, its layer function, its numpy and OpenCL
kernels, its place in the float16 lists, in the conv/fc epilogues (where ``absorb`` says so) and
in the ONNX importer (where ``onnx`` names it) all come from the row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..attrs import AttrType
from ..dtypes import DType
from ..errors import SchemaError
from ..schema import AttrSpec
from . import numpy_math as nm
from .family import (
    ALL_DTYPES,
    FLOATS,
    NUMBERS,
    Absorb,
    Attrs,
    Elementwise,
    Float16,
    Onnx,
    Reduction,
    fused_params,
    same_attrs,
    unfused,
)

__all__ = ["UNARY", "BINARY", "COMPARE", "REDUCE", "EPILOGUE_ALIASES", "absorbable", "epilogue_op", "fc_absorbable",
           "float16_classes"]


def _floats(**defaults: float) -> tuple[AttrSpec, ...]:
    return tuple(AttrSpec(name, AttrType.FLOAT, value) for name, value in defaults.items())


def _table(rows: Iterable[Any]) -> dict[str, Any]:
    return {row.name: row for row in rows}


# -- epilogue readings where Paddle's fused ops differ from "fuse_alpha/fuse_beta hold attrs" --------
def _slope(alpha: float, beta: float) -> tuple[str, dict[str, Any]]:
    """relu and leaky_relu: a nonzero fuse_alpha is the slope below zero."""
    return ("leaky_relu", {"alpha": float(alpha)}) if alpha != 0 else ("relu", {})


def _relu6_top(alpha: float, beta: float) -> tuple[str, dict[str, Any]]:
    """relu6 clips at fuse_beta (newer Paddle), else fuse_alpha (older), else 6."""
    return "relu6", {"threshold": float(beta if beta > 0 else alpha if alpha > 0 else 6.0)}


def _hard_swish_encode(attrs: Attrs) -> tuple[float, float] | None:
    scale = attrs["scale"]
    return (1.0 / scale, attrs["offset"] / scale) if scale > 0 else None


def _hard_swish_decode(alpha: float, beta: float) -> tuple[str, dict[str, Any]]:
    """Paddle's fused hard_swish is x * clip(alpha * x + beta, 0, 1), alpha 1/6 and beta 1/2 when 0."""
    slope, offset = alpha or 1 / 6, beta or 0.5
    return "hard_swish", {"threshold": 1 / slope, "scale": 1 / slope, "offset": offset / slope}


_SIGMOID = "(R(1) / (R(1) + exp(-(x))))"


def _gelu_opencl(attrs: Attrs) -> str:
    if attrs["approximate"]:
        u = "((x) + R(0.044715) * (x) * (x) * (x))"
        return f"((x) / (R(1) + exp(R({-2 * math.sqrt(2 / math.pi)!r}) * {u})))"
    return f"(R(0.5) * (x) * erfc((x) * R({-math.sqrt(0.5)!r})))"


def _unary(name: str, doc: str, numpy: Any, opencl: Any, **fields: Any) -> Elementwise:
    return Elementwise(name, 1, doc, numpy, opencl, **fields)


UNARY: dict[str, Elementwise] = _table([
    _unary("relu", "max(X, 0)", nm.relu, "fmax(x, R(0))", exact_half=True,
           absorb=Absorb(decode=_slope), onnx=Onnx("Relu")),
    # Paddle 3 exports write no threshold attr; the default 6 applies.
    _unary("relu6", "min(max(X, 0), threshold)", nm.relu6, "clamp(x, R(0), a0)", attrs=_floats(threshold=6.0),
           params=("threshold",), absorb=Absorb(beta="threshold", decode=_relu6_top)),
    _unary("leaky_relu", "X if X > 0 else alpha * X", nm.leaky_relu, "(fmax(x, R(0)) + a0 * fmin(x, R(0)))",
           attrs=_floats(alpha=0.02), params=("alpha",), absorb=Absorb(alpha="alpha", decode=_slope),
           onnx=Onnx("LeakyRelu", {"alpha": ("alpha", 0.01)})),
    _unary("sigmoid", "1 / (1 + exp(-X))", nm.sigmoid, _SIGMOID, absorb=Absorb(), onnx=Onnx("Sigmoid")),
    _unary("tanh", "tanh(X)", np.tanh, "tanh(x)", onnx=Onnx("Tanh")),
    _unary("hard_swish", "X * min(max(X + offset, 0), threshold) / scale", nm.hard_swish,
           "((x) * clamp((x) + a2, R(0), a0) / a1)", attrs=_floats(threshold=6.0, scale=6.0, offset=3.0),
           params=("threshold", "scale", "offset"),
           absorb=Absorb(encode=_hard_swish_encode, decode=_hard_swish_decode)),
    _unary("hard_sigmoid", "min(max(slope * X + offset, 0), 1)", nm.hard_sigmoid,
           "clamp(a0 * (x) + a1, R(0), R(1))", attrs=_floats(slope=0.2, offset=0.5), params=("slope", "offset"),
           onnx=Onnx("HardSigmoid", {"slope": ("alpha", 0.2), "offset": ("beta", 0.5)})),
    _unary("swish", "X * sigmoid(beta * X)", nm.swish, "((x) / (R(1) + exp(-a0 * (x))))", attrs=_floats(beta=1.0),
           params=("beta",), absorb=Absorb(alpha="beta")),
    _unary("silu", "X * sigmoid(X)", nm.silu, f"((x) * {_SIGMOID})"),
    # fused: fuse_alpha 1 for the tanh approximation (fc's activation_type, which has no alpha, is exact GELU)
    _unary("gelu", "X * Phi(X) (the tanh approximation when approximate)", nm.gelu, _gelu_opencl,
           attrs=(AttrSpec("approximate", AttrType.BOOLEAN, False),),
           absorb=Absorb(encode=lambda attrs: (float(bool(attrs["approximate"])), 0.0),
                         decode=lambda alpha, beta: ("gelu", {"approximate": alpha != 0}))),
    _unary("softplus", "log(1 + exp(beta * X)) / beta, or X where beta * X > threshold", nm.softplus,
           "select(log1p(exp(a0 * (x))) / a0, (x), a0 * (x) > a1)", attrs=_floats(beta=1.0, threshold=20.0),
           params=("beta", "threshold"), onnx=Onnx("Softplus")),
    _unary("mish", "X * tanh(softplus(X))",
           lambda x, out=None: np.multiply(x, np.tanh(np.logaddexp(0, x)), out=out),
           "((x) * tanh(log1p(exp(x))))", absorb=Absorb(), onnx=Onnx("Mish")),
    _unary("selu", "scale * (X if X > 0 else alpha * (exp(X) - 1))",
           lambda x, scale, alpha: scale * (np.maximum(x, 0) + alpha * np.expm1(np.minimum(x, 0))),
           "(a0 * (fmax(x, R(0)) + a1 * expm1(fmin(x, R(0)))))",
           attrs=_floats(scale=1.0507009873554805, alpha=1.6732632423543772), params=("scale", "alpha"),
           onnx=Onnx("Selu", {"scale": ("gamma", 1.05070102214813232421875),
                              "alpha": ("alpha", 1.67326319217681884765625)})),
    _unary("exp", "exp(X)", np.exp, "exp(x)", float16=Float16.NEVER,
           float16_reason="exp overflows float16 for inputs above 11.1", onnx=Onnx("Exp")),
    _unary("log", "log(X)", np.log, "log(x)", float16=Float16.NEVER,
           float16_reason="log of float16 loses the small inputs (below 6e-8 they are 0, giving -inf)",
           onnx=Onnx("Log")),
    _unary("sqrt", "sqrt(X)", np.sqrt, "sqrt(x)", exact_half=True, onnx=Onnx("Sqrt")),
    _unary("abs", "|X|", np.abs, "fabs(x)", dtypes=NUMBERS, exact_half=True, onnx=Onnx("Abs")),
    _unary("erf", "erf(X)", nm.erf, "erf(x)", onnx=Onnx("Erf")),
    _unary("ceil", "ceil(X)", np.ceil, "ceil(x)", exact_half=True, onnx=Onnx("Ceil")),
    _unary("floor", "floor(X)", np.floor, "floor(x)", exact_half=True, onnx=Onnx("Floor")),
    # Paddle's round takes halves away from zero (std::round, OpenCL's round)
    _unary("round", "X rounded to the nearest integer, halves away from zero", nm.round_half_away, "round(x)",
           exact_half=True),
    _unary("round_half_even", "X rounded to the nearest integer, halves to even", np.rint, "rint(x)",
           exact_half=True, onnx=Onnx("Round")),
    _unary("sign", "-1, 0 or 1 as X is negative, zero or positive", np.sign, "sign(x)", dtypes=NUMBERS,
           exact_half=True, onnx=Onnx("Sign")),
    _unary("reciprocal", "1 / X", np.reciprocal, "(R(1) / (x))", exact_half=True, onnx=Onnx("Reciprocal")),
    _unary("sin", "sin(X)", np.sin, "sin(x)", onnx=Onnx("Sin")),
    _unary("cos", "cos(X)", np.cos, "cos(x)", onnx=Onnx("Cos")),
    _unary("tan", "tan(X)", np.tan, "tan(x)", onnx=Onnx("Tan")),
    _unary("asin", "asin(X)", np.arcsin, "asin(x)", onnx=Onnx("Asin")),
    _unary("acos", "acos(X)", np.arccos, "acos(x)", onnx=Onnx("Acos")),
    _unary("atan", "atan(X)", np.arctan, "atan(x)", onnx=Onnx("Atan")),
    _unary("sinh", "sinh(X)", np.sinh, "sinh(x)", float16=Float16.NEVER,
           float16_reason="sinh overflows float16 for inputs above 11.8", onnx=Onnx("Sinh")),
    _unary("cosh", "cosh(X)", np.cosh, "cosh(x)", float16=Float16.NEVER,
           float16_reason="cosh overflows float16 for inputs above 11.8", onnx=Onnx("Cosh")),
    _unary("asinh", "asinh(X)", np.arcsinh, "asinh(x)", onnx=Onnx("Asinh")),
    _unary("acosh", "acosh(X)", np.arccosh, "acosh(x)", onnx=Onnx("Acosh")),
    _unary("atanh", "atanh(X)", np.arctanh, "atanh(x)", onnx=Onnx("Atanh")),
    _unary("softsign", "X / (1 + |X|)", lambda x: x / (1 + np.abs(x)), "((x) / (R(1) + fabs(x)))",
           onnx=Onnx("Softsign")),
    _unary("elu", "X if X > 0 else alpha * (exp(X) - 1)", nm.elu, "select(a0 * expm1(x), (x), (x) > R(0))",
           attrs=_floats(alpha=1.0), params=("alpha",), onnx=Onnx("Elu", {"alpha": ("alpha", 1.0)})),
    _unary("celu", "max(X, 0) + min(0, alpha * (exp(X / alpha) - 1))", nm.celu,
           "(fmax(x, R(0)) + fmin(R(0), a0 * expm1((x) / a0)))", attrs=_floats(alpha=1.0), params=("alpha",),
           onnx=Onnx("Celu", {"alpha": ("alpha", 1.0)})),
    _unary("thresholded_relu", "X if X > threshold else value", nm.thresholded_relu,
           "select(a1, (x), (x) > a0)", attrs=_floats(threshold=1.0, value=0.0), params=("threshold", "value"),
           onnx=Onnx("ThresholdedRelu", {"threshold": ("alpha", 1.0)})),
    _unary("hard_shrink", "X if |X| > threshold else 0", nm.hard_shrink, "select(R(0), (x), fabs(x) > a0)",
           attrs=_floats(threshold=0.5), params=("threshold",)),
    _unary("logsigmoid", "log(sigmoid(X))", lambda x: -np.logaddexp(0, -x), "(-log1p(exp(-(x))))"),
    _unary("square", "X * X", np.square, "((x) * (x))", dtypes=NUMBERS, exact_half=True),
])
"""Op type -> row of the X -> Out activations and unary math ops (same shape and dtype, in place)."""


_POWERS = "powers leave float16's range quickly (x ** 3 overflows from x = 40.3)"


def _binary(name: str, doc: str, numpy: Any, opencl: str, onnx: str | None = None, **fields: Any) -> Elementwise:
    return Elementwise(name, 2, doc, numpy, opencl, dtypes=NUMBERS, onnx=Onnx(onnx) if onnx else None, axis=True,
                       **fields)


BINARY: dict[str, Elementwise] = _table([
    _binary("elementwise_add", "X + Y", np.add, "((a) + (b))", "Add", exact_half=True),
    _binary("elementwise_sub", "X - Y", np.subtract, "((a) - (b))", "Sub", exact_half=True),
    _binary("elementwise_mul", "X * Y", np.multiply, "((a) * (b))", "Mul", exact_half=True),
    # integers truncate toward zero
    _binary("elementwise_div", "X / Y", np.divide, "((a) / (b))", "Div", exact_half=True,
            ints=nm.divide_toward_zero),
    _binary("elementwise_max", "max(X, Y)", np.maximum, "fmax(a, b)", "Max", exact_half=True),
    _binary("elementwise_min", "min(X, Y)", np.minimum, "fmin(a, b)", "Min", exact_half=True),
    # integers through double; ONNX's Pow has its own converter (a constant exponent becomes pow)
    # Python's remainder and floor division: the remainder takes the divisor's sign
    _binary("elementwise_mod", "X mod Y (the sign of Y)", np.mod, "((a) - floor((a) / (b)) * (b))",
            ints=nm.int_mod),
    _binary("elementwise_fmod", "C's fmod(X, Y) (the sign of X)", np.fmod, "fmod(a, b)", ints=nm.int_fmod),
    _binary("elementwise_floordiv", "floor(X / Y)", np.floor_divide, "floor((a) / (b))", ints=nm.int_floordiv),
    _binary("elementwise_pow", "X ** Y", np.power, "pow(a, b)", ints=nm.power_via_double, float16=Float16.NEVER,
            float16_reason=_POWERS),
])
"""Op type -> row of the elementwise X, Y -> Out ops (Y broadcast into X from dim ``axis``)."""


def _compare(name: str, arity: int, doc: str, numpy: Any, opencl: str | None, onnx: str | None,
             axis: bool) -> Elementwise:
    return Elementwise(name, arity, doc, numpy, opencl, dtypes=ALL_DTYPES, exact_half=True,
                       onnx=Onnx(onnx) if onnx else None, out_dtype=DType.bool, axis=axis)


COMPARE: dict[str, Elementwise] = _table([
    _compare("equal", 2, "X == Y", np.equal, "(a) == (b)", "Equal", True),
    _compare("not_equal", 2, "X != Y", np.not_equal, "(a) != (b)", None, True),
    _compare("greater_than", 2, "X > Y", np.greater, "(a) > (b)", "Greater", True),
    _compare("greater_equal", 2, "X >= Y", np.greater_equal, "(a) >= (b)", "GreaterOrEqual", True),
    _compare("less_than", 2, "X < Y", np.less, "(a) < (b)", "Less", True),
    _compare("less_equal", 2, "X <= Y", np.less_equal, "(a) <= (b)", "LessOrEqual", True),
    _compare("logical_and", 2, "X and Y (nonzero is true)", np.logical_and, "(a) != 0 && (b) != 0", "And", False),
    _compare("logical_or", 2, "X or Y (nonzero is true)", np.logical_or, "(a) != 0 || (b) != 0", "Or", False),
    _compare("logical_xor", 2, "X xor Y (nonzero is true)", np.logical_xor, "((a) != 0) != ((b) != 0)", "Xor",
             False),
    _compare("logical_not", 1, "not X (nonzero is true)", np.logical_not, "(a) == 0", "Not", False),
    _compare("isnan", 1, "X is NaN", np.isnan, "isnan(a)", "IsNaN", False),
    _compare("isinf", 1, "X is infinite", np.isinf, "isinf(a)", None, False),
    _compare("isfinite", 1, "X is neither infinite nor NaN", np.isfinite, "isfinite(a)", None, False),
])
"""Op type -> row of the comparisons and logical ops: bool Out, Y broadcast into X (the
comparisons from dim ``axis``, the logical ops numpy's way)."""


REDUCE: dict[str, Reduction] = _table([
    # bool and int32 sum to int64 unless out_dtype says otherwise
    Reduction("reduce_sum", "the sum", np.sum, dtypes=NUMBERS + (DType.bool,), onnx=Onnx("ReduceSum")),
    Reduction("reduce_mean", "the mean", np.mean, dtypes=FLOATS, onnx=Onnx("ReduceMean")),
    Reduction("reduce_max", "the maximum", np.max, accumulates=False, dtypes=ALL_DTYPES, exact_half=True,
              onnx=Onnx("ReduceMax")),
    Reduction("reduce_min", "the minimum", np.min, accumulates=False, dtypes=ALL_DTYPES, exact_half=True,
              onnx=Onnx("ReduceMin")),
    Reduction("reduce_prod", "the product", np.prod, float16=Float16.NEVER,
              float16_reason="products of many elements overflow or underflow float16", onnx=Onnx("ReduceProd")),
])
"""Op type -> row of the reduce ops (what Out holds of X over the dims in attr ``dim``)."""


EPILOGUE_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {"silu": ("swish", {"beta": 1.0})}
"""Rows a fused conv computes as another, absorbable, row with these attrs: silu is swish at beta 1
(Paddle's fused conv names swish, not silu)."""


def absorbable() -> list[str]:
    """The activations a fused conv epilogue computes (``fused_conv2d``'s ``fuse_activation``)."""
    return [name for name, row in UNARY.items() if row.absorb is not None]


def epilogue_op(name: str, alpha: float = 0.0, beta: float = 0.0) -> tuple[str, dict[str, Any]] | None:
    """The activation (op type, attrs) that a fused op's ``fuse_activation`` (``fc``'s
    ``activation_type``), ``fuse_alpha`` and ``fuse_beta`` compute; None for "" (none).

    Raises:
        SchemaError: ``name`` is no absorbable row.
    """
    if name == "":
        return None
    row = UNARY.get(name)
    if row is None or row.absorb is None:
        raise SchemaError(f"unknown fused activation {name!r}; known: {', '.join(absorbable())}")
    return unfused(row, alpha, beta)


def fc_absorbable(row: Elementwise, attrs: Attrs | None = None) -> bool:
    """Whether ``fc``'s ``activation_type`` (an epilogue without parameters, read as
    fuse_alpha = fuse_beta = 0) computes ``row`` with ``attrs`` (default: the row's defaults)."""
    if row.absorb is None:
        return False
    plain = unfused(row, 0.0, 0.0)
    pair = fused_params(row, row.defaults() if attrs is None else attrs)
    if plain[0] != row.name or pair is None:
        return False
    op_type, back = unfused(row, *pair)
    return op_type == row.name and same_attrs(back, plain[1])


def float16_classes() -> dict[str, tuple[Float16, str]]:
    """Op type -> (float16 class, why) of every family row not classed FOLLOW."""
    rows: list[Elementwise | Reduction] = [*UNARY.values(), *BINARY.values(), *COMPARE.values(), *REDUCE.values()]
    return {row.name: (row.float16, row.float16_reason) for row in rows if row.float16 is not Float16.FOLLOW}
