"""The family rows' expressions (``halfway.ir.ops.expr``) in OpenCL C: the ``ACT(x)``, ``OP(a, b)``
and ``CMP(a, b)`` of the elementwise kernels and the GEMM/conv epilogues, and the
``INIT`` / ``ADD`` / ``FINISH`` of the reduce kernel.

``opencl_expr`` writes one C expression (the compiler finds what it repeats), its variables and
attrs by the names it is given, its numbers through ``literal``: ``R(v)``, the kernel's REAL
type, by default. Expressions of ``ACT(x)`` work on REAL and REAL4 alike (OpenCL's built-ins and
``select`` take vectors): a built-in's scalar operand is put second, where OpenCL's overloads of
``fmax`` / ``fmin`` take it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ...ir.ops.expr import Expr

__all__ = ["TEMPLATES", "opencl_expr", "real_literal", "c_literal", "float_literal"]

TEMPLATES: dict[str, str] = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})", "neg": "(-{0})",
    "mod": "({0} - floor({0} / {1}) * {1})", "fmod": "fmod({0}, {1})", "floordiv": "floor({0} / {1})",
    "pow": "pow({0}, {1})", "max": "fmax({0}, {1})", "min": "fmin({0}, {1})", "clip": "clamp({0}, {1}, {2})",
    "where": "select({2}, {1}, {0})",
    "bitand": "({0} & {1})", "bitor": "({0} | {1})", "bitxor": "({0} ^ {1})", "bitnot": "(~{0})",
    "shl": "({0} << {1})", "shr": "({0} >> {1})",
    "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})", "eq": "({0} == {1})",
    "ne": "({0} != {1})", "and": "({0} != 0 && {1} != 0)", "or": "({0} != 0 || {1} != 0)",
    "xor": "(({0} != 0) != ({1} != 0))", "not": "({0} == 0)", "isnan": "isnan({0})", "isinf": "isinf({0})",
    "isfinite": "isfinite({0})",
    "abs": "fabs({0})", "sign": "sign({0})", "square": "({0} * {0})", "reciprocal": "({one} / {0})",
    "sqrt": "sqrt({0})", "exp": "exp({0})", "expm1": "expm1({0})", "log": "log({0})", "log1p": "log1p({0})",
    "log1p_exp": "(fmax({0}, {zero}) + log1p(exp(-fabs({0}))))",
    "sigmoid": "({one} / ({one} + exp(-{0})))", "tanh": "tanh({0})", "erf": "erf({0})",
    "normal_cdf": "({half} * erfc({0} * {minus_sqrt_half}))", "ceil": "ceil({0})", "floor": "floor({0})",
    "rint": "rint({0})", "round": "round({0})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})",
    "asin": "asin({0})", "acos": "acos({0})", "atan": "atan({0})", "sinh": "sinh({0})", "cosh": "cosh({0})",
    "asinh": "asinh({0})", "acosh": "acosh({0})", "atanh": "atanh({0})",
}
"""Primitive -> its OpenCL C, of the operands ``{0}``.. and the numbers ``{zero}``, ``{one}``..."""

_NUMBERS = {"zero": 0.0, "one": 1.0, "half": 0.5, "minus_sqrt_half": -math.sqrt(0.5)}
_SCALAR_SECOND = frozenset({"max", "min"})


def _number(value: float) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    return repr(float(value))


def real_literal(value: float) -> str:
    """A number as the kernel's REAL."""
    return f"R({_number(value)})"


def float_literal(value: float) -> str:
    """A number as a float (the reduce kernel's accumulator)."""
    return f"((float){_number(value)})"


def c_literal(value: float) -> str:
    """A number as C writes it: an int where it is one (comparisons of any dtype)."""
    return str(int(value)) if math.isfinite(value) and value == int(value) else _number(value)


def opencl_expr(expr: Expr, names: Mapping[str, str], literal: Callable[[float], str] = real_literal) -> str:
    """``expr`` in OpenCL C, variables and attrs named by ``names`` (a variable parenthesised, as a
    macro's parameter), numbers by ``literal``.

    Raises:
        ValueError: ``expr`` holds a ``choose`` (``specialise`` it first) or a primitive OpenCL
            has no rendering for.
    """
    if expr.op == "var":
        return f"({names[expr.name]})"
    if expr.op == "attr":
        return names[expr.name]
    if expr.op == "const":
        return literal(expr.number)
    if expr.op not in TEMPLATES:
        raise ValueError(f"no OpenCL rendering of {expr.op!r} (in {expr})")
    args = list(expr.args)
    if expr.op in _SCALAR_SECOND and args[0].op in ("const", "attr") and args[1].op not in ("const", "attr"):
        args.reverse()
    numbers = {key: literal(value) for key, value in _NUMBERS.items()}
    return TEMPLATES[expr.op].format(*(opencl_expr(a, names, literal) for a in args), **numbers)
