"""``cancel_casts``: remove the casts of block 0 that change nothing or undo each other.

The cases, rules applied by ``apply_rules`` until none applies (each declines with its reason):

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

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .pattern import pattern
from .rewire import Guard, bypass, remove_unused_vars, sole_writer, written_between
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules

__all__ = ["CastOptions", "ExactCastOptions", "RULES", "cancel_casts", "cancel_exact_casts", "exact_round_trip"]


@attrs.frozen
class CastOptions:
    """``fetch_names``: vars that must survive besides the fetch targets. ``lossy``: also cancel
    pairs whose middle dtype is a narrower float (case 3 of the module docstring)."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    lossy: bool = True


@attrs.frozen
class _State:
    guard: Guard
    lossy: bool


@register_pass("cancel_casts", options=CastOptions)
def cancel_casts(program: Program, scope: Scope | None, options: CastOptions) -> PassResult:
    """Remove casts to the same dtype, merge duplicate casts, cancel cast round trips."""
    return _cancel(program, options.fetch_names, options.lossy)


def _cancel(program: Program, fetch_names: tuple[str, ...], lossy: bool) -> PassResult:
    guard = Guard.of(program, fetch_names, "cancel_casts")
    block = program.global_block()
    ops_before, vars_before = len(block.ops), len(block.vars)
    fired = apply_rules(program, RULES, name="cancel_casts", state=_State(guard, lossy)).counts
    counts = {key: fired[rule.name] for key, rule in _CASES}
    stats = {"ops_removed": ops_before - len(block.ops), "vars_removed": vars_before - len(block.vars), **counts}
    return PassResult(program, modified=any(counts.values()), stats=stats)


@attrs.frozen
class ExactCastOptions:
    """``fetch_names``: vars that must survive besides the fetch targets."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@register_pass("cancel_exact_casts", options=ExactCastOptions)
def cancel_exact_casts(program: Program, scope: Scope | None, options: ExactCastOptions) -> PassResult:
    """cancel_casts with ``lossy=False``: only what keeps every value (the default pipeline's)."""
    return _cancel(program, options.fetch_names, lossy=False)


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


def _same_dtype(cast: Operator) -> bool:
    """Whether ``cast`` casts to the dtype its input is declared with."""
    assert cast.block is not None
    return cast.block.var(cast.input("X")[0]).dtype == cast.block.var(cast.output("Out")[0]).dtype


def _converts(cast: Operator) -> bool:
    return not _same_dtype(cast)


def _in_block_0(cast: Operator) -> Block:
    if cast.block is None or cast.block.idx != 0:
        raise Decline("the cleanup passes rewrite block 0 only")
    return cast.block


def _remove_noop(ctx: RewriteContext, *, cast: Operator, x: str) -> bool:
    """Case 1: a cast to the dtype its input has."""
    _in_block_0(cast)
    return bypass(cast, x, cast.output("Out")[0], ctx.state.guard)


def _has_twin(cast: Operator) -> bool:
    return cast.block is not None and _converts(cast) and _earlier_twin(cast.block, cast) is not None


def _merge_twin(ctx: RewriteContext, *, cast: Operator, x: str) -> bool:
    """Case 2: a later cast of one var to one dtype reads the earlier one's output."""
    block = _in_block_0(cast)
    earlier = _earlier_twin(block, cast)
    assert earlier is not None  # the pattern's condition
    return bypass(cast, earlier.output("Out")[0], cast.output("Out")[0], ctx.state.guard)


def _after_a_cast(cast: Operator) -> bool:
    """Whether ``cast`` converts a var that one other cast writes."""
    if cast.block is None or not _converts(cast):
        return False
    first = sole_writer(cast.block, cast.input("X")[0])
    return first is not None and first.type == "cast"


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


def _cancel_pair(ctx: RewriteContext, *, second: Operator, middle: str) -> bool | Decline:
    """``cast(cast(x))`` back to x's dtype (case 3 of the module docstring)."""
    block, guard = _in_block_0(second), ctx.state.guard
    first = sole_writer(block, middle)
    assert first is not None  # the pattern's condition
    x, out = first.input("X")[0], second.output("Out")[0]
    a, b = block.var(x).dtype, block.var(middle).dtype
    if a is None or b is None or block.var(out).dtype != a:
        return ctx.decline(f"the second cast does not go back to {x}'s dtype")
    if written_between(block, x, first):
        return ctx.decline(f"{x} is written again after the first cast")
    if not exact_round_trip(a, b) and not (ctx.state.lossy and a.is_floating and b.is_floating):
        return ctx.decline(f"{a.name} -> {b.name} -> {a.name} changes values"
                           + (" (lossy=False)" if a.is_floating and b.is_floating else ""))
    bypass(second, x, out, guard)
    if not block.uses(middle) and not guard.kept(middle) and not block.var(middle).persistable:
        block.remove_op(first)
        remove_unused_vars(block, [middle], guard)
    return True


_CASES = [
    # cast to its input's dtype -> removed
    ("casts_removed", Rule(pattern("cast:cast(X=x)", where={"cast": _same_dtype}), _remove_noop,
                           "cast to the same dtype -> removed", in_place=True)),
    # cast + the same cast of the same var -> one cast
    ("casts_merged", Rule(pattern("cast:cast(X=x)", where={"cast": _has_twin}), _merge_twin,
                          "duplicate cast -> merged", in_place=True)),
    # cast(A -> B) + cast(B -> A) -> removed
    ("casts_cancelled", Rule(pattern("second:cast(X=middle)", where={"second": _after_a_cast}), _cancel_pair,
                             "cast round trip -> removed", in_place=True)),
]
RULES = Rules(rule for _, rule in _CASES)
