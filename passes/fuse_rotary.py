"""fuse_rotary: rotary position embeddings as exporters write them -> one rotary_embedding.

    x ─ mul(cos) ───────────────────────────────────┐
    x ─ slice(h:) ─ neg ─┐                            add ─ y      becomes      x ─ rotary_embedding ─ y
    x ─ slice(:h) ───────┴─ concat ─ mul(sin) ───────┘

x is [B, H, S, D] (the heads split off: LLaMA's, Mistral's and Qwen2's queries and keys). Each
in-place rule of 1 and 2 matches one form, checks it all, then puts the op where the sum stood,
or says why not:

1. rotate-half: ``x * cos + concat(-x[..., h:], x[..., :h]) * sin`` with h half of x's last dim,
   each product and the sum in either operand order;
2. interleaved (GPT-J's rotate_every_two): ``x * cos + flatten(stack(-x[..., 1::2], x[..., ::2])) * sin``,
   the stack written as unsqueeze2 at the last axis and concat -> interleaved;
3. partial rotary (GPT-NeoX, Phi): ``concat(rotary_embedding(x[..., :r]), x[..., r:])``, what 1 or 2
   made of the first r entries and the rest passed through -> rotary_dim r.

The negation is ``scale`` by -1. The slices cut the last axis, their bounds attrs or tensors
whose values the pass knows (``static_values``: TorchScript computes them from x's shape); the
sum must keep x's shape. Cos and sin become the op's tables as ``rotary_tables`` says (a
parameter, rows of one picked by position ids, or computed from duplicated frequencies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import probe_dims
from .pattern import Operand, OpPattern, Pattern, op, pattern, var
from .rewire import Guard, remove_unused_vars
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op
from .rotary_tables import half_tables
from .static_values import static_value

__all__ = ["RULES", "fuse_rotary"]


class _State:
    """What the rules read besides the block: the names to keep and the dims of the block."""

    def __init__(self, program: Program, scope: Scope | None) -> None:
        self.guard = Guard.of(program, (), "fuse_rotary")
        self.dims = probe_dims(program.global_block(), scope)


def _halves_turned(again: Operand) -> OpPattern:
    """concat(-x[..., h:], x[..., :h])."""
    return op("concat", "turn", X=[op("scale", "neg", X=op("slice", "upper", open=True, Input=again)),
                                   op("slice", "lower", open=True, Input=again)])


def _pairs_turned(again: Operand) -> OpPattern:
    """flatten(stack(-x[..., 1::2], x[..., ::2])): unsqueeze2 at a new last axis, concat, reshape2."""
    negated = op("unsqueeze2", "lift_upper", X=op("scale", "neg", X=op("strided_slice", "upper", Input=again)))
    kept = op("unsqueeze2", "lift_lower", X=op("strided_slice", "lower", Input=again))
    return op("reshape2", "turn", open=True, X=op("concat", "pairs", X=[negated, kept]))


def _rotations(first: Operand, again: Operand, turned: Callable[[Operand], OpPattern]) -> list[OpPattern]:
    """x * cos + turned(x) * sin, the product by cos in either order (both operands are vars)."""
    by_cos = [op("elementwise_mul", "cos_mul", X=first, Y=var("cos")),
              op("elementwise_mul", "cos_mul", X=var("cos"), Y=first)]
    by_sin = op("elementwise_mul", "sin_mul", commutes=True, X=turned(again), Y=var("sin"))
    return [op("elementwise_add", "total", commutes=True, X=c, Y=by_sin) for c in by_cos]


def _halves(first: Operand, again: Operand) -> list[OpPattern]:
    return _rotations(first, again, _halves_turned)


def _pairs(first: Operand, again: Operand) -> list[OpPattern]:
    return _rotations(first, again, _pairs_turned)


def _cut(ctx: RewriteContext, cut: Operator, rank: int, width: int) -> tuple[int, int, int]:
    """(start, stop, step) of a slice or strided_slice of the last axis of a rank-``rank`` value
    ``width`` wide, its bounds known; Decline otherwise."""
    state: _State = ctx.state
    axes = [a % rank for a in cut.attr("axes")]
    if axes != [rank - 1] or cut.attr("decrease_axis") or cut.input("StartsTensorList") or cut.input("EndsTensorList"):
        raise Decline(f"{cut.describe()} does not cut the last axis alone")
    bounds = []
    for slot, attr in (("StartsTensor", "starts"), ("EndsTensor", "ends")):
        value = (static_value(ctx.block, ctx.scope, state.dims, cut.input(slot)[0]) if cut.input(slot)
                 else list(cut.attr(attr)))
        flat = None if value is None else [int(v) for v in np_flat(value)]
        if flat is None or len(flat) != 1:
            raise Decline(f"the {attr} of {cut.describe()} are not known before run time")
        bounds.append(flat[0])
    step = int(cut.attr("strides")[0]) if cut.type == "strided_slice" else 1
    return slice(bounds[0], bounds[1], step).indices(width)


def np_flat(value: Any) -> list[Any]:
    return list(np.asarray(value).reshape(-1))


def _expect(ctx: RewriteContext, cut: Operator, rank: int, width: int, want: tuple[int, int, int], what: str) -> None:
    got = _cut(ctx, cut, rank, width)
    if got != want:
        raise Decline(f"{what} {cut.describe()} takes [{got[0]}:{got[1]}:{got[2]}] of {width}, not "
                      f"[{want[0]}:{want[1]}:{want[2]}]")


def _check_negated(neg: Operator) -> None:
    if neg.attr("scale") != -1.0 or neg.attr("bias") != 0.0 or neg.input("ScaleTensor"):
        raise Decline(f"{neg.describe()} is no negation")


def _check_last_axis(ctx: RewriteContext, joins: Sequence[Operator], rank: int) -> None:
    for join in joins:
        if join.attr("axis") % rank != rank - 1:
            raise Decline(f"{join.describe()} does not join along the last axis")


def _shape(ctx: RewriteContext, name: str) -> tuple[int, ...]:
    return tuple(ctx.var(name).shape or ())


def _rotate(ctx: RewriteContext, *, total: Operator, cos_mul: Operator, sin_mul: Operator, turn: Operator,
            neg: Operator, upper: Operator, lower: Operator, x: str, cos: str, sin: str, pairs: Operator | None = None,
            lift_upper: Operator | None = None, lift_lower: Operator | None = None) -> bool:
    """Forms 1 and 2 (module docstring): check, then put the op in."""
    shape = _shape(ctx, x)
    if len(shape) != 4 or shape[3] <= 0:
        raise Decline(f"x {x} {list(shape)} is not [batch, heads, sequence, size] of a known size")
    width, interleaved = shape[3], pairs is not None
    half = width // 2
    _check_negated(neg)
    if interleaved:
        assert pairs is not None and lift_upper is not None and lift_lower is not None
        _expect(ctx, upper, 4, width, (1, width, 2), "the odd entries")
        _expect(ctx, lower, 4, width, (0, width, 2), "the even entries")
        _check_pairs(ctx, pairs, lift_upper, lift_lower, turn, width)
    else:
        _expect(ctx, upper, 4, width, (half, width, 1), "the upper half")
        _expect(ctx, lower, 4, width, (0, half, 1), "the lower half")
        _check_last_axis(ctx, [turn], 4)
    out = total.output("Out")[0]
    if _shape(ctx, out) != shape:
        raise Decline(f"the tables broadcast x {list(shape)} to {list(_shape(ctx, out))}")
    tables = half_tables(ctx, cos, sin, width, interleaved)
    inputs = {"X": [x], "Cos": [tables.cos], "Sin": [tables.sin], "PositionIds": [tables.ids] if tables.ids else []}
    rotary = Operator("rotary_embedding", {k: v for k, v in inputs.items() if v}, {"Out": [out]},
                      {"interleaved": interleaved, "rotary_dim": 0, "num_heads": 0})
    matched = [o for o in (total, cos_mul, sin_mul, turn, neg, upper, lower, pairs, lift_upper, lift_lower)
               if o is not None]
    _replace(ctx, matched, [*tables.ops, rotary])
    return True


def _partial(ctx: RewriteContext, *, join: Operator, rotary: Operator, rot: Operator, rest: Operator,
             x: str) -> Operator:
    """Form 3: the rotary embedding of x's first r entries and the rest -> one of x with rotary_dim r."""
    shape = _shape(ctx, x)
    if len(shape) != 4 or shape[3] <= 0 or rotary.attr("rotary_dim") or rotary.attr("num_heads"):
        raise Decline(f"x {x} {list(shape)} is not [batch, heads, sequence, size] of a known size, or the rotary "
                      f"embedding of its part is partial or sequence-major itself")
    size = shape[3]
    _check_last_axis(ctx, [join], 4)
    start, width, _ = _cut(ctx, rot, 4, size)
    if start != 0 or width % 2 or not 0 < width < size:
        raise Decline(f"the rotated part {rot.describe()} is not an even first part of {size}")
    _expect(ctx, rest, 4, size, (width, size, 1), "the part passed through")
    return copy_op(rotary, inputs={"X": [x]}, outputs={"Out": join.output("Out")}, attrs={"rotary_dim": width})


