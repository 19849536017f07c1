"""fuse_projections: products of one input by constant weights -> one product on the weights side
by side, and a split of its output (or, for a SwiGLU MLP's gate and up, the gate in the product).

    x ─ fc(Wq, bq) ─ q                              x ─ fc([Wq Wk Wv], [bq bk bv]) ─ split ─ q
    x ─ fc(Wk, bk) ─ k          becomes                                                  ├─ k
    x ─ fc(Wv, bv) ─ v                                                                   └─ v

    x ─ matmul_v2(Wg) ─┐
    x ─ matmul_v2(Wu) ─┴ swiglu ─ y       becomes       x ─ fc([Wg Wu], activation_type=swiglu) ─ y

Attention's query, key and value projections read one normalised input: one GEMM over the
concatenated weights reads that input once and launches once. First (a phase of its own), the
gate and up projections that a swiglu reads become one fc gating its halves, where both are
matmul_v2 or both fc without an activation (each with a bias or none), of x of rank >= 2 and
2-D parameter weights of one shape and dtype, neither transposed. Then one in-place rule, rooted
at each product, rewrites the group of products it is the first of (in program order), or says
why not:

1. the products are ``fc`` (the same ``in_num_col_dims`` and activation, each with a bias or
   none, no ``padding_weights``) or ``matmul_v2`` (neither operand transposed, x of rank >= 2),
   reading x as their input and a 2-D parameter of one dtype and one number of rows the scope
   holds as their weight (a gated fc's halves would not survive the split: it stays alone);
2. a group is every such product of x of one kind (type and attrs), at least two; the fused
   product stands where the first stood (x and the weights are there already, and the readers
   of each output come after its product);
3. an output that is persistable, fed, used by another block or written by another op keeps its
   group apart, and so does x written again between the group's products.

The new weight (and bias) is a new parameter; the old ones go with their last reader.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.ops.matmul import GATED
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .pattern import pattern
from .rewire import Guard, remove_unused_vars, sole_writer, written_between
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules

__all__ = ["GATE_RULES", "RULES", "fuse_projections"]

_WEIGHT = {"fc": "W", "matmul_v2": "Y"}
_INPUT = {"fc": "Input", "matmul_v2": "X"}


def _kind(ctx: RewriteContext, op: Operator, x: str) -> Hashable | None:
    """What products must share to fuse (case 1), or None where ``op`` is no such product of x."""
    block, guard = ctx.block, ctx.state
    if op.type not in _WEIGHT or op.input(_INPUT[op.type]) != (x,) or len(block.var(x).shape or ()) < 2:
        return None
    weight = block.var(op.input(_WEIGHT[op.type])[0])
    rows = (weight.shape or ())[:1]
    if not weight.persistable or len(weight.shape or ()) != 2 or ctx.value(weight.name) is None:
        return None
    out = op.output("Out")[0]
    if out in guard.elsewhere or out in guard.fed or block.var(out).persistable or sole_writer(block, out) is not op:
        return None
    if op.type == "fc":
        if (op.attr("padding_weights") or op.attr("in_num_col_dims") != len(block.var(x).shape or ()) - 1
                or op.attr("activation_type") == GATED):
            return None
        return "fc", op.attr("activation_type"), bool(op.input("Bias")), weight.dtype, rows
    if op.attr("trans_x") or op.attr("trans_y"):
        return None
    return "matmul_v2", weight.dtype, rows


def _group(ctx: RewriteContext, root: Operator, x: str) -> list[Operator]:
    """Case 2: the products of x of ``root``'s kind, in program order, root first; Decline otherwise."""
    kind = _kind(ctx, root, x)
    if kind is None:
        raise Decline(f"{root.describe()} is no product of {x} by a 2-D parameter the scope holds, or its output "
                      f"is kept")
    readers = {id(use[0]): use[0] for use in ctx.block.uses(x)}.values()
    group = sorted((op for op in readers if _kind(ctx, op, x) == kind), key=lambda op: op.index)
    if len(group) < 2:
        raise Decline(f"no other product of {x} is of the same kind ({kind})")
    if group[0] is not root:
        raise Decline(f"the group of products of {x} starts at {group[0].describe()}")
    if written_between(ctx.block, x, group[0], group[-1]):
        raise Decline(f"{x} is written again between the products that read it")
    return group


def _joined(ctx: RewriteContext, group: list[Operator], slot: str, axis: int) -> str:
    """A new parameter: the values of ``slot`` of the products side by side along ``axis``."""
    values = ctx.values(*(op.input(slot)[0] for op in group))
    return ctx.new_param(f"{group[0].input(slot)[0]}.joined", np.concatenate(values, axis=axis))


def _fuse(ctx: RewriteContext, *, product: Operator, x: str, w: str) -> bool:
    """The rule (module docstring)."""
    block, group = ctx.block, _group(ctx, product, x)
    widths = [int((ctx.var(op.input(_WEIGHT[op.type])[0]).shape or (0, 0))[1]) for op in group]
    slot = _WEIGHT[product.type]
    inputs = {_INPUT[product.type]: [x], slot: [_joined(ctx, group, slot, 1)]}
    if product.input("Bias"):
        inputs["Bias"] = [_joined(ctx, group, "Bias", 0)]
    first = product.output("Out")[0]
    lead = list(ctx.var(first).shape or ())[:-1]
    joined = ctx.new_var(f"{first}.joined", like=first, shape=[*lead, sum(widths)])
    fused = Operator(product.type, inputs, {"Out": [joined]})
    for name, attr in product.typed_attrs().items():
        fused.set_attr(name, attr.value, attr.type)
    outputs = [op.output("Out")[0] for op in group]
    split = Operator("split", {"X": [joined]}, {"Out": outputs},
                     {"axis": len(lead), "num": 0, "sections": widths})
    _replace(block, group, [fused, split], ctx.state)
    return True


