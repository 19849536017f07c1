"""Activation expressions in OpenCL C, for the unary kernel and the fused GEMM/conv epilogue.

Each entry gives ``ACT(x)`` written for REAL and REAL4 (``a0``..``a2`` are its parameters,
``R(v)`` a REAL literal) and how the parameters come from the op's attrs. The formulas are the
numpy kernels' (``kernels/numpy/math.py``; the fused ones ``make_activation`` in
``kernels/numpy/conv.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from halfway.kernels.opencl.base import Unsupported

__all__ = ["Activation", "unary_activation", "fused_activation", "UNARY_OPS"]


class Activation(NamedTuple):
    expr: str
    params: tuple[float, float, float] = (0.0, 0.0, 0.0)


Attrs = Mapping[str, Any]
_SIGMOID = "(R(1) / (R(1) + exp(-(x))))"


def _p(*values: float) -> tuple[float, float, float]:
    return tuple(float(v) for v in (*values, 0.0, 0.0, 0.0)[:3])  # type: ignore[return-value]


def _gelu(attrs: Attrs) -> Activation:
    if attrs["approximate"]:
        u = "((x) + R(0.044715) * (x) * (x) * (x))"
        return Activation(f"((x) / (R(1) + exp(R({-2 * math.sqrt(2 / math.pi)!r}) * {u})))")
    return Activation(f"(R(0.5) * (x) * erfc((x) * R({-math.sqrt(0.5)!r})))")


def _scale(attrs: Attrs) -> Activation:
    expr = "(a0 * (x) + a1)" if attrs["bias_after_scale"] else "(a0 * ((x) + a1))"
    return Activation(expr, _p(attrs["scale"], attrs["bias"]))


def _dropout(attrs: Attrs) -> Activation:
    if attrs["dropout_implementation"] == "upscale_in_train":
        return Activation("(x)")
    return Activation("(a0 * (x))", _p(1 - attrs["dropout_prob"]))


UNARY_OPS: dict[str, Callable[[Attrs], Activation]] = {
    "relu": lambda a: Activation("fmax(x, R(0))"),
    "relu6": lambda a: Activation("clamp(x, R(0), a0)", _p(a["threshold"])),
    "leaky_relu": lambda a: Activation("(fmax(x, R(0)) + a0 * fmin(x, R(0)))", _p(a["alpha"])),
    "sigmoid": lambda a: Activation(_SIGMOID),
    "tanh": lambda a: Activation("tanh(x)"),
    "hard_swish": lambda a: Activation("((x) * clamp((x) + a2, R(0), a0) / a1)",
                                       _p(a["threshold"], a["scale"], a["offset"])),
    "hard_sigmoid": lambda a: Activation("clamp(a0 * (x) + a1, R(0), R(1))", _p(a["slope"], a["offset"])),
    "swish": lambda a: Activation("((x) / (R(1) + exp(-a0 * (x))))", _p(a["beta"])),
    "silu": lambda a: Activation(f"((x) * {_SIGMOID})"),
    "gelu": _gelu,
    "softplus": lambda a: Activation("select(log1p(exp(a0 * (x))) / a0, (x), a0 * (x) > a1)",
                                     _p(a["beta"], a["threshold"])),
    "exp": lambda a: Activation("exp(x)"),
    "log": lambda a: Activation("log(x)"),
    "sqrt": lambda a: Activation("sqrt(x)"),
    "abs": lambda a: Activation("fabs(x)"),
    "scale": _scale,
    "clip": lambda a: Activation("clamp(x, a0, a1)", _p(a["min"], a["max"])),
    "pow": lambda a: Activation("pow(x, a0)", _p(a["factor"])),
    "dropout": _dropout,
}
"""Op type -> the Activation its attrs give (X -> Out ops run by the unary kernel)."""


def unary_activation(op_type: str, attrs: Attrs) -> Activation:
    return UNARY_OPS[op_type](attrs)


def fused_activation(name: str, alpha: float = 0.0, beta: float = 0.0) -> Activation:
    """The epilogue activation of fused_conv2d / fc, as ``make_activation`` defines it."""
    if name == "":
        return Activation("(x)")
    if name in ("relu", "leaky_relu"):
        return Activation("(fmax(x, R(0)) + a0 * fmin(x, R(0)))", _p(alpha)) if alpha else Activation("fmax(x, R(0))")
    if name == "relu6":
        return Activation("clamp(x, R(0), a0)", _p(beta if beta > 0 else alpha if alpha > 0 else 6.0))
    if name == "sigmoid":
        return Activation(_SIGMOID)
    if name == "swish":
        return Activation("((x) / (R(1) + exp(-a0 * (x))))", _p(alpha if alpha != 0 else 1.0))
    if name == "hard_swish":
        return Activation("((x) * clamp(a0 * (x) + a1, R(0), R(1)))",
                          _p(alpha if alpha != 0 else 1 / 6, beta if beta != 0 else 0.5))
    raise Unsupported(f"no OpenCL epilogue for activation {name!r}")