def _check_pairs(ctx: RewriteContext, pairs: Operator, lift_upper: Operator, lift_lower: Operator, turn: Operator,
                 width: int) -> None:
    """Form 3's stack and flatten: unsqueeze2 at axis 4, concat along it, reshape2 back to [.., width]."""
    for lift in (lift_upper, lift_lower):
        if list(lift.attr("axes")) != [4]:
            raise Decline(f"{lift.describe()} does not add a last axis")
    _check_last_axis(ctx, [pairs], 5)
    flat = _shape(ctx, turn.output("Out")[0])
    if len(flat) != 4 or flat[3] != width:
        raise Decline(f"{turn.describe()} does not flatten the pairs back to [.., {width}]")


def _replace(ctx: RewriteContext, matched: list[Operator], new: list[Operator]) -> None:
    """Put ``new`` where the root (the first of ``matched``) stood; the matched ops and what only
    they read or wrote go."""
    block, state = ctx.block, ctx.state
    block.insert_ops(max(o.index for o in matched), new)
    spent = [n for o in matched for n in o.output_names()]
    for o in matched:
        block.remove_op(o)
    remove_unused_vars(block, [n for n in spent if n not in new[-1].output_names()], state.guard)


_X = var("x")
RULES = Rules([
    # x * cos + concat(-x[..., h:], x[..., :h]) * sin -> rotary_embedding(x)
    *(Rule(Pattern(p), _rotate, "rotate-half rotary -> rotary_embedding", in_place=True) for p in _halves(_X, _X)),
    # x * cos + flatten(stack(-x[..., 1::2], x[..., ::2])) * sin -> rotary_embedding(x, interleaved)
    *(Rule(Pattern(p), _rotate, "interleaved rotary -> rotary_embedding", in_place=True) for p in _pairs(_X, _X)),
    # concat(rotary_embedding(x[..., :r]), x[..., r:]) -> rotary_embedding(x, rotary_dim=r)
    Rule(pattern("join:concat(X=[rotary:rotary_embedding(X=rot:slice(Input=x, ...), ...), rest:slice(Input=x, ...)])"),
         _partial, "rotary of a first part + the rest -> partial rotary_embedding"),
])


@register_pass("fuse_rotary", needs_scope=True)
def fuse_rotary(program: Program, scope: Scope | None, options: None = None) -> PassResult:
    """Rotary position embeddings (rotate-half, partial, interleaved) -> rotary_embedding."""
    fired = apply_rules(program, RULES, name="fuse_rotary", scope=scope, state=_State(program, scope)).counts
    return PassResult(program, modified=fired.total() > 0, stats={rule.name: fired[rule.name] for rule in RULES})
