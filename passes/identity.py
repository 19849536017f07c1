"""``remove_identity``: take ops that copy their input out of block 0.

The cases, rules applied by ``apply_rules`` until none applies (each declines with its reason):

1. ``dropout`` with ``is_test``: ``upscale_in_train`` (or ``dropout_prob`` 0) passes X through
   and is removed; ``downgrade_in_infer`` computes ``X * (1 - p)`` and becomes that ``scale``
   op. A dropout in training mode (``is_test`` false) or whose Mask someone reads stays.
2. ``scale`` with scale 1, bias 0 and no ScaleTensor or BiasTensor is removed.
3. ``assign`` is removed, so chains of assigns collapse onto their source.
4. ``reshape2`` of ``reshape2``: the second reshape reads the first one's input, and the first
   is removed, when its output has that one reader, is not fetched, and neither XShape is read.
   The second reshape takes no Shape/ShapeTensor input; its 0 entries (copy an input dim) are
   replaced by the first reshape's output dims, and must be known.
5. ``reshape2`` without Shape/ShapeTensor inputs whose X and Out are declared with one fully
   known shape (what case 4 leaves of a reshape and its inverse) is removed.
6. ``pool2d`` (max or avg) whose X and Out are declared with one fully known shape and whose
   windows are single pixels is removed: adaptive or global (torchvision's VGG pools its 7x7 map
   to 7x7 before the classifier), or a 1x1 window of stride 1 without padding.

Removing an op sends its readers to its input (``rewire.bypass``): fetched and fed vars keep
their names, persistable vars and vars of other blocks are never touched. A program without
fetch ops should name the vars it will fetch in ``fetch_names``; without them, a var no op
reads is left alone, since it may be the output.
"""

from __future__ import annotations

import attrs

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .pattern import pattern
from .rewire import Guard, bypass, remove_unused_vars, sole_writer, written_between
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules

__all__ = ["IdentityOptions", "RULES", "remove_identity"]


