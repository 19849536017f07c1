"""Converters of ONNX ops that halfway composes from its own: Hardmax, LpNormalization, EyeLike, the
signal windows (HannWindow, HammingWindow, BlackmanWindow) and CausalConvWithState.

Hardmax is a one-hot of the first maximum along its axis: arg_max (keeping the dim) compared
with the positions along that dim, cast to X's type. Before opset 13 it works on X seen as 2-D
[dims before axis, dims from axis on], as Softmax did then.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import NodeProto, helper

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


@converts("LpNormalization")
def lp_normalization(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """X over its L1 norm (the sum of |X|) or L2 norm (the root of the sum of squares) along axis;
    where the norm is 0 (X is), X itself."""
    x, out = node.input[0], node.output[0]
    axis, p = ctx.axis(attrs.get("axis", -1), len(ctx.shape(x))), attrs.get("p", 2)
    if p not in (1, 2):
        ctx.fail(f"p is {p}; LpNormalization takes 1 or 2")
    magnitude, total, norm = ctx.temp(f"{out}.magnitude"), ctx.temp(f"{out}.total"), ctx.temp(f"{out}.norm")
    ctx.emit("abs" if p == 1 else "square", {"X": x}, {"Out": magnitude})
    ctx.emit("reduce_sum", {"X": magnitude}, {"Out": total if p == 2 else norm},
             {"dim": [axis], "keep_dim": True, "reduce_all": False})
    if p == 2:
        ctx.emit("sqrt", {"X": total}, {"Out": norm})
    zero, divisor = ctx.temp(f"{out}.zero"), ctx.temp(f"{out}.divisor")
    one = ctx.add_const(f"{out}.one", np.ones((), ctx.info(x).dtype.numpy))
    ctx.emit("equal", {"X": norm, "Y": ctx.add_const(f"{out}.nought", np.zeros((), ctx.info(x).dtype.numpy))},
             {"Out": zero}, {"axis": -1})
    ctx.emit("where", {"Condition": zero, "X": one, "Y": norm}, {"Out": divisor})
    ctx.emit("elementwise_div", {"X": x, "Y": divisor}, {"Out": out}, {"axis": -1})


@converts("EyeLike")
def eye_like(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Ones on diagonal k of a matrix of X's static shape, in ``dtype`` (else X's): a constant."""
    rows, cols = ctx.static_shape(node.input[0], "EyeLike")
    dtype = helper.tensor_dtype_to_np_dtype(attrs["dtype"]) if "dtype" in attrs else ctx.info(node.input[0]).dtype.numpy
    eye = ctx.add_const(f"{node.output[0]}.eye", np.eye(rows, cols, attrs.get("k", 0), dtype=dtype))
    ctx.emit("assign", {"X": eye}, {"Out": node.output[0]})


_WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
            "BlackmanWindow": (0.42, 0.5, 0.08)}
"""ONNX window -> (a0, a1, a2) of w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)."""


