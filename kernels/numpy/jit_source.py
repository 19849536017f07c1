"""The unary family rows' expressions (``halfway.ir.ops.expr``) as the source of the scalar
functions the compiled loops apply (``jit_act``): every float row, and each choice of a row's
boolean attrs (``gelu`` and ``gelu.approximate``) apart, is a function of one float32 and the
row's attrs a0..a2 (those it computes with, in the row's order of attrs), one statement a node::

    def act_hard_swish(x, act, a0, a1, a2):  # threshold, scale, offset
        t2 = x + a2
        t5 = c0 if t2 < c0 else (a0 if t2 > a0 else t2)
        t6 = x * t5
        return t6 / a1

This module needs no numba: ``jit`` hashes ``activation_source()`` into its cache's key, so a
changed row compiles anew.

The loops compute in float32 as numpy's float32 passes do (numbers are float32 constants,
``c0``..); ``max``, ``min`` and ``clip`` are numpy's (NaN kept, ``max(-0, 0)`` +0). Some
primitives have float32 forms of their own in ``jit_math``, each without a call, so that the
loops vectorise: ``sigmoid`` (``logistic``, exp a polynomial), ``normal_cdf``, ``erf``, ``exp``,
``expm1``, ``tanh`` and ``log1p_exp``.
sigmoid's argument, where it is more than a variable, is computed in float64 and reaches exp as a
float32 pair (``logistic_wide``): sigmoid(beta x) or GELU's tanh form keep 1e-6 where
float32's rounding of the argument would lose it far into the tails. Other functions (log,
sin...) are numpy's on float32 scalars (calls: such rows compute in one pass, not in vector
lanes).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.expr import Expr, attrs_read, choices, specialise, walk
from ...ir.ops.families import UNARY
from ...ir.ops.family import Elementwise

__all__ = ["NO_ACTIVATION", "Rendered", "activation_key", "activation_source", "marker", "vectorises"]

NO_ACTIVATION = "(none)"
"""The key of the identity: an epilogue without activation."""

Operands = list[str]
_TEMPLATES: dict[str, Callable[[Operands], str]] = {
    "add": lambda a: f"{a[0]} + {a[1]}", "sub": lambda a: f"{a[0]} - {a[1]}", "mul": lambda a: f"{a[0]} * {a[1]}",
    "div": lambda a: f"{a[0]} / {a[1]}", "neg": lambda a: f"-{a[0]}",
    "lt": lambda a: f"{a[0]} < {a[1]}", "le": lambda a: f"{a[0]} <= {a[1]}", "gt": lambda a: f"{a[0]} > {a[1]}",
    "ge": lambda a: f"{a[0]} >= {a[1]}", "eq": lambda a: f"{a[0]} == {a[1]}", "ne": lambda a: f"{a[0]} != {a[1]}",
    "where": lambda a: f"{a[1]} if {a[0]} else {a[2]}",
    "max": lambda a: f"{a[0]} if ({a[0]} > {a[1]} or {a[0]} != {a[0]}) else {a[1]}",
    "min": lambda a: f"{a[0]} if ({a[0]} < {a[1]} or {a[0]} != {a[0]}) else {a[1]}",
    "clip": lambda a: f"{a[1]} if {a[0]} < {a[1]} else ({a[2]} if {a[0]} > {a[2]} else {a[0]})",
    "abs": lambda a: f"abs({a[0]})", "square": lambda a: f"{a[0]} * {a[0]}", "reciprocal": lambda a: f"one / {a[0]}",
    "round": lambda a: f"np.copysign(np.floor(abs({a[0]}) + half), {a[0]})",
    "sigmoid": lambda a: f"logistic({a[0]})", "normal_cdf": lambda a: f"normal_cdf_of({a[0]})",
    "erf": lambda a: f"erf_of({a[0]})", "log1p_exp": lambda a: f"log1p_exp_of({a[0]})",
    "exp": lambda a: f"exp_of({a[0]})", "expm1": lambda a: f"expm1_of({a[0]})", "tanh": lambda a: f"tanh_of({a[0]})",
    **{op: (lambda name: lambda a: f"np.{name}({a[0]})")(name) for op, name in {
        "sign": "sign", "sqrt": "sqrt", "ceil": "ceil", "floor": "floor", "rint": "rint",
        "log": "log", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
        "asin": "arcsin", "acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh", "asinh": "arcsinh",
        "acosh": "arccosh", "atanh": "arctanh"}.items()},
}
"""Primitive -> its float32 statement's right-hand side, of its operands' names."""

_CALL_FREE = frozenset({"add", "sub", "mul", "div", "neg", "lt", "le", "gt", "ge", "eq", "ne", "where", "max", "min",
                        "clip", "abs", "square", "reciprocal", "round", "sigmoid", "normal_cdf", "erf", "sign", "sqrt",
                        "ceil", "floor", "rint", "exp", "expm1", "tanh", "log1p_exp"})
"""The primitives LLVM computes in vector lanes (no call of a library function)."""

_WIDE = frozenset({"add", "sub", "mul", "div", "neg"})
"""The primitives a float64 argument (of sigmoid) is computed with; other nodes in it are float32."""


class Rendered(NamedTuple):
    """A row's function for one choice of its boolean attrs: its key (the row's name, then
    ``.attr`` for each choice set), the attrs it takes as a0..a2, its expression."""

    key: str
    params: tuple[str, ...]
    expr: Expr


def marker(key: str) -> np.dtype:
    """The value standing for activation ``key`` in the compiled loops' arguments (``jit_act``): a
    dtype of one field named ``key``, whose numba type names the activation."""
    return np.dtype([(key, np.float32)])


def _number(value: float) -> str:
    return repr(value) if math.isfinite(value) else f"float({str(value)!r})"


def _identifier(key: str) -> str:
    return "act_" + key.replace(".", "__")


class _Function:
    """The statements of one row's function: float32 temporaries ``t<i>``, float64 ones ``w<i>``."""

    def __init__(self, rendered: Rendered, constants: dict[str, str]) -> None:
        self.names = {"x": "x", **{name: f"a{i}" for i, name in enumerate(rendered.params)}}
        self.constants, self.lines = constants, list[str]()
        self.index = {node: i for i, node in enumerate(walk(rendered.expr))}
        self.done: dict[Expr, str] = {}
        self.wide: dict[Expr, str] = {}
        result = self.narrow(rendered.expr)
        self.lines.append(f"return {result}")

    def constant(self, value: float) -> str:
        """The name of float32 constant ``value`` (by its repr: -0.0 is not 0.0)."""
        return self.constants.setdefault(_number(value), f"c{len(self.constants)}")

    def narrow(self, node: Expr) -> str:
        """The float32 (or bool) value of ``node``: a name."""
        if node in self.done:
            return self.done[node]
        if node.op in ("var", "attr"):
            return self.names[node.name]
        if node.op == "const":
            return self.constant(node.number)
        if node.op not in _TEMPLATES:
            raise ValueError(f"primitive {node.op!r} has no numba rendering")
        if node.op == "sigmoid" and node.args[0].op not in ("var", "attr", "const"):
            text = f"logistic_wide({self.float64(node.args[0])})"
        else:
            text = _TEMPLATES[node.op]([self.narrow(a) for a in node.args])
        name = f"t{self.index[node]}"
        self.lines.append(f"{name} = {text}")
        self.done[node] = name
        return name

    def float64(self, node: Expr) -> str:
        """The float64 value of ``node``: arithmetic on float64 operands, the rest float32's."""
        if node in self.wide:
            return self.wide[node]
        if node.op == "const":
            return _number(node.number)
        if node.op not in _WIDE:
            return f"float({self.narrow(node)})"
        text = _TEMPLATES[node.op]([self.float64(a) for a in node.args])
        name = f"w{self.index[node]}"
        self.lines.append(f"{name} = {text}")
        self.wide[node] = name
        return name


