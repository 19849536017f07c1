"""Exporter of the gated linear units: swiglu as ``X * Sigmoid(X) * Y`` (``swiglu_of``, which a gated
fc's export writes too)."""

from __future__ import annotations

from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__ = ["swiglu_of"]


@exports("swiglu")
def swiglu(ctx: ExportContext, op: Operator) -> None:
    swiglu_of(ctx, op.input("X")[0], op.input("Y")[0], op.output("Out")[0])


def swiglu_of(ctx: ExportContext, gate: str, up: str, out: str) -> None:
    """``gate * Sigmoid(gate) * up`` into ``out`` (swiglu, and a gated fc's epilogue)."""
    silu = ctx.node("Mul", [gate, ctx.node("Sigmoid", [gate])])
    ctx.node("Mul", [silu, up], [out])