@converts(*_WINDOWS)
def window(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The window of ``size`` points (computed at run time: a range), N = size when periodic, else
    size - 1; computed in float32, then cast to ``output_datatype``."""
    size, out = node.input[0], node.output[0]
    a0, a1, a2 = _WINDOWS[node.op_type]
    count, points, n, length, angle = (ctx.temp(f"{out}.{what}") for what in ("count", "points", "n", "length", "angle"))
    ctx.emit("cast", {"X": size}, {"Out": count}, {"in_dtype": int(ctx.info(size).dtype), "out_dtype": int(DType.int64)})
    start, step = (ctx.add_const(f"{out}.{what}", np.array(v, np.int64)) for what, v in (("start", 0), ("step", 1)))
    ctx.emit("range", {"Start": start, "End": count, "Step": step}, {"Out": points})
    ctx.emit("cast", {"X": points}, {"Out": n}, {"in_dtype": int(DType.int64), "out_dtype": int(DType.float32)})
    ctx.emit("cast", {"X": count}, {"Out": length}, {"in_dtype": int(DType.int64), "out_dtype": int(DType.float32)})
    if not attrs.get("periodic", 1):
        length_1 = ctx.temp(f"{out}.length")
        ctx.emit("scale", {"X": length}, {"Out": length_1}, {"bias": -1.0})
        length = length_1
    turns = ctx.temp(f"{out}.turns")
    ctx.emit("scale", {"X": n}, {"Out": turns}, {"scale": 2 * math.pi})
    ctx.emit("elementwise_div", {"X": turns, "Y": length}, {"Out": angle}, {"axis": -1})
    w = _cosine_term(ctx, angle, 1.0, -a1, a0, out)
    if a2:
        w2 = ctx.temp(f"{out}.w")
        ctx.emit("elementwise_add", {"X": w, "Y": _cosine_term(ctx, angle, 2.0, a2, 0.0, out)}, {"Out": w2}, {"axis": -1})
        w = w2
    dtype = DType.from_any(helper.tensor_dtype_to_np_dtype(attrs.get("output_datatype", 1)))
    ctx.emit("cast", {"X": w}, {"Out": out}, {"in_dtype": int(DType.float32), "out_dtype": int(dtype)})


def _cosine_term(ctx: GraphContext, angle: str, times: float, factor: float, bias: float, hint: str) -> str:
    """factor * cos(times * angle) + bias."""
    multiple, cosine, term = (ctx.temp(f"{hint}.{what}") for what in ("multiple", "cos", "term"))
    ctx.emit("scale", {"X": angle}, {"Out": multiple}, {"scale": times})
    ctx.emit("cos", {"X": multiple}, {"Out": cosine})
    ctx.emit("scale", {"X": cosine}, {"Out": term}, {"scale": factor, "bias": bias})
    return term


@converts("CausalConvWithState")
def causal_conv_with_state(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """The (k - 1) past steps (past_state, else zeros) put before the input, a depthwise convolution
    without padding over them (lifted to 2-D), the bias, SiLU for 'silu' and 'swish'; present_state
    is the last k - 1 steps of what was convolved."""
    x, weight = node.input[0], node.input[1]
    bias, past = (node.input[i] if len(node.input) > i else "" for i in (2, 3))
    activation = attrs.get("activation", "none")
    (channels, _, taps), out = ctx.static_shape(weight, "CausalConvWithState's weight"), node.output[0]
    if activation not in ("none", "silu", "swish") or taps < 2:
        ctx.fail(f"activation {activation!r} (one of 'none', 'silu', 'swish') and kernel size {taps} (2 or more)")
    padded = ctx.temp(f"{out}.padded")
    if past:
        ctx.emit("concat", {"X": [past, x]}, {"Out": padded}, {"axis": 2})
    else:
        ctx.emit("pad", {"X": x}, {"Out": padded}, {"paddings": [0, 0, 0, 0, taps - 1, 0], "pad_value": 0.0})
    lifted, filters, conv = ctx.temp(f"{out}.2d"), ctx.temp(f"{out}.filter"), ctx.temp(f"{out}.conv")
    ctx.emit("unsqueeze2", {"X": padded}, {"Out": lifted}, {"axes": [2]})
    ctx.emit("unsqueeze2", {"X": weight}, {"Out": filters}, {"axes": [2]})
    ctx.emit("depthwise_conv2d", {"Input": lifted, "Filter": filters}, {"Output": conv}, {"groups": channels})
    stages: list[tuple[str, dict[str, str], dict[str, Any]]] = [("squeeze2", {}, {"axes": [2]})]
    if bias:
        stages.append(("elementwise_add", {"Y": bias}, {"axis": 1}))
    if activation != "none":
        stages.append(("silu", {}, {}))
    value = conv
    for i, (op_type, inputs, op_attrs) in enumerate(stages):
        step = out if i == len(stages) - 1 else ctx.temp(f"{out}.{op_type}")
        ctx.emit(op_type, {"X": value, **inputs}, {"Out": step}, op_attrs)
        value = step
    if len(node.output) > 1 and node.output[1]:
        ctx.emit("slice", {"Input": padded}, {"Out": node.output[1]},
                 {"axes": [2], "starts": [-(taps - 1)], "ends": [2**31 - 1]})
