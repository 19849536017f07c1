"""Exporter of the gated linear units: swiglu as ``X * Sigmoid(X) * Y``."""

from __future__ import annotations

from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__: list[str] = []


@exports("swiglu")
def swiglu(ctx: ExportContext, op: Operator) -> None:
    gate, up = op.input("X")[0], op.input("Y")[0]
    silu = ctx.node("Mul", [gate, ctx.node("Sigmoid", [gate])])
    ctx.node("Mul", [silu, up], op.output("Out"))