@attrs.frozen
class IdentityOptions:
    """``fetch_names``: vars that must survive besides the program's fetch targets."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@register_pass("remove_identity", options=IdentityOptions)
def remove_identity(program: Program, scope: Scope | None, options: IdentityOptions) -> PassResult:
    """Remove identity ops: inference dropout, scale(1, 0), assign chains, reshape2 of reshape2,
    pools of one-pixel windows."""
    guard = Guard.of(program, options.fetch_names, "remove_identity")
    block = program.global_block()
    ops_before, vars_before = len(block.ops), len(block.vars)
    fired = apply_rules(program, RULES, name="remove_identity", state=guard).counts
    counts = {key: fired[rule.name] for key, rule in _CASES}
    stats = {"ops_removed": ops_before - len(block.ops), "vars_removed": vars_before - len(block.vars), **counts}
    return PassResult(program, modified=any(counts.values()), stats=stats)


def _in_block_0(op: Operator) -> None:
    if op.block is None or op.block.idx != 0:
        raise Decline("the cleanup passes rewrite block 0 only")


def _passes_through(op: Operator) -> bool:
    """Whether a dropout at inference passes X through unscaled."""
    return bool(op.attr("dropout_implementation") == "upscale_in_train" or op.attr("dropout_prob") == 0.0)


def _scales(op: Operator) -> bool:
    return not _passes_through(op)


def _training(op: Operator) -> Decline | None:
    return None if op.attr("is_test") else Decline("the dropout is in training mode (is_test is false)")


def _remove_dropout(ctx: RewriteContext, *, op: Operator, x: str) -> bool | Decline:
    """Case 1: an inference dropout that passes X through."""
    _in_block_0(op)
    return _training(op) or bypass(op, x, op.output("Out")[0], ctx.state)


def _dropout_to_scale(ctx: RewriteContext, *, op: Operator, x: str) -> bool | Decline:
    """Case 1: an inference downgrade_in_infer dropout computes ``X * (1 - p)``."""
    _in_block_0(op)
    training = _training(op)
    if training is not None:
        return training
    keep = 1.0 - op.attr("dropout_prob")
    block, guard, mask = ctx.block, ctx.state, op.output("Mask")
    if mask and (guard.kept(mask[0]) or block.uses(mask[0]) or sole_writer(block, mask[0]) is not op):
        return ctx.decline(f"its Mask {mask[0]} is read, kept or written elsewhere")
    scale = Operator("scale", {"X": [x]}, {"Out": op.output("Out")}, {"scale": keep, "bias": 0.0,
                                                                       "bias_after_scale": True})
    block.replace_op(op, [scale])
    remove_unused_vars(block, mask, guard)
    return True


def _remove_copy(ctx: RewriteContext, *, op: Operator, x: str) -> bool:
    """Cases 2, 3, 5 and 6: scale(1, 0), assign, a reshape2 between two equal known shapes, a
    pool2d of one-pixel windows."""
    _in_block_0(op)
    return bypass(op, x, op.output("Out")[0], ctx.state)


def _merge_reshapes(ctx: RewriteContext, *, second: Operator, x: str) -> bool | Decline:
    """Case 4: ``reshape2(reshape2(x))`` -> ``reshape2(x)``."""
    _in_block_0(second)
    block, guard = ctx.block, ctx.state
    middle = x
    first = sole_writer(block, middle)
    if first is None or first is second or first.type != "reshape2":
        return ctx.decline(f"{middle} is not written by one other reshape2")
    first_outputs = [n for n in first.output_names() if n != middle]
    if (guard.kept(middle) or block.var(middle).persistable or [u[0] for u in block.uses(middle)] != [second]
            or any(guard.kept(n) or block.uses(n) for n in first_outputs + list(second.output("XShape")))):
        return ctx.decline(f"{middle} or an XShape is read elsewhere, kept or persistable")
    source = first.input("X")[0]
    target = _resolved_shape(second.attr("shape"), block.var(middle).shape or ())
    if target is None:
        return ctx.decline(f"the shape copies a dim of {middle} that is unknown")
    if written_between(block, source, first, second):
        return ctx.decline(f"{source} is written between the two reshapes")
    second.set_attr("shape", target)
    second.set_input("X", [source])
    for xshape in second.output("XShape"):
        block.var(xshape).set_shape([0, *(block.var(source).shape or ())])
    block.remove_op(first)
    remove_unused_vars(block, [middle, *first_outputs], guard)
    return True


def _fixed_reshape(op: Operator) -> bool:
    """A reshape2 whose X and Out are declared with one fully known shape."""
    return op.block is not None and _same_shape(op.block, op.input("X")[0], op.output("Out")[0])


def _not_fixed_reshape(op: Operator) -> bool:
    return not _fixed_reshape(op)


def _identity_pool(op: Operator) -> bool:
    """A max or avg pool2d whose every window is the one pixel under it (case 6)."""
    if op.block is None or op.attr("pooling_type") not in ("max", "avg"):
        return False
    if not _same_shape(op.block, op.input("X")[0], op.output("Out")[0]):
        return False
    pixel = (list(op.attr("ksize")) == [1, 1] and list(op.attr("strides")) == [1, 1]
             and not any(op.attr("paddings")) and op.attr("padding_algorithm") != "SAME")
    return bool(op.attr("adaptive") or op.attr("global_pooling") or pixel)


_CASES = [
    # dropout (inference, passes X through) -> removed
    ("dropouts_removed", Rule(pattern("op:dropout(X=x, ...)", where={"op": _passes_through}), _remove_dropout,
                              "inference dropout -> removed", in_place=True)),
    # dropout (inference, downgrade_in_infer) -> scale(1 - p)
    ("dropouts_to_scale", Rule(pattern("op:dropout(X=x, ...)", where={"op": _scales}), _dropout_to_scale,
                               "inference dropout -> scale(1 - p)", in_place=True)),
    # scale(1, 0) -> removed
    ("scales_removed", Rule(pattern("op:scale(X=x)", attrs={"op": {"scale": 1.0, "bias": 0.0}}), _remove_copy,
                            "scale(1, 0) -> removed", in_place=True)),
    # assign -> removed
    ("assigns_removed", Rule(pattern("op:assign(X=x)"), _remove_copy, "assign -> removed", in_place=True)),
    # reshape2 between equal known shapes -> removed
    ("reshapes_removed", Rule(pattern("op:reshape2(X=x)", where={"op": _fixed_reshape}), _remove_copy,
                              "reshape2 to its own shape -> removed", in_place=True)),
    # pool2d over single pixels -> removed
    ("pools_removed", Rule(pattern("op:pool2d(X=x)", where={"op": _identity_pool}), _remove_copy,
                           "pool2d of one-pixel windows -> removed", in_place=True)),
    # reshape2 + reshape2 -> reshape2
    ("reshapes_merged", Rule(pattern("second:reshape2(X=x)", where={"second": _not_fixed_reshape}),
                             _merge_reshapes, "reshape2 + reshape2 -> reshape2", in_place=True)),
]
RULES = Rules(rule for _, rule in _CASES)


def _same_shape(block: Block, x: str, out: str) -> bool:
    """Whether both vars are declared with one fully known shape."""
    shape = block.var(x).shape
    return shape is not None and all(d >= 0 for d in shape) and shape == block.var(out).shape


def _resolved_shape(target: tuple[int, ...], middle: tuple[int, ...]) -> list[int] | None:
    """``target`` with its 0 entries (copy dim i of the middle tensor) replaced by those dims;
    None when such a dim is unknown."""
    resolved = []
    for i, d in enumerate(target):
        if d == 0:
            if i >= len(middle) or middle[i] <= 0:
                return None
            d = middle[i]
        resolved.append(d)
    return resolved
