"""The compiled loop that runs a chain of pointwise ops (``pointwise``) in one call: a small
register machine over float32 blocks, loaded through ``halfway.kernels.numpy.pointwise``.

``run(out, x, side, code, numbers)`` takes ``x`` (None: ``out``'s own values) a block of
``BLOCK`` elements at a time into register 0, runs every instruction of ``code`` over the block,
and stores register 0 into ``out``; ``load`` reads the same block of ``side``, the chain's other
input. An instruction is ``(opcode, d, a, b, c)``: register ``d`` becomes the
primitive of registers ``a``, ``b``, ``c`` (``SPLAT``: of ``numbers[a]``). Each instruction is a
loop over the block, so a long chain of ops on a few elements costs a few nanoseconds an op,
and a short one on many elements keeps each block in cache across the chain.

The primitives compute as ``jit_source`` renders them for the activations' loops (float32, NaN
kept by ``max``/``min``/``clip``; a condition is 1 or 0); ``exp``, ``tanh`` and the others of
``jit_math`` are its call-free float32 forms.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .jit_math import CONTRACT, erf_of, exp_of, expm1_of, log1p_exp_of, logistic, normal_cdf_of, tanh_of

__all__ = ["BLOCK", "OPCODES", "run"]

BLOCK = 256
"""Elements a register holds: a block of them goes through the whole chain at once."""

OPCODES = {name: code for code, name in enumerate((
    "load", "copy", "splat", "add", "sub", "mul", "div", "neg", "max", "min", "clip", "where", "lt", "le", "gt", "ge", "eq",
    "ne", "abs", "square", "reciprocal", "sigmoid", "exp", "expm1", "tanh", "erf", "normal_cdf", "log1p_exp", "sqrt",
    "floor", "ceil"))}
"""The instructions: the primitives of ``halfway.ir.ops.expr`` the machine computes, ``load`` (the
side input's block), ``copy`` and ``splat`` (a number into every lane)."""

(LOAD, COPY, SPLAT, ADD, SUB, MUL, DIV, NEG, MAX, MIN, CLIP, WHERE, LT, LE, GT, GE, EQ, NE, ABS, SQUARE, RECIPROCAL,
 SIGMOID, EXP, EXPM1, TANH, ERF, NORMAL_CDF, LOG1P_EXP, SQRT, FLOOR, CEIL) = (
    OPCODES.values())
_ONE, _ZERO = np.float32(1), np.float32(0)


@njit(cache=True, nogil=True, inline="always")
def _step(r, m, op, d, a, b, c, numbers):  # pragma: no cover - compiled
    if op == COPY:
        for i in range(m):
            r[d, i] = r[a, i]
    elif op == SPLAT:
        v = numbers[a]
        for i in range(m):
            r[d, i] = v
    elif op == ADD:
        for i in range(m):
            r[d, i] = r[a, i] + r[b, i]
    elif op == SUB:
        for i in range(m):
            r[d, i] = r[a, i] - r[b, i]
    elif op == MUL:
        for i in range(m):
            r[d, i] = r[a, i] * r[b, i]
    elif op == DIV:
        for i in range(m):
            r[d, i] = r[a, i] / r[b, i]
    elif op == NEG:
        for i in range(m):
            r[d, i] = -r[a, i]
    elif op == MAX:
        for i in range(m):
            u, v = r[a, i], r[b, i]
            r[d, i] = u if (u > v or u != u) else v
    elif op == MIN:
        for i in range(m):
            u, v = r[a, i], r[b, i]
            r[d, i] = u if (u < v or u != u) else v
    elif op == CLIP:
        for i in range(m):
            u, low, high = r[a, i], r[b, i], r[c, i]
            r[d, i] = low if u < low else (high if u > high else u)
    elif op == WHERE:
        for i in range(m):
            r[d, i] = r[b, i] if r[a, i] != _ZERO else r[c, i]
    elif op == LT:
        for i in range(m):
            r[d, i] = _ONE if r[a, i] < r[b, i] else _ZERO
    elif op == LE:
        for i in range(m):
            r[d, i] = _ONE if r[a, i] <= r[b, i] else _ZERO
    elif op == GT:
        for i in range(m):
            r[d, i] = _ONE if r[a, i] > r[b, i] else _ZERO
    elif op == GE:
        for i in range(m):
            r[d, i] = _ONE if r[a, i] >= r[b, i] else _ZERO
    elif op == EQ:
        for i in range(m):
            r[d, i] = _ONE if r[a, i] == r[b, i] else _ZERO
    elif op == NE:
        for i in range(m):
            r[d, i] = _ONE if r[a, i] != r[b, i] else _ZERO
    else:
        _function(r, m, op, d, a)


@njit(cache=True, nogil=True, inline="always")
def _function(r, m, op, d, a):  # pragma: no cover - compiled
    """The primitives of one operand."""
    if op == ABS:
        for i in range(m):
            r[d, i] = abs(r[a, i])
    elif op == SQUARE:
        for i in range(m):
            r[d, i] = r[a, i] * r[a, i]
    elif op == RECIPROCAL:
        for i in range(m):
            r[d, i] = _ONE / r[a, i]
    elif op == SIGMOID:
        for i in range(m):
            r[d, i] = logistic(r[a, i])
    elif op == EXP:
        for i in range(m):
            r[d, i] = exp_of(r[a, i])
    elif op == EXPM1:
        for i in range(m):
            r[d, i] = expm1_of(r[a, i])
    elif op == TANH:
        for i in range(m):
            r[d, i] = tanh_of(r[a, i])
    elif op == ERF:
        for i in range(m):
            r[d, i] = erf_of(r[a, i])
    elif op == NORMAL_CDF:
        for i in range(m):
            r[d, i] = normal_cdf_of(r[a, i])
    elif op == LOG1P_EXP:
        for i in range(m):
            r[d, i] = log1p_exp_of(r[a, i])
    elif op == SQRT:
        for i in range(m):
            r[d, i] = np.sqrt(r[a, i])
    elif op == FLOOR:
        for i in range(m):
            r[d, i] = np.floor(r[a, i])
    elif op == CEIL:
        for i in range(m):
            r[d, i] = np.ceil(r[a, i])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def run(out, x, side, code, numbers, registers):  # pragma: no cover - compiled
    """``out = chain(x, side)``, a block at a time (see the module's docstring); ``side`` is the
    chain's other input (as large as ``x``; empty where none of its ops has one), ``registers``
    the number of registers ``code`` uses."""
    source = out if x is None else x
    r = np.empty((registers, BLOCK), np.float32)
    n = out.size
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        for i in range(m):
            r[0, i] = source[start + i]
        for k in range(code.shape[0]):
            if code[k, 0] == LOAD:
                for i in range(m):
                    r[code[k, 1], i] = side[start + i]
            else:
                _step(r, m, code[k, 0], code[k, 1], code[k, 2], code[k, 3], code[k, 4], numbers)
        for i in range(m):
            out[start + i] = r[0, i]
