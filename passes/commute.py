"""Pattern helpers for elementwise arithmetic that exporters write in any operand order.

``commuted("elementwise_mul", a, b)`` is ``mul(X=a, Y=b)`` matching ``mul(X=b, Y=a)`` too (a
commuting pattern op, ``passes.pattern``); ``products(a, b, c)`` is ``a * b * c`` as two
multiplications in each of its three groupings, each in either order (3 patterns per choice of
operands). Operands are lists of alternatives; the results multiply out.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from .pattern import OpPattern, VarPattern, op

__all__ = ["Operand", "commuted", "products"]

Operand = OpPattern | VarPattern


def commuted(types: str, a: Sequence[Operand], b: Sequence[Operand], name: str | None = None) -> list[OpPattern]:
    """``types(X=a, Y=b)`` in either operand order for every alternative of ``a`` and ``b``."""
    return [op(types, name, commutes=True, X=x, Y=y) for x, y in itertools.product(a, b)]


def products(a: Sequence[Operand], b: Sequence[Operand], c: Sequence[Operand], name: str | None = None) -> list[OpPattern]:
    """``a * b * c`` as ``elementwise_mul``s in every grouping, either operand order; ``name`` names the outer one."""
    found = []
    for first, second, third in ((a, b, c), (a, c, b), (b, c, a)):
        found += commuted("elementwise_mul", commuted("elementwise_mul", first, second), third, name)
    return found
