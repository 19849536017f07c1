"""Converters from ``pd_op`` ops to halfway's (Paddle's legacy) vocabulary, keyed by the PIR op's
name without its dialect. A converter reads one ``PirOp`` and appends legacy ops through the
``PirContext``; operands PIR passes as tensors that the legacy op holds as attrs (reshape's shape,
pool2d's kernel size, scale's factor, dropout's p, slice's starts and ends) are folded from their
``pd_op.full`` / ``full_int_array`` constants, and stay tensor inputs where they are computed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from halfway.frontends.paddle.context import PirContext
from halfway.frontends.paddle.pir import MISSING, PirOp
from halfway.ir.dtypes import DType

__all__ = ["CONVERTERS", "supported_ops"]

Converter = Callable[[PirContext, PirOp], None]
CONVERTERS: dict[str, Converter] = {}


def converts(*names: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for name in names:
            CONVERTERS[name] = fn
        return fn

    return register


def supported_ops() -> list[str]:
    """The ``pd_op`` names (without dialect) the importer converts."""
    return sorted(CONVERTERS)


def _dtype(name: str) -> DType:
    return DType.from_any(name)


# -- one to one: pd_op name -> (legacy type, attr renames) -------------------------------------------
_ONE_TO_ONE = {
    # X -> Out, attrs renamed
    "relu": ("relu", {}), "sigmoid": ("sigmoid", {}), "tanh": ("tanh", {}), "relu6": ("relu6", {}),
    "gelu": ("gelu", {"approximate": "approximate"}), "softmax": ("softmax", {"axis": "axis"}),
    "hardswish": ("hard_swish", {}), "hardsigmoid": ("hard_sigmoid", {"slope": "slope", "offset": "offset"}),
    "swish": ("swish", {}), "silu": ("silu", {}), "exp": ("exp", {}), "sqrt": ("sqrt", {}), "erf": ("erf", {}),
    "transpose": ("transpose2", {"perm": "axis"}),
    "flatten": ("flatten_contiguous_range", {"start_axis": "start_axis", "stop_axis": "stop_axis"}),
}
_BINARY = {"add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
           "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
           "elementwise_pow": "elementwise_pow"}


def _unary(ctx: PirContext, op: PirOp) -> None:
    legacy, renames = _ONE_TO_ONE[op.short]
    ctx.emit(legacy, {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {new: op.attrs[old] for old, new in renames.items()})


def _binary(ctx: PirContext, op: PirOp) -> None:
    ctx.emit(_BINARY[op.short], {"X": op.inputs[0], "Y": op.inputs[1]}, {"Out": op.outputs[0]}, {"axis": -1})


for _name in _ONE_TO_ONE:
    converts(_name)(_unary)
for _name in _BINARY:
    converts(_name)(_binary)


# -- constants ---------------------------------------------------------------------------------------
@converts("full")
def _full(ctx: PirContext, op: PirOp) -> None:
    dtype = _dtype(op.attrs["dtype"]).numpy
    ctx.consts[op.outputs[0]] = np.full(op.attrs["shape"], op.attrs["value"], dtype=dtype)


@converts("full_int_array")
def _full_int_array(ctx: PirContext, op: PirOp) -> None:
    ctx.consts[op.outputs[0]] = np.array(op.attrs["value"], dtype=_dtype(op.attrs["dtype"]).numpy)


@converts("combine")
def _combine(ctx: PirContext, op: PirOp) -> None:
    ctx.lists[op.outputs[0]] = list(op.inputs)


@converts("full_like")
def _full_like(ctx: PirContext, op: PirOp) -> None:
    value = float(ctx.const(op.inputs[1], "full_like's value").reshape(-1)[0])
    ctx.emit("fill_any_like", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"value": value, "dtype": int(_dtype(op.attrs["dtype"]))})


# -- nn ----------------------------------------------------------------------------------------------
_CONV_ATTRS = ("strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format")


@converts("conv2d", "depthwise_conv2d")
def _conv2d(ctx: PirContext, op: PirOp) -> None:
    ctx.emit(op.short, {"Input": op.inputs[0], "Filter": op.inputs[1]}, {"Output": op.outputs[0]},
             {name: op.attrs[name] for name in _CONV_ATTRS})


@converts("conv2d_transpose")
def _conv2d_transpose(ctx: PirContext, op: PirOp) -> None:
    attrs = {name: op.attrs[name] for name in (*_CONV_ATTRS, "output_padding")}
    if len(op.inputs) > 2 and ctx.given(op.inputs[2]):
        attrs["output_size"] = ctx.ints(op.inputs[2], "conv2d_transpose's output_size")
    ctx.emit("conv2d_transpose", {"Input": op.inputs[0], "Filter": op.inputs[1]}, {"Output": op.outputs[0]}, attrs)


@converts("batch_norm", "batch_norm_")
def _batch_norm(ctx: PirContext, op: PirOp) -> None:
    x, mean, variance, scale, bias = op.inputs[:5]
    ctx.emit("batch_norm", {"X": x, "Mean": mean, "Variance": variance, "Scale": scale, "Bias": bias},
             {"Y": op.outputs[0], "SavedMean": op.outputs[3], "SavedVariance": op.outputs[4]},
             {"epsilon": op.attrs["epsilon"], "momentum": op.attrs["momentum"],
              "data_layout": op.attrs["data_format"], "is_test": op.attrs["is_test"],
              "use_global_stats": op.attrs["use_global_stats"],
              "trainable_statistics": op.attrs["trainable_statistics"]},
             inplace={"MeanOut": mean, "VarianceOut": variance})
    ctx.names[op.outputs[1]], ctx.names[op.outputs[2]] = ctx.var(mean), ctx.var(variance)


@converts("layer_norm")
def _layer_norm(ctx: PirContext, op: PirOp) -> None:
    x, scale, bias = op.inputs
    y, mean, variance = op.outputs
    ctx.emit("layer_norm", {"X": x, "Scale": scale, "Bias": bias}, {"Y": y, "Mean": mean, "Variance": variance},
             {"epsilon": op.attrs["epsilon"], "begin_norm_axis": op.attrs["begin_norm_axis"]})


@converts("pool2d")
def _pool2d(ctx: PirContext, op: PirOp) -> None:
    attrs = {name: op.attrs[name] for name in ("strides", "paddings", "ceil_mode", "exclusive", "data_format",
                                               "pooling_type", "global_pooling", "adaptive", "padding_algorithm")}
    attrs["ksize"] = ctx.ints(op.inputs[1], "pool2d's kernel_size")
    ctx.emit("pool2d", {"X": op.inputs[0]}, {"Out": op.outputs[0]}, attrs)


@converts("matmul")
def _matmul(ctx: PirContext, op: PirOp) -> None:
    ctx.emit("matmul_v2", {"X": op.inputs[0], "Y": op.inputs[1]}, {"Out": op.outputs[0]},
             {"trans_x": op.attrs["transpose_x"], "trans_y": op.attrs["transpose_y"]})


@converts("embedding")
def _embedding(ctx: PirContext, op: PirOp) -> None:
    ctx.emit("lookup_table_v2", {"Ids": op.inputs[0], "W": op.inputs[1]}, {"Out": op.outputs[0]},
             {"padding_idx": op.attrs["padding_idx"]})


@converts("dropout")
def _dropout(ctx: PirContext, op: PirOp) -> None:
    p = float(ctx.const(op.inputs[2], "dropout's p").reshape(-1)[0])
    ctx.emit("dropout", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"dropout_prob": p, "is_test": op.attrs["is_test"], "dropout_implementation": op.attrs["mode"],
              "fix_seed": op.attrs["fix_seed"], "seed": op.attrs["seed"]})


@converts("nearest_interp", "bilinear_interp", "linear_interp", "bicubic_interp", "trilinear_interp")
def _interp(ctx: PirContext, op: PirOp) -> None:
    x, out_size, size_tensor, scale = (op.inputs + [MISSING] * 3)[:4]
    attrs = {name: op.attrs[name] for name in ("out_d", "out_h", "out_w", "interp_method", "align_corners",
                                               "align_mode")}
    attrs["data_layout"] = op.attrs["data_format"]
    attrs["scale"] = [float(s) for s in op.attrs["scale"]]
    inputs: dict[str, int | list[int]] = {"X": x, "OutSize": out_size, "Scale": scale}
    if ctx.given(size_tensor):
        inputs["SizeTensor"] = ctx.listed(size_tensor)
    ctx.emit(f"{op.short}_v2", inputs, {"Out": op.outputs[0]}, attrs)


# -- math --------------------------------------------------------------------------------------------
@converts("scale")
def _scale(ctx: PirContext, op: PirOp) -> None:
    attrs = {"bias": op.attrs["bias"], "bias_after_scale": op.attrs["bias_after_scale"]}
    inputs = {"X": op.inputs[0]}
    if ctx.is_const(op.inputs[1]):
        attrs["scale"] = float(ctx.consts[op.inputs[1]].reshape(-1)[0])
    else:
        inputs["ScaleTensor"] = op.inputs[1]
    ctx.emit("scale", inputs, {"Out": op.outputs[0]}, attrs)


@converts("cast")
def _cast(ctx: PirContext, op: PirOp) -> None:
    source = ctx.block.var(ctx.var(op.inputs[0])).dtype
    ctx.emit("cast", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"in_dtype": int(source), "out_dtype": int(_dtype(op.attrs["dtype"]))})


@converts("cumsum")
def _cumsum(ctx: PirContext, op: PirOp) -> None:
    axis = int(ctx.const(op.inputs[1], "cumsum's axis").reshape(-1)[0])
    ctx.emit("cumsum", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"axis": axis, **{name: op.attrs[name] for name in ("flatten", "exclusive", "reverse")}})


# -- tensor ------------------------------------------------------------------------------------------
@converts("reshape")
def _reshape(ctx: PirContext, op: PirOp) -> None:
    x, shape = op.inputs[:2]
    if ctx.is_const(shape):
        ctx.emit("reshape2", {"X": x}, {"Out": op.outputs[0]}, {"shape": ctx.ints(shape, "reshape's shape")})
    else:
        ctx.emit("reshape2", {"X": x, "Shape": shape}, {"Out": op.outputs[0]})


@converts("unsqueeze", "squeeze")
def _unsqueeze(ctx: PirContext, op: PirOp) -> None:
    axes = ctx.ints(op.inputs[1], f"{op.short}'s axes")
    ctx.emit(f"{op.short}2", {"X": op.inputs[0]}, {"Out": op.outputs[0]}, {"axes": axes})


@converts("concat")
def _concat(ctx: PirContext, op: PirOp) -> None:
    axis = int(ctx.const(op.inputs[1], "concat's axis").reshape(-1)[0])
    ctx.emit("concat", {"X": ctx.listed(op.inputs[0])}, {"Out": op.outputs[0]}, {"axis": axis})


@converts("slice")
def _slice(ctx: PirContext, op: PirOp) -> None:
    x, starts, ends = op.inputs[:3]
    attrs = {name: op.attrs[name] for name in ("axes", "infer_flags", "decrease_axis")}
    inputs = {"Input": x}
    for slot, attr, value in (("StartsTensor", "starts", starts), ("EndsTensor", "ends", ends)):
        if ctx.is_const(value):
            attrs[attr] = ctx.ints(value, f"slice's {attr}")
        else:
            inputs[slot] = value
            attrs[attr] = [0] * len(attrs["axes"])
    ctx.emit("slice", inputs, {"Out": op.outputs[0]}, attrs)


@converts("shape", "shape64")
def _shape(ctx: PirContext, op: PirOp) -> None:
    """Legacy ``shape`` writes int32; ``shape64`` (and PIR's int64 ``shape``) add a cast."""
    declared = ctx.types.get(op.outputs[0])
    if declared is not None and declared.dtype is DType.int32:
        ctx.emit("shape", {"Input": op.inputs[0]}, {"Out": op.outputs[0]})
        return
    dims = ctx.emit("shape", {"Input": op.inputs[0]}, {"Out": None}).output("Out")[0]
    ctx.emit("cast", {"X": ctx.scratch(dims)}, {"Out": op.outputs[0]},
             {"in_dtype": int(DType.int32), "out_dtype": int(DType.int64)})
