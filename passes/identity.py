"""``remove_identity``: take ops that copy their input out of block 0.

The cases, repeated until none applies:

1. ``dropout`` with ``is_test``: ``upscale_in_train`` (or ``dropout_prob`` 0) passes X through
   and is removed; ``downgrade_in_infer`` computes ``X * (1 - p)`` and becomes that ``scale``
   op. A dropout in training mode (``is_test`` false) or whose Mask someone reads stays.
2. ``scale`` with scale 1, bias 0 and no ScaleTensor is removed.
3. ``assign`` is removed, so chains of assigns collapse onto their source.
4. ``reshape2`` of ``reshape2``: the second reshape reads the first one's input, and the first
   is removed, when its output has that one reader, is not fetched, and neither XShape is read.
   The second reshape takes no Shape/ShapeTensor input; its 0 entries (copy an input dim) are
   replaced by the first reshape's output dims, and must be known.
5. ``reshape2`` without Shape/ShapeTensor inputs whose X and Out are declared with one fully
   known shape (what case 4 leaves of a reshape and its inverse) is removed.

Removing an op sends its readers to its input (``rewire.bypass``): fetched and fed vars keep
their names, persistable vars and vars of other blocks are never touched. A program without
fetch ops should name the vars it will fetch in ``fetch_names``; without them, a var no op
reads is left alone, since it may be the output.
"""

from __future__ import annotations

import attrs

from halfway.ir.block import Block
from halfway.ir.operator import Operator
from halfway.ir.program import Program
from halfway.ir.scope import Scope
from halfway.passes.base import PassResult, register_pass
from halfway.passes.rewire import Guard, bypass, remove_unused_vars, sole_writer, written_between

__all__ = ["IdentityOptions", "remove_identity"]


@attrs.frozen
class IdentityOptions:
    """``fetch_names``: vars that must survive besides the program's fetch targets."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@register_pass("remove_identity", options=IdentityOptions)
def remove_identity(program: Program, scope: Scope | None, options: IdentityOptions) -> PassResult:
    """Remove identity ops: inference dropout, scale(1, 0), assign chains, reshape2 of reshape2."""
    guard = Guard.of(program, options.fetch_names, "remove_identity")
    block = program.global_block()
    ops_before, vars_before = len(block.ops), len(block.vars)
    counts = {"dropouts_removed": 0, "dropouts_to_scale": 0, "scales_removed": 0, "assigns_removed": 0,
              "reshapes_merged": 0, "reshapes_removed": 0}
    changed = True
    while changed:
        changed = False
        for op in block.ops:
            if op.block is block:
                kind = _rewrite(block, op, guard)
                if kind is not None:
                    counts[kind] += 1
                    changed = True
    stats = {"ops_removed": ops_before - len(block.ops), "vars_removed": vars_before - len(block.vars), **counts}
    return PassResult(program, modified=any(counts.values()), stats=stats)


def _rewrite(block: Block, op: Operator, guard: Guard) -> str | None:
    """Apply the case that fits ``op``; the name of its count, or None."""
    if op.type == "dropout":
        return _dropout(block, op, guard)
    if op.type == "scale" and not op.input("ScaleTensor") and op.attr("scale") == 1 and op.attr("bias") == 0:
        return "scales_removed" if bypass(op, op.input("X")[0], op.output("Out")[0], guard) else None
    if op.type == "assign" and op.input("X"):
        return "assigns_removed" if bypass(op, op.input("X")[0], op.output("Out")[0], guard) else None
    if op.type == "reshape2" and not (op.input("Shape") or op.input("ShapeTensor")):
        if _same_shape(block, op.input("X")[0], op.output("Out")[0]):
            return "reshapes_removed" if bypass(op, op.input("X")[0], op.output("Out")[0], guard) else None
        return "reshapes_merged" if _merge_reshapes(block, op, guard) else None
    return None


def _same_shape(block: Block, x: str, out: str) -> bool:
    """Whether both vars are declared with one fully known shape."""
    shape = block.var(x).shape
    return shape is not None and all(d >= 0 for d in shape) and shape == block.var(out).shape


def _dropout(block: Block, op: Operator, guard: Guard) -> str | None:
    if not op.attr("is_test"):
        return None
    x, out = op.input("X")[0], op.output("Out")[0]
    keep = 1.0 - op.attr("dropout_prob")
    if op.attr("dropout_implementation") == "upscale_in_train" or keep == 1.0:
        return "dropouts_removed" if bypass(op, x, out, guard) else None
    mask = op.output("Mask")
    if mask and (guard.kept(mask[0]) or block.uses(mask[0]) or sole_writer(block, mask[0]) is not op):
        return None
    scale = Operator("scale", {"X": [x]}, {"Out": [out]}, {"scale": keep, "bias": 0.0, "bias_after_scale": True})
    block.replace_op(op, [scale])
    remove_unused_vars(block, mask, guard)
    return "dropouts_to_scale"


def _merge_reshapes(block: Block, second: Operator, guard: Guard) -> bool:
    """``reshape2(reshape2(x))`` -> ``reshape2(x)`` (case 4 of the module docstring)."""
    middle = second.input("X")[0]
    first = sole_writer(block, middle)
    if first is None or first is second or first.type != "reshape2":
        return False
    first_outputs = [n for n in first.output_names() if n != middle]
    if (guard.kept(middle) or block.var(middle).persistable or [u[0] for u in block.uses(middle)] != [second]
            or any(guard.kept(n) or block.uses(n) for n in first_outputs + list(second.output("XShape")))):
        return False
    x = first.input("X")[0]
    target = _resolved_shape(second.attr("shape"), block.var(middle).shape or ())
    if target is None or written_between(block, x, first, second):
        return False
    second.set_attr("shape", target)
    second.set_input("X", [x])
    for xshape in second.output("XShape"):
        block.var(xshape).set_shape([0, *(block.var(x).shape or ())])
    block.remove_op(first)
    remove_unused_vars(block, [middle, *first_outputs], guard)
    return True


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
