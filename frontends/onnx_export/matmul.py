"""Exporters of the matrix products: matmul_v2 and mul as MatMul (mul's operands flattened first),
``fc`` as MatMul, an Add of its bias and of its residual, and its activation (a gated fc: Split into
its halves and swiglu's form)."""

from __future__ import annotations

from ...ir.operator import Operator
from ...ir.ops.families import epilogue_op
from ...ir.ops.matmul import GATED
from .context import ExportContext
from .family import activation
from .gated import swiglu_of
from .registry import exports

__all__: list[str] = []


def _transposed_last(ctx: ExportContext, name: str) -> str:
    rank = ctx.rank(name)
    if rank < 2:
        return name
    value = ctx.value(name)
    if value is not None:
        return ctx.const(value.swapaxes(-1, -2), base="transposed")
    return ctx.node("Transpose", [name], perm=[*range(rank - 2), rank - 1, rank - 2])


@exports("matmul_v2")
def matmul_v2(ctx: ExportContext, op: Operator) -> None:
    x, y = op.input("X")[0], op.input("Y")[0]
    if op.attr("trans_x"):
        x = _transposed_last(ctx, x)
    if op.attr("trans_y"):
        y = _transposed_last(ctx, y)
    ctx.node("MatMul", [x, y], [op.output("Out")[0]])


@exports("fc")
def fc(ctx: ExportContext, op: Operator) -> None:
    """act(Input flattened at in_num_col_dims @ W + Bias + ResidualData): Input reshaped to [d0.., -1]
    where it has more dims than that, then MatMul, the Adds and the activation."""
    x, w, out = op.input("Input")[0], op.input("W")[0], op.output("Out")[0]
    if op.attr("padding_weights"):
        ctx.fail("padding_weights (W padded by 4 rows and columns) is not supported")
    keep = op.attr("in_num_col_dims")
    if ctx.rank(x) != keep + 1:
        x = ctx.node("Reshape", [x, ctx.ints([0] * keep + [-1])])
    addends = [n for slot in ("Bias", "ResidualData") for n in op.input(slot)]
    gated = op.attr("activation_type") == GATED
    act = None if gated else epilogue_op(op.attr("activation_type"))
    value = ctx.node("MatMul", [x, w], None if addends or act or gated else [out])
    for i, addend in enumerate(addends):
        value = ctx.node("Add", [value, addend], None if act or gated or i < len(addends) - 1 else [out])
    if act:
        activation(ctx, act[0], act[1], value, out)
    if gated:
        gate, up = (ctx.temp(f"{out}.{half}") for half in ("gate", "up"))
        halves = 2 if ctx.opset >= 18 else None  # two equal halves (num_outputs from opset 18)
        ctx.node("Split", [value], [gate, up], axis=-1, num_outputs=halves)
        swiglu_of(ctx, gate, up, out)


@exports("mul")
def mul(ctx: ExportContext, op: Operator) -> None:
    """The legacy matrix product: X flattened to 2-D at x_num_col_dims, Y at y_num_col_dims, their
    product reshaped to X's leading and Y's trailing dims."""
    x, y, out = op.input("X")[0], op.input("Y")[0], op.output("Out")[0]
    xs, ys = op.attr("x_num_col_dims"), op.attr("y_num_col_dims")
    product = ctx.node("MatMul", [ctx.node("Flatten", [x], axis=xs), ctx.node("Flatten", [y], axis=ys)])
    if ctx.rank(x) == xs + 1 and ctx.rank(y) == ys + 1 == 2:
        ctx.node("Identity", [product], [out])
        return
    lead = ctx.node("Slice", [ctx.node("Shape", [x]), ctx.ints([0]), ctx.ints([xs])])
    trail = ctx.node("Slice", [ctx.node("Shape", [y]), ctx.ints([ys]), ctx.ints([ctx.rank(y)])])
    ctx.node("Reshape", [product, ctx.node("Concat", [lead, trail], axis=0)], [out])


@exports("determinant")
def determinant(ctx: ExportContext, op: Operator) -> None:
    ctx.node("Det", [op.input("Input")[0]], [op.output("Out")[0]])
