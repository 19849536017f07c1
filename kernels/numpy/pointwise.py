"""Pointwise ops as expressions, and chains of them run as one compiled call.

A numpy kernel that computes its output element by element from float32 inputs of its own shape,
with numbers fixed at prepare (a unary family row with its attrs, ``scale`` without tensor inputs,
a binary row without broadcasting), carries its math as an expression in ``X`` (and ``Y``)
(``with_pointwise``; ``pointwise_of`` reads it). The numpy backend runs a run of such ops, each
reading the one before it and all of them at most one other input (the side input), as one call
of ``compiled_chain``: numba's register machine (``jit_pointwise``) over the chain's instructions.
numpy spends a ufunc call (about half a microsecond) per op however small the tensor; the chain
spends a few nanoseconds an op on small tensors, and one pass over memory on large ones.

The machine computes each primitive in float32 as the activations' compiled loops do
(``jit_source``): arithmetic and comparisons are numpy's bit for bit, ``exp``, ``tanh`` and the
like ``jit_math``'s float32 forms. An expression with a primitive it lacks, or a sigmoid of more
than ``X`` (computed in float64 by the activations' loops), is no chain's (``compile_chain``
returns None) and its op runs alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.expr import Expr, X, Y, choices, const, specialise, walk
from ...ir.ops.families import BINARY, UNARY
from ..registry import Kernel
from .jit import pointwise_machine
from .threads import run_parts, spans

__all__ = ["Program", "Chain", "with_pointwise", "pointwise_of", "row_expr", "binary_expr", "swapped", "compile_chain", "chainable",
           "compiled_chain"]

Program = tuple[np.ndarray, np.ndarray, int]
"""A chain's instructions (int32, one ``(opcode, d, a, b, c)`` a row), its numbers (float32) and
how many registers it uses."""


def with_pointwise(kernel: Kernel, expr: Expr | None) -> Kernel:
    """``kernel`` in a ``functools.partial`` carrying ``expr`` (its math in ``X``, numbers fixed)
    for the chains: the kernel itself may be a ufunc, or a function other specs share."""
    if expr is None:
        return kernel
    carrier = functools.partial(kernel)
    carrier.pointwise = expr  # type: ignore[attr-defined]
    return carrier


def pointwise_of(kernel: Any) -> Expr | None:
    """The expression ``with_pointwise`` gave ``kernel``, or None."""
    return getattr(kernel, "pointwise", None)


def row_expr(op_type: str, attrs: Mapping[str, Any], dtype: DType = DType.float32) -> Expr | None:
    """The math of unary family row ``op_type`` on float32 with ``attrs`` as numbers, or None
    (another op, or another dtype)."""
    row = UNARY.get(op_type)
    if row is None or dtype is not DType.float32:
        return None
    values = {**{a.name: a.default for a in row.attrs}, **attrs}
    return _numbers(specialise(row.expr, {name: bool(values[name]) for name in choices(row.expr)}), values)


def binary_expr(op_type: str, dtype: DType, same_shapes: bool) -> Expr | None:
    """The math of binary family row ``op_type`` on float32 in ``X`` and ``Y``, where its inputs
    and output have one shape (``same_shapes``); else None."""
    row = BINARY.get(op_type)
    return row.expr if row is not None and dtype is DType.float32 and same_shapes else None


def swapped(expr: Expr) -> Expr:
    """``expr`` with ``X`` and ``Y`` swapped: a binary op's math where the chain's value is its ``Y``."""
    if expr in (X, Y):
        return Y if expr == X else X
    if not expr.args:
        return expr
    return Expr(expr.op, tuple(swapped(a) for a in expr.args), expr.value)


def _numbers(expr: Expr, values: Mapping[str, Any]) -> Expr:
    """``expr`` with each attr replaced by its value, as float32 computes with it."""
    if expr.op == "attr":
        return const(float(np.float32(values[expr.name])))
    if not expr.args:
        return expr
    return Expr(expr.op, tuple(_numbers(a, values) for a in expr.args), expr.value)


def compile_chain(exprs: Sequence[Expr], opcodes: Mapping[str, int]) -> Program | None:
    """The instructions computing ``exprs`` one after the other on register 0 (each expression's
    ``X`` is the one before's value, its ``Y`` the chain's side input), or None where one has a
    primitive ``opcodes`` lacks."""
    code: list[tuple[int, int, int, int, int]] = []
    numbers: list[float] = []
    registers = 1
    for expr in exprs:
        names: dict[Expr, int] = {X: 0}
        for node in walk(expr):
            if node in names:
                continue
            if node.op == "const":
                numbers.append(node.number)
                operands = [len(numbers) - 1]
                op = "splat"
            elif node == Y:
                operands, op = [], "load"
            elif node.op not in opcodes or node.op == "sigmoid" and node.args[0] != X:
                return None
            else:
                operands, op = [names[a] for a in node.args], node.op
            names[node] = len(names)
            a, b, c = (operands + [0, 0, 0])[:3]
            code.append((opcodes[op], names[node], a, b, c))
        registers = max(registers, len(names))
        if names[expr] != 0:
            code.append((opcodes["copy"], 0, names[expr], 0, 0))
    return (np.array(code, np.int32).reshape(-1, 5), np.array(numbers or [0.0], np.float32), registers)


def chainable(expr: Expr) -> bool:
    """Whether ``expr`` can be part of a compiled chain (numba is there, and it compiles)."""
    machine = pointwise_machine()
    return machine is not None and compile_chain([expr], machine.OPCODES) is not None


Chain = Callable[[np.ndarray, np.ndarray | None], np.ndarray | None]
"""``run(x, side)``: a compiled chain (``compiled_chain``)."""

_NO_SIDE = np.empty(0, np.float32)


def compiled_chain(exprs: Sequence[Expr]) -> Chain | None:
    """``run(x, side)``: a new array of ``exprs`` applied in turn to ``x`` (their ``Y`` the side
    input ``side``, None where they have none), computed in one compiled call (cut into parts for
    the numpy backend's threads where ``x`` is large); None from ``run`` where the arrays do not
    suit the machine (float32, C-contiguous, ``side`` of ``x``'s shape). None where numba is
    missing or an expression does not compile (``compile_chain``)."""
    machine = pointwise_machine()
    program = None if machine is None else compile_chain(exprs, machine.OPCODES)
    if machine is None or program is None:
        return None
    code, numbers, registers = program
    loop, block = machine.run, machine.BLOCK

    def run(x: np.ndarray, side: np.ndarray | None = None) -> np.ndarray | None:
        if not (_suits(x) and (side is None or _suits(side) and side.shape == x.shape)):
            return None
        out = np.empty_like(x)
        flat, source = out.reshape(-1), x.reshape(-1)
        other = _NO_SIDE if side is None else side.reshape(-1)
        cuts = spans(flat.size, len(code), align=block)
        if len(cuts) == 1:
            loop(flat, source, other, code, numbers, registers)
        else:
            run_parts([functools.partial(loop, flat[a:b], source[a:b], other[a:b] if side is not None else other,
                                         code, numbers, registers) for a, b in cuts])
        return out

    return run


def _suits(array: np.ndarray) -> bool:
    return array.dtype == np.float32 and array.flags.c_contiguous