def _choices(row: Elementwise) -> list[dict[str, bool]]:
    names = choices(row.expr)
    return [{name: bool(i >> b & 1) for b, name in enumerate(names)} for i in range(2 ** len(names))]


def _rendered(row: Elementwise, pick: Mapping[str, Any]) -> Rendered | None:
    expr = specialise(row.expr, pick)
    used = attrs_read(expr)
    params = tuple(a.name for a in row.attrs if a.name in used)
    if len(params) > 3 or any(n.op not in ("var", "attr", "const") and n.op not in _TEMPLATES for n in walk(expr)):
        return None
    key = row.name + "".join(f".{name}" for name, bit in pick.items() if bit)
    return Rendered(key, params, expr)


@functools.cache
def _table() -> dict[str, Rendered]:
    """Key -> function of every float unary row and choice that renders."""
    table: dict[str, Rendered] = {}
    for row in UNARY.values():
        if DType.float32 not in row.dtypes:
            continue
        for pick in _choices(row):
            rendered = _rendered(row, pick)
            if rendered is not None:
                table[rendered.key] = rendered
    return table


def activation_key(op_type: str, attrs: Mapping[str, Any]) -> Rendered | None:
    """The function computing unary row ``op_type`` with ``attrs`` ("": ``NO_ACTIVATION``), or
    None where the row has none (it computes with more than 3 attrs, or with a primitive the
    loops lack)."""
    if op_type == "":
        return Rendered(NO_ACTIVATION, (), Expr("var", value="x"))
    row = UNARY.get(op_type)
    if row is None:
        return None
    defaults = {spec.name: spec.default for spec in row.attrs}  # attrs may leave defaults out
    pick = {name: bool(attrs.get(name, defaults.get(name))) for name in choices(row.expr)}
    key = op_type + "".join(f".{name}" for name, bit in pick.items() if bit)
    return _table().get(key)


def vectorises(rendered: Rendered) -> bool:
    """Whether the function computes without calls, in vector lanes."""
    return all(n.op in ("var", "attr", "const") or n.op in _CALL_FREE for n in walk(rendered.expr))


@functools.cache
def activation_source() -> str:
    """The source of every row's function (``act_<key>``), and ``FUNCTIONS``: key -> function."""
    constants: dict[str, str] = {}
    bodies: list[str] = []
    for key, rendered in _table().items():
        lines = _Function(rendered, constants).lines
        params = ", ".join(rendered.params) or "no attrs"
        bodies.append(f"def {_identifier(key)}(x, act, a0, a1, a2):  # {params}\n"
                      + "".join(f"    {line}\n" for line in lines))
    head = [f"{name} = np.float32({value})" for value, name in constants.items()]
    table = ", ".join(f"{key!r}: {_identifier(key)}" for key in _table())
    return "\n".join(head) + "\n\n\n" + "\n\n".join(bodies) + f"\n\nFUNCTIONS = {{{table}}}\n"
