"""Activation expressions in OpenCL C, for the unary kernel and the fused GEMM/conv epilogue.

An ``Activation`` is ``ACT(x)`` written for REAL and REAL4 (``a0``..``a2`` its parameters,
``R(v)`` a REAL literal) with the parameters' values. The family rows (``halfway.ir.ops.families``)
give theirs, their expressions rendered (``render``) with the attrs they compute with as the
parameters, in the rows' order of attrs; the other X -> Out ops the unary kernel runs (scale,
clip, pow, dropout) are here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ...ir.ops.expr import attrs_read, specialise
from ...ir.ops.families import UNARY, epilogue_op
from ...ir.ops.family import Elementwise
from .base import Unsupported
from .render import opencl_expr

__all__ = ["Activation", "row_activation", "unary_activation", "fused_activation", "UNARY_OPS"]


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


def row_activation(row: Elementwise, attrs: Attrs) -> Activation:
    """Unary row ``row`` with ``attrs``: its expression for ``attrs``' choices, a0..a2 the attrs it
    computes with.

    Raises:
        Unsupported: it computes with more than three attrs.
    """
    expr = specialise(row.expr, attrs)
    used = attrs_read(expr)
    params = [a.name for a in row.attrs if a.name in used]
    if len(params) > 3:
        raise Unsupported(f"{row.name} computes with {len(params)} attrs; the kernels take 3")
    names = {"x": "x", **{name: f"a{i}" for i, name in enumerate(params)}}
    return Activation(opencl_expr(expr, names), _p(*(attrs[name] for name in params)))


def _row(op_type: str) -> Callable[[Attrs], Activation]:
    row = UNARY[op_type]
    return lambda attrs: row_activation(row, attrs)


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
