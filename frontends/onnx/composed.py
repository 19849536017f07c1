"""Converters of ONNX ops that halfway composes from its own: Hardmax.

Hardmax is a one-hot of the first maximum along its axis: arg_max (keeping the dim) compared
with the positions along that dim, cast to X's type. Before opset 13 it works on X seen as 2-D
[dims before axis, dims from axis on], as Softmax did then.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import NodeProto

from ...ir.dtypes import DType
from .context import GraphContext
from .registry import converts

__all__: list[str] = []


def _one_hot_of_max(ctx: GraphContext, x: str, axis: int, out: str) -> None:
    shape, dtype = ctx.static_shape(x, "Hardmax"), ctx.info(x).dtype
    index, hit = ctx.temp(f"{out}.index"), ctx.temp(f"{out}.hit")
    ctx.emit("arg_max", {"X": x}, {"Out": index}, {"axis": axis, "keepdims": True, "dtype": int(DType.int64)})
    positions = np.arange(shape[axis], dtype=np.int64).reshape([-1] + [1] * (len(shape) - axis - 1))
    ctx.emit("equal", {"X": index, "Y": ctx.add_const(f"{out}.positions", positions)}, {"Out": hit}, {"axis": -1})
    ctx.emit("cast", {"X": hit}, {"Out": out}, {"in_dtype": int(DType.bool), "out_dtype": int(dtype)})


@converts("Hardmax")
def hardmax(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, out = node.input[0], node.output[0]
    shape = ctx.static_shape(x, "Hardmax")
    axis = ctx.axis(attrs.get("axis", -1 if ctx.opset >= 13 else 1), len(shape))
    if ctx.opset >= 13:
        _one_hot_of_max(ctx, x, axis, out)
        return
    flat, picked = ctx.temp(f"{out}.flat"), ctx.temp(f"{out}.picked")
    ctx.emit("reshape2", {"X": x}, {"Out": flat}, {"shape": [math.prod(shape[:axis]), math.prod(shape[axis:])]})
    _one_hot_of_max(ctx, flat, 1, picked)
    ctx.emit("reshape2", {"X": picked}, {"Out": out}, {"shape": list(shape)})
