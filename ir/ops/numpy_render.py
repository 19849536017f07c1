"""The family rows' expressions (``halfway.ir.ops.expr``) rendered as numpy functions: a row's
``numpy`` is the function made here from its expression, once, at import.

An expression that is one ufunc of the row's variables in order (``X + Y``, ``tanh(X)``) renders
as that ufunc itself (the kernels write in place through its ``out``). Any other becomes the
source of a function, one numpy call a node (``numpy_source`` shows it), which takes the row's
attrs by name and, where the expression's last call takes one, ``out``::

    def hard_swish(x, threshold, scale, offset, out=None):
        own = type(x) is np.ndarray and x.ndim > 0
        t0 = np.add(x, offset)
        t1 = np.clip(t0, 0, threshold, out=t0 if own else None)
        t2 = np.multiply(x, t1, out=t1 if own else None)
        return np.divide(t2, scale, out=out)

A call writes into an operand's array where that operand is a temporary no later call reads, of
its kind (numbers or conditions), in a function of one variable (where every array has X's
shape): so an expression of k calls allocates what it needs at once, not k arrays, and the last
call writes into a dead temporary when no ``out`` is given. ``own`` is False for 0-d inputs,
whose results numpy gives as scalars. Each ``choose`` becomes an ``if`` on its attr.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import numpy_math
from .expr import Expr, choices, specialise, walk

__all__ = ["UFUNCS", "FUNCTIONS", "numpy_function", "numpy_source", "reduction_function", "one_pass"]

UFUNCS: dict[str, str] = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "neg": "negative", "mod": "mod",
    "fmod": "fmod", "floordiv": "floor_divide", "pow": "power", "max": "maximum", "min": "minimum",
    "bitand": "bitwise_and", "bitor": "bitwise_or", "bitxor": "bitwise_xor", "bitnot": "invert",
    "shl": "left_shift", "shr": "right_shift",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
    "and": "logical_and", "or": "logical_or", "xor": "logical_xor", "not": "logical_not", "isnan": "isnan",
    "isinf": "isinf", "isfinite": "isfinite", "abs": "abs", "sign": "sign", "square": "square",
    "reciprocal": "reciprocal", "sqrt": "sqrt", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p",
    "tanh": "tanh", "ceil": "ceil", "floor": "floor", "rint": "rint", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh",
}
"""Primitive -> the numpy ufunc computing it."""

FUNCTIONS: dict[str, tuple[str, bool]] = {
    "clip": ("np.clip", True),
    "where": ("np.where", False),
    "sigmoid": ("nm.sigmoid", True),
    "log1p_exp": ("nm.log1p_exp", True),
    "erf": ("nm.erf", False),
    "normal_cdf": ("nm.normal_cdf", False),
    "round": ("nm.round_half_away", False),
}
"""Primitive -> (the function computing it, whether it takes ``out``) for the primitives that are
no ufunc (``halfway.ir.ops.numpy_math``'s where numpy has none)."""

_NAMESPACE: dict[str, Any] = {"np": np, "nm": numpy_math, "math": math}


def _callee(op: str) -> tuple[str, bool]:
    if op in UFUNCS:
        return f"np.{UFUNCS[op]}", True
    if op in FUNCTIONS:
        return FUNCTIONS[op]
    raise ValueError(f"primitive {op!r} has no numpy rendering")


def _literal(value: float) -> str:
    """A Python number, which numpy treats as weak (the result keeps the array's dtype): an int
    where it is one (ints keep int arrays int)."""
    if not math.isfinite(value):
        return f"float({str(value)!r})"
    if value == int(value) and abs(value) < 2 ** 53 and math.copysign(1, value) > 0:
        return repr(int(value))
    return repr(value)


class _Body:
    """The statements computing one expression (no ``choose``) into temporaries ``t0``, ``t1``..."""

    def __init__(self, expr: Expr, names: dict[str, str], reuse: bool, root_out: bool) -> None:
        self.lines: list[str] = []
        nodes = list(walk(expr))
        uses = Counter(arg for node in nodes for arg in node.args)
        value: dict[Expr, str] = {}
        temps: set[Expr] = set()
        for index, node in enumerate(nodes):
            if node.op in ("var", "attr"):
                value[node] = names[node.name]
                continue
            if node.op == "const":
                value[node] = _literal(node.number)
                continue
            callee, takes_out = _callee(node.op)
            for arg in node.args:
                uses[arg] -= 1
            dead = [a for a in dict.fromkeys(node.args) if a in temps and uses[a] == 0 and a.is_bool == node.is_bool]
            args = ", ".join(value[a] for a in node.args)
            last = node is expr
            if last and root_out:
                if reuse and dead:
                    self.lines += ["if out is None and own:", f"    out = {value[dead[0]]}"]
                self.lines.append(f"return {callee}({args}, out=out)")
            elif last:
                self.lines.append(f"return {callee}({args})")
            else:
                name = f"t{index}"
                target = f", out={value[dead[0]]} if own else None" if reuse and takes_out and dead else ""
                self.lines.append(f"{name} = {callee}({args}{target})")
                value[node] = name
                temps.add(node)
        if expr.op in ("var", "attr", "const"):
            self.lines.append(f"return np.array({value[expr]})")


def _variants(expr: Expr) -> list[tuple[dict[str, bool], Expr]]:
    """Every choice of the ``choose`` attrs, and the expression it makes."""
    names = choices(expr)
    picks = [dict(zip(names, bits)) for bits in _bits(len(names))]
    return [(pick, specialise(expr, pick)) for pick in picks]


def _bits(count: int) -> list[tuple[bool, ...]]:
    return [tuple(bool(i >> b & 1) for b in range(count)) for i in range(2 ** count)][::-1]


def _writes_out(expr: Expr) -> bool:
    return expr.op not in ("var", "attr", "const") and _callee(expr.op)[1]


def numpy_source(name: str, expr: Expr, inputs: Sequence[str], attrs: Sequence[str]) -> str:
    """The source of the numpy function ``name(*inputs, *attrs[, out=None])`` computing ``expr``."""
    variants = _variants(expr)
    root_out = all(_writes_out(e) for _, e in variants)
    reuse = len(inputs) == 1
    params = [*inputs, *attrs, *(["out=None"] if root_out else [])]
    lines = [f"def {name}({', '.join(params)}):"]
    if reuse:
        lines.append(f"    own = type({inputs[0]}) is np.ndarray and {inputs[0]}.ndim > 0")
    names = {**{v: v for v in inputs}, **{a: a for a in attrs}}
    for pick, variant in variants:
        body = _Body(variant, names, reuse, root_out).lines
        condition = " and ".join(a if bit else f"not {a}" for a, bit in pick.items())
        if condition and (pick, variant) != variants[-1]:
            lines.append(f"    if {condition}:")
            lines += [f"        {line}" for line in body]
        else:
            lines += [f"    {line}" for line in body]
    if reuse and not any("own" in line for line in lines[2:]):
        del lines[1]
    return "\n".join(lines) + "\n"


def _lone_ufunc(expr: Expr, inputs: Sequence[str]) -> np.ufunc | None:
    """The ufunc ``expr`` is, where it is one ufunc of the variables ``inputs`` in order."""
    if expr.op in UFUNCS and [a.op for a in expr.args] == ["var"] * len(inputs) and \
            [a.name for a in expr.args] == list(inputs):
        ufunc: np.ufunc = getattr(np, UFUNCS[expr.op])
        return ufunc
    return None


def numpy_function(name: str, expr: Expr, inputs: Sequence[str], attrs: Sequence[str]) -> Callable[..., Any]:
    """``expr`` as a numpy function of ``inputs`` and (by name) ``attrs``: a ufunc, or the function
    of ``numpy_source``."""
    ufunc = _lone_ufunc(expr, inputs)
    if ufunc is not None:
        return ufunc
    namespace = dict(_NAMESPACE)
    exec(compile(numpy_source(name, expr, inputs, attrs), f"<{name} numpy>", "exec"), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def one_pass(expr: Expr) -> bool:
    """Whether numpy computes ``expr`` in one ufunc call (every choice of it)."""
    return all(e.op in UFUNCS and all(a.op in ("var", "attr", "const") for a in e.args) for _, e in _variants(expr))


def reduction_function(name: str, combine: Expr, finish: Expr | None, accumulates: bool,
                       init: float = 0.0) -> Callable[..., Any]:
    """The numpy function ``name(x, axis=None, keepdims=False[, dtype=None])`` of a reduction whose
    accumulator ``X`` takes each element ``Y`` as ``combine`` (one ufunc of X and Y, which numpy
    reduces), then becomes ``finish`` of ``X`` and the count ``N``. An empty x reduces to ``init``
    (an integer or bool x to its type's value nearest it: ONNX's ReduceMax of nothing is -inf or
    the type's least value), which ufuncs without an identity (maximum, minimum) need to be told."""
    ufunc = _lone_ufunc(combine, ("x", "y"))
    if ufunc is None:
        raise ValueError(f"{name}: a reduction combines by one ufunc of x and y, not {combine}")
    dtype = ", dtype=None" if accumulates else ""
    lines = [f"def {name}(x, axis=None, keepdims=False{dtype}):",
             f"    acc = np.{ufunc.__name__}.reduce(x, axis=axis, keepdims=keepdims{', dtype=dtype' if accumulates else ''}"
             f"{'' if ufunc.identity is not None else ', **_empty(x, init)'})"]
    if finish is not None:
        lines.append("    n = _count(np.shape(x), axis)")
        lines += [f"    {line}" for line in _Body(finish, {"x": "acc", "n": "n"}, False, False).lines]
    else:
        lines.append("    return acc")
    namespace = {**_NAMESPACE, "_count": _count, "_empty": _empty, "init": init}
    exec(compile("\n".join(lines) + "\n", f"<{name} numpy>", "exec"), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def _empty(x: Any, init: float) -> dict[str, Any]:
    """ufunc.reduce's ``initial`` for an empty ``x``: ``init``, or its integer type's bound nearest it."""
    if np.size(x):
        return {}
    kind = np.asarray(x).dtype
    if kind == np.bool_:
        return {"initial": init > 0}
    if kind.kind in "iu":
        return {"initial": np.iinfo(kind).min if init < 0 else np.iinfo(kind).max}
    return {"initial": init}


def _count(shape: tuple[int, ...], axis: int | tuple[int, ...] | None) -> int:
    """How many elements a reduction over ``axis`` takes into each result."""
    if axis is None:
        return math.prod(shape)
    return math.prod(shape[a] for a in ((axis,) if isinstance(axis, int) else axis))
