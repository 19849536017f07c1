"""Converters of ONNX's normalisations and the ops alike: BatchNormalization, LayerNormalization,
InstanceNormalization, GroupNormalization, RMSNormalization, LRN, Softmax / LogSoftmax and PRelu.

ONNX's scale and bias broadcast to the normalised dims; Paddle's are one value per normalised
entry (layer_norm) or per channel, so smaller ones are expanded first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []


def _expanded(ctx: GraphContext, name: str, shape: Sequence[int], hint: str) -> str:
    """``name`` broadcast to ``shape`` (as it is when it has that many values already)."""
    if math.prod(ctx.shape(name)) == math.prod(shape):
        return name
    if ctx.is_const(name):
        return ctx.add_const(f"{hint}.expanded", np.broadcast_to(ctx.consts[name], shape).copy())
    out = ctx.temp(f"{hint}.expanded")
    ctx.emit("expand_v2", {"X": name}, {"Out": out}, {"shape": list(shape)})
    return out


def _normalized_dims(ctx: GraphContext, dims: Sequence[int], scale: str) -> list[int]:
    """The normalised dims of a LayerNormalization: X's, with the unknown ones (-1) read from the
    scale, which ONNX broadcasts to them (a transformer's hidden size is static even when its
    batch and sequence are not)."""
    scale_shape = ctx.shape(scale)
    padded = [-1] * (len(dims) - len(scale_shape)) + list(scale_shape[-len(dims):] if dims else [])
    known = [d if d >= 0 else s if s > 1 else -1 for d, s in zip(dims, padded)]
    if any(d < 0 for d in known):
        ctx.fail(f"the normalised dims {list(dims)} (-1 = unknown) of X are not known, nor given by the scale's "
                 f"shape {list(scale_shape)}; give the model's inputs fixed shapes (input_shapes=...)")
    return known


def _optional(node: NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


def _statistic(ctx: GraphContext, node: NodeProto, index: int, value: str,
               dims: Sequence[int | tuple[str, int]]) -> None:
    """Output ``index`` of ``node`` (when used) as ``value`` reshaped to ``dims``."""
    if ctx.is_used(node, index):
        ctx.reshape_to(value, dims, node.output[index])


@converts("LayerNormalization", makes="layer_norm")
def layer_norm(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Mean and InvStdDev (1 / sqrt(variance + epsilon)) keep the normalised dims as 1s."""
    x, out = node.input[0], node.output[0]
    shape = ctx.shape(x)
    axis = ctx.axis(attrs.get("axis", -1), len(shape))
    epsilon = float(attrs.get("epsilon", 1e-5))
    normalized = _normalized_dims(ctx, shape[axis:], node.input[1])
    inputs = {"X": x, "Scale": _expanded(ctx, node.input[1], normalized, f"{out}.scale")}
    if _optional(node, 2):
        inputs["Bias"] = _expanded(ctx, node.input[2], normalized, f"{out}.bias")
    mean, variance = ctx.temp(f"{out}.mean"), ctx.temp(f"{out}.variance")
    ctx.emit("layer_norm", inputs, {"Y": out, "Mean": mean, "Variance": variance},
             {"begin_norm_axis": axis, "epsilon": epsilon})
    stats_shape = [*ctx.dims_of(x)[:axis], *[1] * (len(shape) - axis)]
    _statistic(ctx, node, 1, mean, stats_shape)
    if ctx.is_used(node, 2):
        shifted, inverse = ctx.temp(f"{out}.shifted"), ctx.temp(f"{out}.inverse")
        ctx.emit("scale", {"X": variance}, {"Out": shifted}, {"bias": epsilon})
        ctx.emit("pow", {"X": shifted}, {"Out": inverse}, {"factor": -0.5})
        _statistic(ctx, node, 2, inverse, stats_shape)


