"""The op family tables: unary elementwise ops and activations (``UNARY``), binary elementwise
ops (``BINARY``), comparisons and logical ops (``COMPARE``) and reductions (``REDUCE``), one row
per op (``halfway.ir.ops.family`` describes the fields).

Adding an activation is one row here: its math is one expression (``halfway.ir.ops.expr``), and
its schema, its layer function, its numpy, compiled and OpenCL kernels, its place in the float16
lists, in the conv/fc epilogues (where ``absorb`` says so) and in the ONNX importer (where
``onnx`` names it) all come from the row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..attrs import AttrType
from ..dtypes import DType
from ..errors import SchemaError
from ..schema import AttrSpec
from . import numpy_math as nm
from .expr import (
    N,
    X,
    Y,
    absolute,
    attr,
    call,
    choose,
    clip,
    eq,
    expm1,
    ge,
    gt,
    le,
    log1p_exp,
    lt,
    maximum,
    minimum,
    ne,
    normal_cdf,
    sigmoid,
    tanh,
    variables,
    where,
)
from .family import (
    ALL_DTYPES,
    FLOATS,
    INTS,
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


_TWO_SQRT_2_OVER_PI = 2 * math.sqrt(2 / math.pi)


def _unary(name: str, doc: str, expr: Any, **fields: Any) -> Elementwise:
    return Elementwise(name, 1, doc, expr, **fields)


def _math(name: str, doc: str, primitive: str, onnx: str | None = None, **fields: Any) -> Elementwise:
    """A row that is one primitive of X."""
    return Elementwise(name, 1, doc, call(primitive, X), onnx=Onnx(onnx) if onnx else None, **fields)


UNARY: dict[str, Elementwise] = _table([
    _unary("relu", "max(X, 0)", maximum(X, 0), exact_half=True, absorb=Absorb(decode=_slope), onnx=Onnx("Relu")),
    # Paddle 3 exports write no threshold attr; the default 6 applies.
    _unary("relu6", "min(max(X, 0), threshold)", clip(X, 0, attr("threshold")), attrs=_floats(threshold=6.0),
           absorb=Absorb(beta="threshold", decode=_relu6_top)),
    # x where x >= 0 (NaN and -0 kept)
    _unary("leaky_relu", "X if X > 0 else alpha * X", where(lt(X, 0), X * attr("alpha"), X), attrs=_floats(alpha=0.02),
           absorb=Absorb(alpha="alpha", decode=_slope), onnx=Onnx("LeakyRelu", {"alpha": ("alpha", 0.01)})),
    _unary("sigmoid", "1 / (1 + exp(-X))", sigmoid(X), absorb=Absorb(), onnx=Onnx("Sigmoid")),
    _unary("tanh", "tanh(X)", tanh(X), onnx=Onnx("Tanh")),
    _unary("hard_swish", "X * min(max(X + offset, 0), threshold) / scale",
           X * clip(X + attr("offset"), 0, attr("threshold")) / attr("scale"),
           attrs=_floats(threshold=6.0, scale=6.0, offset=3.0),
           absorb=Absorb(encode=_hard_swish_encode, decode=_hard_swish_decode)),
    _unary("hard_sigmoid", "min(max(slope * X + offset, 0), 1)", clip(attr("slope") * X + attr("offset"), 0, 1),
           attrs=_floats(slope=0.2, offset=0.5),
           onnx=Onnx("HardSigmoid", {"slope": ("alpha", 0.2), "offset": ("beta", 0.5)})),
    _unary("swish", "X * sigmoid(beta * X)", X * sigmoid(attr("beta") * X), attrs=_floats(beta=1.0),
           absorb=Absorb(alpha="beta")),
    _unary("silu", "X * sigmoid(X)", X * sigmoid(X)),
    # Paddle's tanh approximation 0.5 x (1 + tanh(u)), written x * sigmoid(2u) against 1 + tanh's cancellation;
    # fused: fuse_alpha 1 for it (fc's activation_type, which has no alpha, is exact GELU)
    _unary("gelu", "X * Phi(X) (the tanh approximation when approximate)",
           choose("approximate", X * sigmoid(_TWO_SQRT_2_OVER_PI * (X + 0.044715 * X * X * X)), X * normal_cdf(X)),
           attrs=(AttrSpec("approximate", AttrType.BOOLEAN, False),),
           absorb=Absorb(encode=lambda attrs: (float(bool(attrs["approximate"])), 0.0),
                         decode=lambda alpha, beta: ("gelu", {"approximate": alpha != 0}))),
    _unary("softplus", "log(1 + exp(beta * X)) / beta, or X where beta * X > threshold",
           where(gt(attr("beta") * X, attr("threshold")), X, log1p_exp(attr("beta") * X) / attr("beta")),
           attrs=_floats(beta=1.0, threshold=20.0), onnx=Onnx("Softplus")),
    _unary("mish", "X * tanh(softplus(X))", X * tanh(log1p_exp(X)), absorb=Absorb(), onnx=Onnx("Mish")),
    _unary("selu", "scale * (X if X > 0 else alpha * (exp(X) - 1))",
           attr("scale") * (maximum(X, 0) + attr("alpha") * expm1(minimum(X, 0))),
           attrs=_floats(scale=1.0507009873554805, alpha=1.6732632423543772),
           onnx=Onnx("Selu", {"scale": ("gamma", 1.05070102214813232421875),
                              "alpha": ("alpha", 1.67326319217681884765625)})),
    _math("exp", "exp(X)", "exp", "Exp", float16=Float16.NEVER,
          float16_reason="exp overflows float16 for inputs above 11.1"),
    _math("log", "log(X)", "log", "Log", float16=Float16.NEVER,
          float16_reason="log of float16 loses the small inputs (below 6e-8 they are 0, giving -inf)"),
    _math("sqrt", "sqrt(X)", "sqrt", "Sqrt", exact_half=True),
    _math("abs", "|X|", "abs", "Abs", dtypes=NUMBERS, exact_half=True),
    _math("erf", "erf(X)", "erf", "Erf"),
    _math("ceil", "ceil(X)", "ceil", "Ceil", exact_half=True),
    _math("floor", "floor(X)", "floor", "Floor", exact_half=True),
    # Paddle's round takes halves away from zero (std::round, OpenCL's round)
    _math("round", "X rounded to the nearest integer, halves away from zero", "round", exact_half=True),
    _math("round_half_even", "X rounded to the nearest integer, halves to even", "rint", "Round", exact_half=True),
    _math("sign", "-1, 0 or 1 as X is negative, zero or positive", "sign", "Sign", dtypes=NUMBERS, exact_half=True),
    _math("reciprocal", "1 / X", "reciprocal", "Reciprocal", exact_half=True),
    _math("sin", "sin(X)", "sin", "Sin"),
    _math("cos", "cos(X)", "cos", "Cos"),
    _math("tan", "tan(X)", "tan", "Tan"),
    _math("asin", "asin(X)", "asin", "Asin"),
    _math("acos", "acos(X)", "acos", "Acos"),
    _math("atan", "atan(X)", "atan", "Atan"),
    _math("sinh", "sinh(X)", "sinh", "Sinh", float16=Float16.NEVER,
          float16_reason="sinh overflows float16 for inputs above 11.8"),
    _math("cosh", "cosh(X)", "cosh", "Cosh", float16=Float16.NEVER,
          float16_reason="cosh overflows float16 for inputs above 11.8"),
    _math("asinh", "asinh(X)", "asinh", "Asinh"),
    _math("acosh", "acosh(X)", "acosh", "Acosh"),
    _math("atanh", "atanh(X)", "atanh", "Atanh"),
    _unary("softsign", "X / (1 + |X|)", X / (1 + absolute(X)), onnx=Onnx("Softsign")),
    _unary("elu", "X if X > 0 else alpha * (exp(X) - 1)", where(gt(X, 0), X, attr("alpha") * expm1(minimum(X, 0))),
           attrs=_floats(alpha=1.0), onnx=Onnx("Elu", {"alpha": ("alpha", 1.0)})),
    _unary("celu", "max(X, 0) + min(0, alpha * (exp(X / alpha) - 1))",
           maximum(X, 0) + minimum(0, attr("alpha") * expm1(minimum(X, 0) / attr("alpha"))), attrs=_floats(alpha=1.0),
           onnx=Onnx("Celu", {"alpha": ("alpha", 1.0)})),
    _unary("thresholded_relu", "X if X > threshold else value", where(gt(X, attr("threshold")), X, attr("value")),
           attrs=_floats(threshold=1.0, value=0.0), onnx=Onnx("ThresholdedRelu", {"threshold": ("alpha", 1.0)})),
    _unary("hard_shrink", "X if |X| > threshold else 0", where(gt(absolute(X), attr("threshold")), X, 0),
           attrs=_floats(threshold=0.5)),
    _unary("shrink", "X - bias if X > lambd, X + bias if X < -lambd, else 0",
           where(gt(X, attr("lambd")), X - attr("bias"), where(lt(X, -attr("lambd")), X + attr("bias"), 0)),
           attrs=_floats(bias=0.0, lambd=0.5), onnx=Onnx("Shrink", {"bias": ("bias", 0.0), "lambd": ("lambd", 0.5)})),
    _unary("logsigmoid", "log(sigmoid(X))", -log1p_exp(-X)),
    _math("square", "X * X", "square", dtypes=NUMBERS, exact_half=True),
    _math("bitwise_not", "~X, every bit of X flipped", "bitnot", "BitwiseNot", dtypes=INTS),
])
"""Op type -> row of the X -> Out activations and unary math ops (same shape and dtype, in place)."""


_POWERS = "powers leave float16's range quickly (x ** 3 overflows from x = 40.3)"


def _binary(name: str, doc: str, expr: Any, onnx: str | None = None, dtypes: tuple[DType, ...] = NUMBERS,
            **fields: Any) -> Elementwise:
    return Elementwise(name, 2, doc, expr, dtypes=dtypes, onnx=Onnx(onnx) if onnx else None, axis=True, **fields)


BINARY: dict[str, Elementwise] = _table([
    _binary("elementwise_add", "X + Y", X + Y, "Add", exact_half=True),
    _binary("elementwise_sub", "X - Y", X - Y, "Sub", exact_half=True),
    _binary("elementwise_mul", "X * Y", X * Y, "Mul", exact_half=True),
    # integers truncate toward zero
    _binary("elementwise_div", "X / Y", X / Y, "Div", exact_half=True, ints=nm.divide_toward_zero),
    _binary("elementwise_max", "max(X, Y)", maximum(X, Y), "Max", exact_half=True),
    _binary("elementwise_min", "min(X, Y)", minimum(X, Y), "Min", exact_half=True),
    # Python's remainder and floor division: the remainder takes the divisor's sign
    _binary("elementwise_mod", "X mod Y (the sign of Y)", call("mod", X, Y), ints=nm.int_mod),
    _binary("elementwise_fmod", "C's fmod(X, Y) (the sign of X)", call("fmod", X, Y), ints=nm.int_fmod),
    _binary("elementwise_floordiv", "floor(X / Y)", call("floordiv", X, Y), ints=nm.int_floordiv),
    # integers through double; ONNX's Pow has its own converter (a constant exponent becomes pow)
    _binary("elementwise_pow", "X ** Y", call("pow", X, Y), ints=nm.power_via_double, float16=Float16.NEVER,
            float16_reason=_POWERS),
    # bits of integers
    _binary("bitwise_and", "X & Y", call("bitand", X, Y), "BitwiseAnd", dtypes=INTS),
    _binary("bitwise_or", "X | Y", call("bitor", X, Y), "BitwiseOr", dtypes=INTS),
    _binary("bitwise_xor", "X ^ Y", call("bitxor", X, Y), "BitwiseXor", dtypes=INTS),
    _binary("bitwise_left_shift", "X << Y", call("shl", X, Y), dtypes=INTS),
    _binary("bitwise_right_shift", "X >> Y (logical for unsigned X)", call("shr", X, Y), dtypes=INTS),
])
"""Op type -> row of the elementwise X, Y -> Out ops (Y broadcast into X from dim ``axis``)."""


def _compare(name: str, doc: str, expr: Any, onnx: str | None, axis: bool) -> Elementwise:
    return Elementwise(name, len(variables(expr)), doc, expr, dtypes=ALL_DTYPES, exact_half=True,
                       onnx=Onnx(onnx) if onnx else None, out_dtype=DType.bool, axis=axis)


COMPARE: dict[str, Elementwise] = _table([
    _compare("equal", "X == Y", eq(X, Y), "Equal", True),
    _compare("not_equal", "X != Y", ne(X, Y), None, True),
    _compare("greater_than", "X > Y", gt(X, Y), "Greater", True),
    _compare("greater_equal", "X >= Y", ge(X, Y), "GreaterOrEqual", True),
    _compare("less_than", "X < Y", lt(X, Y), "Less", True),
    _compare("less_equal", "X <= Y", le(X, Y), "LessOrEqual", True),
    _compare("logical_and", "X and Y (nonzero is true)", call("and", X, Y), "And", False),
    _compare("logical_or", "X or Y (nonzero is true)", call("or", X, Y), "Or", False),
    _compare("logical_xor", "X xor Y (nonzero is true)", call("xor", X, Y), "Xor", False),
    _compare("logical_not", "not X (nonzero is true)", call("not", X), "Not", False),
    _compare("isnan", "X is NaN", call("isnan", X), "IsNaN", False),
    _compare("isinf", "X is infinite", call("isinf", X), None, False),
    _compare("isfinite", "X is neither infinite nor NaN", call("isfinite", X), None, False),
])
"""Op type -> row of the comparisons and logical ops: bool Out, Y broadcast into X (the
comparisons from dim ``axis``, the logical ops numpy's way)."""


REDUCE: dict[str, Reduction] = _table([
    # bool and int32 sum to int64 unless out_dtype says otherwise
    Reduction("reduce_sum", "the sum", X + Y, 0.0, dtypes=NUMBERS + (DType.bool,), onnx=Onnx("ReduceSum")),
    Reduction("reduce_mean", "the mean", X + Y, 0.0, X / N, dtypes=FLOATS, onnx=Onnx("ReduceMean")),
    Reduction("reduce_max", "the maximum", maximum(X, Y), -math.inf, accumulates=False, dtypes=ALL_DTYPES,
              exact_half=True, onnx=Onnx("ReduceMax")),
    Reduction("reduce_min", "the minimum", minimum(X, Y), math.inf, accumulates=False, dtypes=ALL_DTYPES,
              exact_half=True, onnx=Onnx("ReduceMin")),
    Reduction("reduce_prod", "the product", X * Y, 1.0, float16=Float16.NEVER,
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
