"""``cancel_casts``: remove the casts of block 0 that change nothing or undo each other.

The cases, repeated until none applies:

1. A cast to the dtype its input already has is removed.
2. Two casts of one var to one dtype: the later one's readers read the earlier one's output,
   and the later one is removed (the var must not be written between them).
3. A cast pair ``x -> cast(A->B) -> y -> cast(B->A) -> z``: z's readers read x, the second cast
   is removed, and the first one too once nothing reads y.

   When B holds every value of A (float16->float32->float16, int32->int64->int32, bool->int32->
   bool, bfloat16->float32->bfloat16), or both are integers and B is at least as wide (uint8->
   int8->uint8 wraps back), the round trip is exact and the pair always cancels. When
   A and B are both floating and B is narrower (float32->float16->float32) the round trip
   rounds x to B's precision: that is the pattern the float16 transpiler leaves at the boundary
   of two float16 regions, where the rounding is the precision loss the float16 region already
   intended, so keeping x unrounded is at least as accurate. Such pairs cancel unless
   ``lossy=False``. Other pairs (float->int->float truncates, int64->int32->int64 wraps) change
   values on purpose and are never cancelled.

Fetched and fed vars keep their names, and vars of other blocks are not touched
(``rewire.bypass``); a program without fetch ops should name its outputs in ``fetch_names``.
"""

from __future__ import annotations

import attrs
import numpy as np

from halfway.ir.block import Block
from halfway.ir.dtypes import DType
from halfway.ir.operator import Operator
from halfway.ir.program import Program
from halfway.ir.scope import Scope
from halfway.passes.base import PassResult, register_pass
from halfway.passes.rewire import Guard, bypass, remove_unused_vars, sole_writer, written_between

__all__ = ["CastOptions", "cancel_casts", "exact_round_trip"]


@attrs.frozen
class CastOptions:
    """``fetch_names``: vars that must survive besides the fetch targets. ``lossy``: also cancel
    pairs whose middle dtype is a narrower float (case 3 of the module docstring)."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    lossy: bool = True


@register_pass("cancel_casts", options=CastOptions)
def cancel_casts(program: Program, scope: Scope | None, options: CastOptions) -> PassResult:
    """Remove casts to the same dtype, merge duplicate casts, cancel cast round trips."""
    guard = Guard.of(program, options.fetch_names, "cancel_casts")
    block = program.global_block()
    ops_before, vars_before = len(block.ops), len(block.vars)
    counts = {"casts_removed": 0, "casts_merged": 0, "casts_cancelled": 0}
    changed = True
    while changed:
        changed = False
        for op in block.ops:
            if op.block is block and op.type == "cast":
                kind = _rewrite(block, op, guard, options.lossy)
                if kind is not None:
                    counts[kind] += 1
                    changed = True
    stats = {"ops_removed": ops_before - len(block.ops), "vars_removed": vars_before - len(block.vars), **counts}
    return PassResult(program, modified=any(counts.values()), stats=stats)


def exact_round_trip(a: DType, b: DType) -> bool:
    """Whether casting any ``a`` value to ``b`` and back gives it back unchanged."""
    if a is b:
        return True
    if DType.bfloat16 in (a, b):
        return a is DType.bfloat16 and b in (DType.float32, DType.float64)
    kind_a, kind_b = a.numpy.kind, b.numpy.kind
    if kind_a in "iu" and kind_b in "iu":  # two's complement wraps back
        return b.numpy.itemsize >= a.numpy.itemsize
    if kind_a in "iu" and kind_b == "f":  # numpy calls int64 -> float64 safe; it rounds above 2**53
        return np.finfo(b.numpy).nmant + 1 >= 8 * a.numpy.itemsize - (kind_a == "i")
    return bool(np.can_cast(a.numpy, b.numpy, casting="safe"))


def _rewrite(block: Block, cast: Operator, guard: Guard, lossy: bool) -> str | None:
    """Apply the case that fits ``cast``; the name of its count, or None."""
    x, out = cast.input("X")[0], cast.output("Out")[0]
    if block.var(x).dtype == block.var(out).dtype:
        return "casts_removed" if bypass(cast, x, out, guard) else None
    earlier = _earlier_twin(block, cast)
    if earlier is not None:
        return "casts_merged" if bypass(cast, earlier.output("Out")[0], out, guard) else None
    return "casts_cancelled" if _cancel_pair(block, cast, guard, lossy) else None


def _earlier_twin(block: Block, cast: Operator) -> Operator | None:
    """An earlier cast of the same var to the same dtype, with the var unchanged in between."""
    x, dtype = cast.input("X")[0], block.var(cast.output("Out")[0]).dtype
    for reader, _, _ in block.uses(x):
        if reader is cast:
            return None
        twin = reader.output("Out")[0]
        if (reader.type == "cast" and block.var(twin).dtype == dtype and sole_writer(block, twin) is reader
                and not written_between(block, x, reader, cast)):
            return reader
    return None


def _cancel_pair(block: Block, second: Operator, guard: Guard, lossy: bool) -> bool:
    """``cast(cast(x))`` back to x's dtype (case 3 of the module docstring)."""
    middle, out = second.input("X")[0], second.output("Out")[0]
    first = sole_writer(block, middle)
    if first is None or first.type != "cast":
        return False
    x = first.input("X")[0]
    a, b = block.var(x).dtype, block.var(middle).dtype
    if a is None or b is None or block.var(out).dtype != a or written_between(block, x, first):
        return False
    if not (exact_round_trip(a, b) or (lossy and a.is_floating and b.is_floating)):
        return False
    if not bypass(second, x, out, guard):
        return False
    if not block.uses(middle) and not guard.kept(middle) and not block.var(middle).persistable:
        block.remove_op(first)
        remove_unused_vars(block, [middle], guard)
    return True
