"""Activation expressions in OpenCL C, for the unary kernel and the fused GEMM/conv epilogue.

An ``Activation`` is ``ACT(x)`` written for REAL and REAL4 (``a0``..``a2`` its parameters,
``R(v)`` a REAL literal) with the parameters' values. The family rows (``halfway.ir.ops.families``)
give theirs; the other X -> Out ops the unary kernel runs (scale, clip, pow, dropout) are here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ...ir.ops.families import UNARY, epilogue_op

__all__ = ["Activation", "unary_activation", "fused_activation", "UNARY_OPS"]


class Activation(NamedTuple):
    expr: str
    params: tuple[float, float, float] = (0.0, 0.0, 0.0)


Attrs = Mapping[str, Any]


def _p(*values: float) -> tuple[float, float, float]:
    return tuple(float(v) for v in (*values, 0.0, 0.0, 0.0)[:3])  # type: ignore[return-value]


def _scale(attrs: Attrs) -> Activation:
    expr = "(a0 * (x) + a1)" if attrs["bias_after_scale"] else "(a0 * ((x) + a1))"
    return Activation(expr, _p(attrs["scale"], attrs["bias"]))


def _dropout(attrs: Attrs) -> Activation:
    if attrs["dropout_implementation"] == "upscale_in_train":
        return Activation("(x)")
    return Activation("(a0 * (x))", _p(1 - attrs["dropout_prob"]))


def _row(op_type: str) -> Callable[[Attrs], Activation]:
    row = UNARY[op_type]

    def activation(attrs: Attrs) -> Activation:
        return Activation(row.opencl_expr(attrs), row.opencl_params(attrs))  # type: ignore[arg-type]

    return activation


UNARY_OPS: dict[str, Callable[[Attrs], Activation]] = {
    **{op_type: _row(op_type) for op_type in UNARY},
    "scale": _scale,
    "clip": lambda a: Activation("clamp(x, a0, a1)", _p(a["min"], a["max"])),
    "pow": lambda a: Activation("pow(x, a0)", _p(a["factor"])),
    "dropout": _dropout,
}
"""Op type -> the Activation its attrs give (X -> Out ops run by the unary kernel)."""


def unary_activation(op_type: str, attrs: Attrs) -> Activation:
    return UNARY_OPS[op_type](attrs)


def fused_activation(name: str, alpha: float = 0.0, beta: float = 0.0) -> Activation:
    """The epilogue activation of fused_conv2d / fc: the row's, with the attrs
    ``halfway.ir.ops.families.epilogue_op`` reads from the fused op's parameters."""
    op = epilogue_op(name, alpha, beta)
    if op is None:
        return Activation("(x)")
    return unary_activation(*op)
