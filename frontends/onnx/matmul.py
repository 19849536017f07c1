"""Converters of ONNX's matrix products: MatMul and Gemm (matmul_v2, its alpha and beta folded
into constants where they can be)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []


@converts("MatMul", makes="matmul_v2")
def matmul(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("matmul_v2", {"X": node.input[0], "Y": node.input[1]}, {"Out": node.output[0]})


@converts("Gemm", makes="matmul_v2")
def gemm(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Y = alpha * A' @ B' + beta * C: matmul_v2 with trans_x/trans_y, alpha folded into a
    constant B (else a scale op), C added with numpy broadcasting (beta folded likewise)."""
    a, b = node.input[0], node.input[1]
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    has_c = len(node.input) > 2 and bool(node.input[2]) and beta != 0.0
    out = node.output[0]
    if ctx.is_const(b) and alpha != 1.0:
        weight = ctx.consts[b]
        b, alpha = ctx.add_const(f"{b}.scaled", weight * np.asarray(alpha, weight.dtype)), 1.0
    product = ctx.temp(out) if has_c or alpha != 1.0 else out
    ctx.emit("matmul_v2", {"X": a, "Y": b}, {"Out": product}, {"trans_x": trans_a, "trans_y": trans_b})
    if alpha != 1.0:
        scaled = ctx.temp(out) if has_c else out
        ctx.emit("scale", {"X": product}, {"Out": scaled}, {"scale": alpha})
        product = scaled
    if has_c:
        c = node.input[2]
        if beta != 1.0:
            c = _scaled_bias(ctx, c, beta, out)
        ctx.emit("elementwise_add", {"X": product, "Y": c}, {"Out": out}, {"axis": -1})


def _scaled_bias(ctx: GraphContext, c: str, beta: float, out: str) -> str:
    if ctx.is_const(c):
        value = ctx.consts[c]
        return ctx.add_const(f"{c}.scaled", value * np.asarray(beta, value.dtype))
    scaled = ctx.temp(f"{out}.bias")
    ctx.emit("scale", {"X": c}, {"Out": scaled}, {"scale": beta})
    return scaled


@converts("Det", makes="determinant")
def det(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("determinant", {"Input": node.input[0]}, {"Out": node.output[0]})
