"""Pattern helpers for elementwise arithmetic that exporters write in any operand order.

``commuted("elementwise_mul", a, b)`` is both ``mul(X=a, Y=b)`` and ``mul(X=b, Y=a)``;
``products(a, b, c)`` is ``a * b * c`` as two multiplications in every grouping and order (12
patterns per choice of operands). Operands are lists of alternatives; the results multiply out.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from halfway.passes.pattern import OpPattern, VarPattern, op

__all__ = ["Operand", "commuted", "products"]

Operand = OpPattern | VarPattern


def commuted(types: str, a: Sequence[Operand], b: Sequence[Operand], name: str | None = None) -> list[OpPattern]:
    """``types(X=a, Y=b)`` and ``types(X=b, Y=a)`` for every alternative of ``a`` and ``b``."""
    return [op(types, name, X=x, Y=y) for first, second in ((a, b), (b, a)) for x, y in itertools.product(first, second)]


def products(a: Sequence[Operand], b: Sequence[Operand], c: Sequence[Operand], name: str | None = None) -> list[OpPattern]:
    """``a * b * c`` as ``elementwise_mul``s in every grouping and operand order; ``name`` names the outer one."""
    found = []
    for first, second, third in ((a, b, c), (a, c, b), (b, c, a)):
        found += commuted("elementwise_mul", commuted("elementwise_mul", first, second), third, name)
    return found
