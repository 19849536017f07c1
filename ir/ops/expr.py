"""The math of the op family rows (``halfway.ir.ops.families``) as small expressions, written once
and rendered by every backend: numpy (``halfway.ir.ops.numpy_render``), OpenCL C
(``halfway.kernels.opencl.render``) and the numba loops (``halfway.kernels.numpy.jit_source``).

An expression is a tree of ``Expr`` nodes: the variables ``X`` and ``Y`` (a reduction's
accumulator and element; ``N`` its count), numbers, the op's attrs (``attr("alpha")``), and calls
of the primitives in ``PRIMITIVES`` (arithmetic through Python's operators, the comparisons
through ``lt`` ``le`` ``gt`` ``ge`` ``eq`` ``ne``)::

    X * clip(X + attr("offset"), 0, attr("threshold")) / attr("scale")      # hard_swish

``choose(attr, if_true, if_false)`` picks one of two expressions by a boolean attr (gelu's
``approximate``): a backend renders each choice apart, so no kernel branches on it. Nodes compare
and hash by value, so a subexpression written twice is one node, computed once.

A primitive is named for what it computes, not for how: ``sigmoid`` is ``1 / (1 + exp(-u))``
however each backend keeps it from overflowing, ``normal_cdf`` the normal distribution's CDF
``erfc(-u / sqrt 2) / 2``, ``log1p_exp`` ``log(1 + exp(u))``. Its renderings live with each
backend; a test checks that every backend renders every primitive.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from attrs import frozen

__all__ = ["Expr", "PRIMITIVES", "BOOL_PRIMITIVES", "X", "Y", "N", "attr", "const", "call", "choose", "lt", "le", "gt", "ge", "eq", "ne",
           "where", "maximum", "minimum", "clip", "absolute", "exp", "expm1", "tanh", "sigmoid", "normal_cdf",
           "log1p_exp", "walk", "attrs_read", "choices", "specialise", "variables"]

PRIMITIVES: dict[str, int] = {
    # arithmetic
    "add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1,
    "mod": 2,  # Python's remainder: the sign of the divisor
    "fmod": 2,  # C's remainder: the sign of the dividend
    "floordiv": 2, "pow": 2, "max": 2, "min": 2,
    # bits of integers; the shifts move them by Y places
    "bitand": 2, "bitor": 2, "bitxor": 2, "bitnot": 1, "shl": 2, "shr": 2,
    "clip": 3,  # clip(u, low, high): u kept where it lies between (NaN kept)
    "where": 3,  # where(condition, if_true, if_false)
    # comparisons and logical ops ("nonzero is true")
    "lt": 2, "le": 2, "gt": 2, "ge": 2, "eq": 2, "ne": 2,
    "and": 2, "or": 2, "xor": 2, "not": 1, "isnan": 1, "isinf": 1, "isfinite": 1,
    # functions of one value
    "abs": 1, "sign": 1, "square": 1, "reciprocal": 1, "sqrt": 1, "exp": 1, "expm1": 1, "log": 1, "log1p": 1,
    "log1p_exp": 1, "sigmoid": 1, "tanh": 1, "erf": 1, "normal_cdf": 1, "ceil": 1, "floor": 1,
    "rint": 1,  # to the nearest integer, halves to even
    "round": 1,  # to the nearest integer, halves away from zero
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "asinh": 1, "acosh": 1,
    "atanh": 1,
}
"""Primitive -> how many operands it takes."""

BOOL_PRIMITIVES = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor", "not", "isnan", "isinf",
                             "isfinite"})
"""The primitives whose value is a condition (bool), not a number."""

_LEAVES = frozenset({"var", "const", "attr"})


@frozen
class Expr:
    """A node: ``op`` is "var" (``value`` its name), "const" (``value`` the number), "attr"
    (``value`` the attr's name), "choose" (``value`` the boolean attr, ``args`` the expressions
    for true and false) or a primitive of ``PRIMITIVES`` applied to ``args``."""

    op: str
    args: tuple[Expr, ...] = ()
    value: float | str | None = None

    def __add__(self, other: Expr | float) -> Expr:
        return call("add", self, other)

    def __radd__(self, other: Expr | float) -> Expr:
        return call("add", other, self)

    def __sub__(self, other: Expr | float) -> Expr:
        return call("sub", self, other)

    def __rsub__(self, other: Expr | float) -> Expr:
        return call("sub", other, self)

    def __mul__(self, other: Expr | float) -> Expr:
        return call("mul", self, other)

    def __rmul__(self, other: Expr | float) -> Expr:
        return call("mul", other, self)

    def __truediv__(self, other: Expr | float) -> Expr:
        return call("div", self, other)

    def __rtruediv__(self, other: Expr | float) -> Expr:
        return call("div", other, self)

    def __neg__(self) -> Expr:
        return call("neg", self)

    @property
    def is_bool(self) -> bool:
        """Whether the node's value is a condition."""
        if self.op == "choose":
            return self.args[0].is_bool
        return self.op in BOOL_PRIMITIVES

    @property
    def name(self) -> str:
        """A var's or attr's name."""
        assert isinstance(self.value, str), self
        return self.value

    @property
    def number(self) -> float:
        """A const's value."""
        assert isinstance(self.value, float), self
        return self.value

    def __str__(self) -> str:
        if self.op in ("var", "attr"):
            return self.name
        if self.op == "const":
            return repr(self.number)
        if self.op == "choose":
            return f"({self.args[0]} if {self.value} else {self.args[1]})"
        return f"{self.op}({', '.join(map(str, self.args))})"


