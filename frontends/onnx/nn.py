"""Converters of ONNX's neural-network ops: Conv, ConvTranspose, pooling (MaxPool, AveragePool and
LpPool in 1-D, 2-D and 3-D, dilated or not), BatchNormalization, LRN, Dropout, Softmax, Gemm and
MatMul.

Padding: ONNX ``pads`` are ``[x1_begin, x2_begin, x1_end, x2_end]``; Paddle's 4-value
``paddings`` are ``[top, bottom, left, right]``. ``auto_pad`` SAME_UPPER/SAME_LOWER are
resolved to explicit pads from the static input size (dilations included, as ONNX counts
them); with an unknown size, SAME_UPPER without dilation maps to Paddle's ``SAME``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, helper

from ...ir.dtypes import DType
from .context import GraphContext
from .registry import Converter, converts

__all__: list[str] = []


# -- sliding windows ---------------------------------------------------------------------------------
def _spatial(ctx: GraphContext, node: NodeProto, x: str) -> tuple[int, ...]:
    shape = ctx.shape(x)
    if len(shape) != 4:
        ctx.fail(f"only 1-D and 2-D {node.op_type} (a 3-D or 4-D input) are supported, input {x!r} has shape "
                 f"{list(shape)}")
    return shape[2:]


_WINDOW_LISTS = ("kernel_shape", "strides", "dilations", "output_padding", "output_shape")


def _lifts_1d(convert: Converter) -> Converter:
    """Let a 2-D window converter take 1-D nodes: [N, C, L] runs as [N, C, 1, L] (and a
    [O, I, k] filter as [O, I, 1, k]), the unit dim squeezed away after."""

    @functools.wraps(convert)
    def wrapper(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
        if len(ctx.shape(node.input[0])) != 3:
            return convert(ctx, node, attrs)
        inputs = [_unit_height(ctx, name) if i < 2 and name else name for i, name in enumerate(node.input)]
        if node.op_type not in ("Conv", "ConvTranspose"):
            inputs[1:] = node.input[1:]
        lifted = {k: [1, *v] if k in _WINDOW_LISTS else v for k, v in attrs.items()}
        if "pads" in attrs:
            lifted["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
        out = ctx.temp(node.output[0])
        convert(ctx, helper.make_node(node.op_type, inputs, [out, *node.output[1:]], name=node.name), lifted)
        ctx.emit("squeeze2", {"X": out}, {"Out": node.output[0]}, {"axes": [2]})
        return None

    return wrapper


def _unit_height(ctx: GraphContext, name: str) -> str:
    if ctx.is_const(name):
        return ctx.add_const(f"{name}.2d", np.expand_dims(ctx.consts[name], 2))
    lifted = ctx.temp(f"{name}.2d")
    ctx.emit("unsqueeze2", {"X": name}, {"Out": lifted}, {"axes": [2]})
    return lifted


def _paddings(ctx: GraphContext, attrs: dict[str, Any], sizes: Sequence[int], kernel: Sequence[int],
              strides: Sequence[int], dilations: Sequence[int]) -> tuple[list[int], str]:
    """(Paddle ``paddings``, ``padding_algorithm``) for a window over ``sizes``."""
    auto_pad, n = attrs.get("auto_pad", "NOTSET"), len(sizes)
    if auto_pad == "VALID":
        return [0] * (2 * n), "EXPLICIT"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if any(s < 0 for s in sizes):
            if auto_pad == "SAME_UPPER" and all(d == 1 for d in dilations):
                return [0] * (2 * n), "SAME"
            ctx.fail(f"auto_pad {auto_pad} needs static spatial dims, got {list(sizes)}")
        pads = []
        for size, k, s, d in zip(sizes, kernel, strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
        return [p for pair in pads for p in pair], "EXPLICIT"
    if auto_pad != "NOTSET":
        ctx.fail(f"unknown auto_pad {auto_pad!r}")
    onnx_pads = list(attrs.get("pads", [0] * (2 * n)))
    return [p for i in range(n) for p in (onnx_pads[i], onnx_pads[n + i])], "EXPLICIT"


def _window_attrs(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], kernel: Sequence[int],
                  dilations: Sequence[int]) -> dict[str, Any]:
    sizes = _spatial(ctx, node, node.input[0])
    strides = list(attrs.get("strides", [1, 1]))
    paddings, algorithm = _paddings(ctx, attrs, sizes, kernel, strides, dilations)
    return {"strides": strides, "paddings": paddings, "padding_algorithm": algorithm}


# -- convolution -------------------------------------------------------------------------------------
def _with_bias(ctx: GraphContext, node: NodeProto, op_type: str, inputs: dict[str, str], attrs: dict[str, Any]) -> None:
    """Emit ``op_type`` and, when the node has a bias (input 2), Paddle's channel-wise add of it."""
    out = node.output[0]
    has_bias = len(node.input) > 2 and bool(node.input[2])
    raw = ctx.temp(out) if has_bias else out
    ctx.emit(op_type, inputs, {"Output": raw}, attrs)
    if has_bias:
        ctx.emit("elementwise_add", {"X": raw, "Y": node.input[2]}, {"Out": out}, {"axis": 1})