def _replace(block: Block, group: list[Operator], new: list[Operator], guard: Guard) -> None:
    at = group[0].index
    weights = [n for op in group for n in op.input_names() if block.var(n).persistable]
    for op in group:
        block.remove_op(op)
    block.insert_ops(at, new)
    remove_unused_vars(block, weights, guard)


def _gate(ctx: RewriteContext, *, act: Operator, gate: Operator, up: Operator, x: str, wg: str, wu: str,
          bg: str | None = None, bu: str | None = None) -> Operator:
    """swiglu(x @ Wg (+ bg), x @ Wu (+ bu)) -> fc(x, [Wg Wu], [bg bu], activation_type=swiglu)."""
    rank = len(ctx.var(x).shape or ())
    shapes = [tuple(ctx.var(w).shape or ()) for w in (wg, wu)]
    if rank < 2 or len(shapes[0]) != 2 or shapes[0] != shapes[1] or ctx.var(wg).dtype is not ctx.var(wu).dtype:
        raise Decline(f"x of rank {rank} or the weights {wg} {list(shapes[0])} and {wu} {list(shapes[1])} differ "
                      f"from a gate and up projection's")
    if written_between(ctx.block, x, min(gate, up, key=lambda o: o.index), act):
        raise Decline(f"{x} is written again between the projections and the swiglu")
    if gate.type == "fc":
        if any(o.attr("padding_weights") or o.attr("in_num_col_dims") != rank - 1 for o in (gate, up)):
            raise Decline("a projection pads its weights or flattens x elsewhere than its last dim")
    elif any(o.attr("trans_x") or o.attr("trans_y") for o in (gate, up)):
        raise Decline("a projection transposes an operand")
    inputs = {"Input": [x], "W": [_joined(ctx, [gate, up], "W" if gate.type == "fc" else "Y", 1)]}
    if bg is not None:
        inputs["Bias"] = [_joined(ctx, [gate, up], "Bias", 0)]
    return Operator("fc", inputs, {"Out": act.output("Out")},
                    {"in_num_col_dims": rank - 1, "activation_type": GATED, "padding_weights": False})


GATE_RULES = Rules([
    # swiglu(matmul_v2(x, Wg), matmul_v2(x, Wu)) -> fc(x, [Wg Wu], activation_type=swiglu)
    Rule(pattern("act:swiglu(X=gate:matmul_v2(X=x, Y=wg:param), Y=up:matmul_v2(X=x, Y=wu:param))"), _gate,
         "gate and up products + swiglu -> gated fc"),
    # swiglu(fc(x, Wg, bg), fc(x, Wu, bu)) -> fc(x, [Wg Wu], [bg bu], activation_type=swiglu)
    Rule(pattern("act:swiglu(X=gate:fc(Input=x, W=wg:param, Bias=bg:param), Y=up:fc(Input=x, W=wu:param, "
                 "Bias=bu:param))", attrs={"gate": {"activation_type": ""}, "up": {"activation_type": ""}}),
         _gate, "gate and up fc + swiglu -> gated fc"),
    # swiglu(fc(x, Wg), fc(x, Wu)) -> fc(x, [Wg Wu], activation_type=swiglu)
    Rule(pattern("act:swiglu(X=gate:fc(Input=x, W=wg:param), Y=up:fc(Input=x, W=wu:param))",
                 attrs={"gate": {"activation_type": ""}, "up": {"activation_type": ""}}),
         _gate, "gate and up fc + swiglu -> gated fc"),
])

RULES = Rules([
    # fc(x, W1, b1), fc(x, W2, b2), ... -> split(fc(x, [W1 W2 ...], [b1 b2 ...]))
    Rule(pattern("product:fc(Input=x, W=w:param, ...)"), _fuse, "products of one input -> one product + split",
         in_place=True),
    # matmul_v2(x, W1), matmul_v2(x, W2), ... -> split(matmul_v2(x, [W1 W2 ...]))
    Rule(pattern("product:matmul_v2(X=x, Y=w:param)"), _fuse, "products of one input -> one product + split",
         in_place=True),
])


@register_pass("fuse_projections", needs_scope=True)
def fuse_projections(program: Program, scope: Scope | None, options: None = None) -> PassResult:
    """Products of one input by constant weights -> one product on the joined weights, then a split;
    a swiglu's gate and up projections -> one gated fc."""
    guard = Guard.of(program, (), "fuse_projections")
    gated = apply_rules(program, GATE_RULES, name="fuse_projections (gates)", scope=scope, state=guard).counts
    fired = apply_rules(program, RULES, name="fuse_projections", scope=scope, state=guard).counts
    return PassResult(program, modified=gated.total() + fired.total() > 0,
                      stats={"gates_fused": gated.total(), "groups_fused": fired.total()})