@converts("InstanceNormalization", makes="instance_norm")
def instance_norm(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    x, scale, bias = node.input
    ctx.emit("instance_norm", {"X": x, "Scale": scale, "Bias": bias}, {"Y": node.output[0]},
             {"epsilon": float(attrs.get("epsilon", 1e-5))})


@converts("GroupNormalization", makes="group_norm")
def group_norm(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """Opset 18's scale and bias hold one value per group: repeated over each group's channels."""
    x, out = node.input[0], node.output[0]
    groups, channels = attrs["num_groups"], ctx.static_shape(x, "GroupNormalization")[1]
    inputs = {"X": x}
    for slot, name in (("Scale", node.input[1]), ("Bias", node.input[2])):
        inputs[slot] = name
        if ctx.shape(name) == (groups,) and groups != channels:
            wide, grid = ctx.temp(f"{out}.{slot}"), ctx.temp(f"{out}.{slot}.grid")
            ctx.emit("unsqueeze2", {"X": name}, {"Out": wide}, {"axes": [1]})
            ctx.emit("expand_v2", {"X": wide}, {"Out": grid}, {"shape": [groups, channels // groups]})
            inputs[slot] = ctx.temp(f"{out}.{slot}.channels")
            ctx.emit("reshape2", {"X": grid}, {"Out": inputs[slot]}, {"shape": [channels]})
    ctx.emit("group_norm", inputs, {"Y": out}, {"epsilon": float(attrs.get("epsilon", 1e-5)), "groups": groups})


@converts("PRelu", makes="prelu")
def prelu(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """One slope: mode all; one per channel ([C, 1, ...]): channel; a slope that broadcasts over a
    sample's dims: element; any other (one per batch entry too): X where X > 0 else slope * X."""
    x, slope = node.input
    out = node.output[0]
    shape, slope_shape = ctx.shape(x), ctx.shape(slope)
    size = math.prod(slope_shape)
    if size == 1:
        mode = "all"
    elif len(shape) >= 2 and slope_shape[0] == size == shape[1] and len(slope_shape) == len(shape) - 1:
        mode = "channel"
    elif len(slope_shape) < len(shape):
        mode = "element"
        slope = _expanded(ctx, slope, ctx.static_shape(x, "PRelu with a per-element slope")[1:], out)
    else:
        positive, scaled = ctx.temp(f"{out}.positive"), ctx.temp(f"{out}.scaled")
        zero = ctx.add_const(f"{out}.zero", np.zeros((), ctx.info(x).dtype.numpy))
        ctx.emit("greater_than", {"X": x, "Y": zero}, {"Out": positive}, {"axis": -1})
        ctx.emit("elementwise_mul", {"X": x, "Y": slope}, {"Out": scaled}, {"axis": -1})
        ctx.emit("where", {"Condition": positive, "X": x, "Y": scaled}, {"Out": out})
        return
    ctx.emit("prelu", {"X": x, "Alpha": slope}, {"Out": out}, {"mode": mode})


@converts("BatchNormalization", makes="batch_norm")
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


@converts("LRN", makes="lrn")
def lrn(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    size = attrs["size"]
    if size < 1:
        ctx.fail(f"size {size} must be positive")
    ctx.emit("lrn", {"X": node.input[0]}, {"Out": node.output[0], "MidOut": ctx.temp(f"{node.output[0]}.mid")},
             {"n": size, "k": attrs.get("bias", 1.0), "alpha": attrs.get("alpha", 1e-4) / size,
              "beta": attrs.get("beta", 0.75)})


@converts("Softmax", "LogSoftmax", makes={"Softmax": "softmax", "LogSoftmax": "log_softmax"})
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


@converts("RMSNormalization", makes="rms_norm")
def rms_normalization(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """``stash_type`` needs nothing: the kernels compute the statistics in float32 at least."""
    x, scale = node.input[:2]
    axis = ctx.axis(attrs.get("axis", -1), len(ctx.shape(x)))
    ctx.emit("rms_norm", {"X": x, "Scale": scale}, {"Y": node.output[0]},
             {"begin_norm_axis": axis, "epsilon": float(attrs.get("epsilon", 1e-5))})