@converts("Conv")
@_lifts_1d
def conv(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, w = node.input[0], node.input[1]
    w_shape = ctx.shape(w)
    kernel = list(attrs.get("kernel_shape", w_shape[2:]))
    dilations = list(attrs.get("dilations", [1, 1]))
    group = attrs.get("group", 1)
    conv_attrs = _window_attrs(ctx, node, attrs, kernel, dilations) | {"groups": group, "dilations": dilations}
    channels = ctx.shape(x)[1]
    depthwise = group > 1 and group == channels and w_shape[1] == 1
    _with_bias(ctx, node, "depthwise_conv2d" if depthwise else "conv2d", {"Input": x, "Filter": w}, conv_attrs)


@converts("ConvTranspose")
@_lifts_1d
def conv_transpose(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, w = node.input[0], node.input[1]
    sizes = _spatial(ctx, node, x)
    kernel = list(attrs.get("kernel_shape", ctx.shape(w)[2:]))
    strides = list(attrs.get("strides", [1, 1]))
    dilations = list(attrs.get("dilations", [1, 1]))
    output_padding = list(attrs.get("output_padding", [0, 0]))
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if "output_shape" in attrs or attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        if any(s < 0 for s in sizes):
            ctx.fail(f"output_shape/auto_pad need static spatial dims, got {list(sizes)}")
        target = list(attrs["output_shape"])[-2:] if "output_shape" in attrs else [s * st for s, st in zip(sizes, strides)]
        pads = []
        for size, s, e, op, t in zip(sizes, strides, extents, output_padding, target):
            total = max(s * (size - 1) + op + e - t, 0)
            upper = attrs.get("auto_pad", "NOTSET") != "SAME_LOWER"
            pads.append((total // 2, total - total // 2) if upper else (total - total // 2, total // 2))
        paddings = [p for pair in pads for p in pair]
    else:
        paddings, _ = _paddings(ctx, attrs, sizes, kernel, strides, dilations)
        target = None
    conv_attrs = {"strides": strides, "paddings": paddings, "dilations": dilations, "groups": attrs.get("group", 1)}
    if target is not None:
        conv_attrs["output_size"] = target
    elif any(output_padding):
        conv_attrs["output_padding"] = output_padding
    inputs = {"Input": x, "Filter": w}
    if len(node.input) > 2 and node.input[2]:
        inputs["Bias"] = node.input[2]
    ctx.emit("conv2d_transpose", inputs, {"Output": node.output[0]}, conv_attrs)


# -- pooling -----------------------------------------------------------------------------------------
def _onnx_pool_out(size: int, k: int, s: int, before: int, after: int, ceil_mode: bool) -> int:
    """ONNX's pooled size: ceil mode drops a last window that would start in the end padding."""
    span = size + before + after - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + before:
        out -= 1
    return out


_POOLING = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}


@converts("MaxPool", "AveragePool", "LpPool")
@_lifts_1d
def pool(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """pool2d, or pool3d for a 5-D input; LpPool is "lp" pooling of order p."""
    if ctx.is_used(node, 1):
        ctx.fail("the Indices output of MaxPool is not supported")
    sizes = ctx.shape(node.input[0])[2:]
    if len(sizes) not in (2, 3):
        ctx.fail(f"only 1-D, 2-D and 3-D {node.op_type} are supported, the input has shape "
                 f"{list(ctx.shape(node.input[0]))}")
    kernel, dims = list(attrs["kernel_shape"]), len(sizes)
    dilations, strides = list(attrs.get("dilations", [1] * dims)), list(attrs.get("strides", [1] * dims))
    paddings, algorithm = _paddings(ctx, attrs, sizes, kernel, strides, dilations)
    window = {"strides": strides, "paddings": paddings, "padding_algorithm": algorithm}
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    exclusive = not attrs.get("count_include_pad", 0)
    pooling = _POOLING[node.op_type]
    op_type = "pool2d" if dims == 2 else "pool3d"
    plain = dims == 2 and pooling != "lp" and dilations == [1, 1]
    if plain and _covers_input(ctx, node, kernel, window, ceil_mode, exclusive or not any(window["paddings"])):
        ctx.emit("pool2d", {"X": node.input[0]}, {"Out": node.output[0]},
                 {"pooling_type": pooling, "ksize": [1, 1], "global_pooling": True})
        return
    if ceil_mode and window["padding_algorithm"] == "EXPLICIT":
        # ONNX counts the explicit pads, never a ceil-mode window's overhang past them
        exclusive = exclusive or not any(window["paddings"])
        extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        window["paddings"], ceil_mode = _ceil_pads(sizes, extents, window)
    options = {"pooling_type": pooling, "ksize": kernel, "ceil_mode": ceil_mode, "exclusive": exclusive}
    if any(d != 1 for d in dilations):
        options["dilations"] = dilations
    if pooling == "lp":
        options["norm_type"] = float(attrs.get("p", 2))
    if dims == 3:
        options["data_format"] = "NCDHW"
    ctx.emit(op_type, {"X": node.input[0]}, {"Out": node.output[0]}, window | options)


def _covers_input(ctx: GraphContext, node: NodeProto, kernel: Sequence[int], window: dict[str, Any],
                  ceil_mode: bool, counts_input_only: bool) -> bool:
    """Whether the pool is one window over the whole input, averaging (or maximising) the input
    alone: a global pool (an exporter's pooler with a kernel larger than the map)."""
    sizes = _spatial(ctx, node, node.input[0])
    pads = window["paddings"]
    if window["padding_algorithm"] != "EXPLICIT" or any(s < 0 for s in sizes) or pads[0] or pads[2]:
        return False
    outs = [_onnx_pool_out(size, k, s, pads[2 * i], pads[2 * i + 1], ceil_mode)
            for i, (size, k, s) in enumerate(zip(sizes, kernel, window["strides"]))]
    return outs == [1, 1] and all(k >= size for k, size in zip(kernel, sizes)) and counts_input_only


def _ceil_pads(sizes: Sequence[int], extents: Sequence[int], window: dict[str, Any]) -> tuple[list[int], bool]:
    """Paddings and ceil_mode giving ONNX's ceil-mode output size (Paddle's ceil mode keeps a
    last window starting in the end padding, ONNX drops it): extra end padding, floor mode.
    ``extents``: the windows' spans, dilations included."""
    if any(s < 0 for s in sizes):
        return window["paddings"], True
    pads = list(window["paddings"])
    for i, (size, k, s) in enumerate(zip(sizes, extents, window["strides"])):
        before, after = pads[2 * i], pads[2 * i + 1]
        out = _onnx_pool_out(size, k, s, before, after, True)
        pads[2 * i + 1] = max(after, (out - 1) * s + k - size - before)
    return pads, False


@converts("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """pool2d for a 4-D input; the mean or maximum over the spatial dims for any other rank."""
    rank = len(ctx.shape(node.input[0]))
    if rank != 4:
        if rank < 3:
            ctx.fail(f"the input needs a batch, a channel and spatial dims, has rank {rank}")
        ctx.emit("reduce_max" if node.op_type == "GlobalMaxPool" else "reduce_mean", {"X": node.input[0]},
                 {"Out": node.output[0]}, {"dim": list(range(2, rank)), "keep_dim": True})
        return
    ctx.emit("pool2d", {"X": node.input[0]}, {"Out": node.output[0]}, {
        "pooling_type": "max" if node.op_type == "GlobalMaxPool" else "avg", "ksize": [1, 1],
        "global_pooling": True})


# -- normalisation, dropout, softmax -------------------------------------------------------------------
@converts("BatchNormalization")
def batch_norm(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    if attrs.get("training_mode", 0) or any(ctx.is_used(node, i) for i in range(1, len(node.output))):
        ctx.fail("only inference BatchNormalization (one output, no training_mode) is supported")
    if not attrs.get("spatial", 1):
        ctx.fail("BatchNormalization with spatial=0 is not supported")
    x, scale, bias, mean, var = node.input[:5]
    saved = ctx.temp(f"{node.output[0]}.saved_mean"), ctx.temp(f"{node.output[0]}.saved_variance")
    ctx.emit("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var},
             {"Y": node.output[0], "SavedMean": saved[0], "SavedVariance": saved[1]},
             {"epsilon": attrs.get("epsilon", 1e-5), "momentum": attrs.get("momentum", 0.9), "is_test": True,
              "use_global_stats": True},
             inplace={"MeanOut": ctx.var(mean), "VarianceOut": ctx.var(var)})


@converts("LRN")
def lrn(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    size = attrs["size"]
    if size < 1:
        ctx.fail(f"size {size} must be positive")
    ctx.emit("lrn", {"X": node.input[0]}, {"Out": node.output[0], "MidOut": ctx.temp(f"{node.output[0]}.mid")},
             {"n": size, "k": attrs.get("bias", 1.0), "alpha": attrs.get("alpha", 1e-4) / size,
              "beta": attrs.get("beta", 0.75)})


@converts("Dropout")
def dropout(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Inference dropout is the identity; its mask, when read, is all true."""
    if len(node.input) > 2 and node.input[2] and bool(ctx.const(node.input[2], "training_mode")):
        ctx.fail("Dropout in training mode is not supported")
    outputs = {"Out": node.output[0]}
    mask = ctx.temp(f"{node.output[0]}.mask") if ctx.is_used(node, 1) else None
    if mask is not None:
        outputs["Mask"] = mask
    ctx.emit("dropout", {"X": node.input[0]}, outputs,
             {"is_test": True, "dropout_implementation": "upscale_in_train",
              "dropout_prob": float(attrs.get("ratio", 0.5))})
    if mask is not None:
        ctx.emit("cast", {"X": mask}, {"Out": node.output[1]},
                 {"in_dtype": int(DType.uint8), "out_dtype": int(DType.bool)})


@converts("Softmax", "LogSoftmax")
def softmax(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Opset 13 on: (log_)softmax along ``axis`` (default -1). Before: X flattened to 2-D at
    ``axis`` (default 1), (log_)softmax over the second dim, reshaped back."""
    x, out = node.input[0], node.output[0]
    op_type = "softmax" if node.op_type == "Softmax" else "log_softmax"
    rank = len(ctx.shape(x))
    if ctx.opset >= 13:
        ctx.emit(op_type, {"X": x}, {"Out": out}, {"axis": attrs.get("axis", -1)})
        return
    axis = ctx.axis(attrs.get("axis", 1), max(rank, 1))
    if axis == rank - 1:
        ctx.emit(op_type, {"X": x}, {"Out": out}, {"axis": -1})
        return
    shape = ctx.static_shape(x, f"{node.op_type} before opset 13 over several dims")
    flat, soft = ctx.temp(f"{out}.2d"), ctx.temp(f"{out}.soft")
    ctx.emit("reshape2", {"X": x}, {"Out": flat}, {"shape": [int(np.prod(shape[:axis])), -1]})
    ctx.emit(op_type, {"X": flat}, {"Out": soft}, {"axis": -1})
    ctx.emit("reshape2", {"X": soft}, {"Out": out}, {"shape": list(shape)})


# -- matrix products -----------------------------------------------------------------------------------
@converts("MatMul")
def matmul(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    ctx.emit("matmul_v2", {"X": node.input[0], "Y": node.input[1]}, {"Out": node.output[0]})


@converts("Gemm")
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