X = Expr("var", value="x")
Y = Expr("var", value="y")
N = Expr("var", value="n")


def const(value: float) -> Expr:
    return Expr("const", value=float(value))


def attr(name: str) -> Expr:
    return Expr("attr", value=name)


def _operand(value: Expr | float) -> Expr:
    return value if isinstance(value, Expr) else const(value)


def call(op: str, *args: Expr | float) -> Expr:
    """Primitive ``op`` of ``args`` (numbers become constants)."""
    if op not in PRIMITIVES:
        raise ValueError(f"unknown primitive {op!r}; known: {', '.join(PRIMITIVES)}")
    if len(args) != PRIMITIVES[op]:
        raise ValueError(f"primitive {op!r} takes {PRIMITIVES[op]} operands, got {len(args)}")
    return Expr(op, tuple(_operand(a) for a in args))


def choose(name: str, if_true: Expr, if_false: Expr) -> Expr:
    """``if_true`` where boolean attr ``name`` is set, else ``if_false``."""
    return Expr("choose", (if_true, if_false), name)


def lt(a: Expr | float, b: Expr | float) -> Expr:
    return call("lt", a, b)


def le(a: Expr | float, b: Expr | float) -> Expr:
    return call("le", a, b)


def gt(a: Expr | float, b: Expr | float) -> Expr:
    return call("gt", a, b)


def ge(a: Expr | float, b: Expr | float) -> Expr:
    return call("ge", a, b)


def eq(a: Expr | float, b: Expr | float) -> Expr:
    return call("eq", a, b)


def ne(a: Expr | float, b: Expr | float) -> Expr:
    return call("ne", a, b)


def where(condition: Expr, if_true: Expr | float, if_false: Expr | float) -> Expr:
    return call("where", condition, if_true, if_false)


def maximum(a: Expr | float, b: Expr | float) -> Expr:
    """numpy's maximum: NaN where either is NaN, ``b`` where they are equal (+0 of -0 and +0)."""
    return call("max", a, b)


def minimum(a: Expr | float, b: Expr | float) -> Expr:
    return call("min", a, b)


def clip(u: Expr | float, low: Expr | float, high: Expr | float) -> Expr:
    return call("clip", u, low, high)


def absolute(u: Expr) -> Expr:
    return call("abs", u)


def exp(u: Expr) -> Expr:
    return call("exp", u)


def expm1(u: Expr) -> Expr:
    return call("expm1", u)


def tanh(u: Expr) -> Expr:
    return call("tanh", u)


def sigmoid(u: Expr) -> Expr:
    return call("sigmoid", u)


def normal_cdf(u: Expr) -> Expr:
    return call("normal_cdf", u)


def log1p_exp(u: Expr) -> Expr:
    return call("log1p_exp", u)


# -- reading an expression ----------------------------------------------------------------------------
def walk(expr: Expr) -> Iterator[Expr]:
    """Every distinct node of ``expr``, operands before the nodes that use them."""
    seen: set[Expr] = set()

    def visit(node: Expr) -> Iterator[Expr]:
        if node in seen:
            return
        seen.add(node)
        for arg in node.args:
            yield from visit(arg)
        yield node

    yield from visit(expr)


def attrs_read(expr: Expr) -> set[str]:
    """The attrs whose values the expression computes with (not those ``choose`` reads)."""
    return {node.name for node in walk(expr) if node.op == "attr"}


def choices(expr: Expr) -> tuple[str, ...]:
    """The boolean attrs ``choose`` reads, in order of appearance."""
    return tuple(dict.fromkeys(str(node.value) for node in walk(expr) if node.op == "choose"))


def variables(expr: Expr) -> set[str]:
    return {node.name for node in walk(expr) if node.op == "var"}


def specialise(expr: Expr, attrs: Mapping[str, Any]) -> Expr:
    """``expr`` with each ``choose`` replaced by the choice ``attrs`` make."""
    if expr.op == "choose":
        return specialise(expr.args[0] if attrs[expr.name] else expr.args[1], attrs)
    if expr.op in _LEAVES or not any(node.op == "choose" for node in walk(expr)):
        return expr
    return Expr(expr.op, tuple(specialise(a, attrs) for a in expr.args), expr.value)
