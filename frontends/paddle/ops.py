"""Converters from ``pd_op`` ops to halfway's (Paddle's legacy) vocabulary, keyed by the PIR op's
name without its dialect. A converter reads one ``PirOp`` and appends legacy ops through the
``PirContext``; operands PIR passes as tensors that the legacy op holds as attrs (reshape's shape,
pool2d's kernel size, scale's factor, dropout's p, slice's starts and ends) are folded from their
``pd_op.full`` / ``full_int_array`` constants, and stay tensor inputs where they are computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from ...ir.dtypes import DType
from .context import PirContext
from .pir import MISSING, PirOp

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


# -- one to one --------------------------------------------------------------------------------------
class Mapped(NamedTuple):
    """A pd_op that is one legacy op: its type, the slots its operands and results take in order,
    and its attrs (PIR name -> legacy name)."""

    legacy: str
    inputs: tuple[str, ...] = ("X",)
    outputs: tuple[str, ...] = ("Out",)
    attrs: Mapping[str, str] = {}


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


_NORM_OUTPUTS = ("Y", "Mean", "Variance")
_CONV = Mapped("conv2d", ("Input", "Filter"), ("Output",),
               _same("strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format"))
_ONE_TO_ONE = {
    "relu": Mapped("relu"), "sigmoid": Mapped("sigmoid"), "tanh": Mapped("tanh"), "relu6": Mapped("relu6"),
    "swish": Mapped("swish"), "silu": Mapped("silu"), "exp": Mapped("exp"), "sqrt": Mapped("sqrt"),
    "erf": Mapped("erf"), "abs": Mapped("abs"), "log": Mapped("log"), "hardswish": Mapped("hard_swish"),
    "gelu": Mapped("gelu", attrs=_same("approximate")), "softmax": Mapped("softmax", attrs=_same("axis")),
    "hardsigmoid": Mapped("hard_sigmoid", attrs=_same("slope", "offset")),
    "leaky_relu": Mapped("leaky_relu", attrs={"negative_slope": "alpha"}),
    "elu": Mapped("elu", attrs=_same("alpha")), "softplus": Mapped("softplus", attrs=_same("beta", "threshold")),
    "pow": Mapped("pow", attrs={"y": "factor"}),
    "transpose": Mapped("transpose2", attrs={"perm": "axis"}),
    "flatten": Mapped("flatten_contiguous_range", attrs=_same("start_axis", "stop_axis")),
    "conv2d": _CONV, "depthwise_conv2d": _CONV._replace(legacy="depthwise_conv2d"),
    "matmul": Mapped("matmul_v2", ("X", "Y"), attrs={"transpose_x": "trans_x", "transpose_y": "trans_y"}),
    "embedding": Mapped("lookup_table_v2", ("Ids", "W"), attrs=_same("padding_idx")),
    "where": Mapped("where", ("Condition", "X", "Y")),
    "prelu": Mapped("prelu", ("X", "Alpha"), attrs=_same("mode", "data_format")),
    "layer_norm": Mapped("layer_norm", ("X", "Scale", "Bias"), _NORM_OUTPUTS, _same("epsilon", "begin_norm_axis")),
    "group_norm": Mapped("group_norm", ("X", "Scale", "Bias"), _NORM_OUTPUTS,
                         {**_same("epsilon", "groups"), "data_format": "data_layout"}),
    **{name: Mapped(legacy, ("X", "Y")) for name, legacy in (
        ("add", "elementwise_add"), ("subtract", "elementwise_sub"), ("multiply", "elementwise_mul"),
        ("divide", "elementwise_div"), ("maximum", "elementwise_max"), ("minimum", "elementwise_min"),
        ("elementwise_pow", "elementwise_pow"), ("greater_than", "greater_than"), ("less_than", "less_than"),
        ("equal", "equal"), ("not_equal", "not_equal"), ("greater_equal", "greater_equal"),
        ("less_equal", "less_equal"))},
}


def _one_to_one(ctx: PirContext, op: PirOp) -> None:
    mapped = _ONE_TO_ONE[op.short]
    ctx.emit(mapped.legacy, dict(zip(mapped.inputs, op.inputs)), dict(zip(mapped.outputs, op.outputs)),
             {new: op.attrs[old] for old, new in mapped.attrs.items()})


for _name in _ONE_TO_ONE:
    converts(_name)(_one_to_one)


# -- constants ---------------------------------------------------------------------------------------
@converts("full")
def _full(ctx: PirContext, op: PirOp) -> None:
    dtype, shape, value = _dtype(op.attrs["dtype"]).numpy, op.attrs["shape"], op.attrs["value"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        ctx.fail(f"value %{op.outputs[0]}: shape {shape!r} is not a list of dims")
    if not isinstance(value, (int, float)) or (dtype.kind in "iu" and not _fits(value, dtype)):
        ctx.fail(f"value %{op.outputs[0]}: value {value!r} is not {'an' if dtype.kind == 'i' else 'a'} {dtype}")
    ctx.check_size(op.outputs[0], shape, dtype)
    ctx.consts[op.outputs[0]] = np.full(shape, value, dtype=dtype)


def _fits(value: float, dtype: np.dtype) -> bool:
    """Whether an integer ``dtype`` holds ``value`` as it is (a whole number within its range)."""
    info = np.iinfo(dtype)
    return math.isfinite(value) and float(value).is_integer() and info.min <= int(value) <= info.max


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
@converts("conv2d_transpose")
def _conv2d_transpose(ctx: PirContext, op: PirOp) -> None:
    attrs = {name: op.attrs[name] for name in (*_CONV.attrs, "output_padding")}
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



@converts("pool2d")
def _pool2d(ctx: PirContext, op: PirOp) -> None:
    attrs = {name: op.attrs[name] for name in ("strides", "paddings", "ceil_mode", "exclusive", "data_format",
                                               "pooling_type", "global_pooling", "adaptive", "padding_algorithm")}
    attrs["ksize"] = ctx.ints(op.inputs[1], "pool2d's kernel_size")
    ctx.emit("pool2d", {"X": op.inputs[0]}, {"Out": op.outputs[0]}, attrs)




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
    source = ctx.block.var(ctx.var(op.inputs[0])).tensor_dtype
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



# -- further math, reductions and indexing ------------------------------------------------------------
@converts("rsqrt")
def _rsqrt(ctx: PirContext, op: PirOp) -> None:
    ctx.emit("pow", {"X": op.inputs[0]}, {"Out": op.outputs[0]}, {"factor": -0.5})


@converts("clip")
def _clip(ctx: PirContext, op: PirOp) -> None:
    inputs: dict[str, int] = {"X": op.inputs[0]}
    attrs = {}
    for slot, attr, value in (("Min", "min", op.inputs[1]), ("Max", "max", op.inputs[2])):
        if ctx.is_const(value):
            attrs[attr] = float(ctx.consts[value].reshape(-1)[0])
        else:
            inputs[slot], attrs[attr] = value, 0.0
    ctx.emit("clip", inputs, {"Out": op.outputs[0]}, attrs)


@converts("mean", "sum", "max", "min", "prod")
def _reduce(ctx: PirContext, op: PirOp) -> None:
    axes = ctx.ints(op.inputs[1], f"{op.short}'s axis")
    ctx.emit(f"reduce_{op.short}", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"dim": axes or [0], "keep_dim": op.attrs["keepdim"], "reduce_all": not axes})


@converts("argmax", "argmin")
def _arg(ctx: PirContext, op: PirOp) -> None:
    axis = int(ctx.const(op.inputs[1], f"{op.short}'s axis").reshape(-1)[0])
    ctx.emit(f"arg_{op.short[3:]}", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"axis": axis, "keepdims": op.attrs["keepdims"], "flatten": op.attrs["flatten"],
              "dtype": int(_dtype(op.attrs["dtype"]))})





@converts("pad3d")
def _pad3d(ctx: PirContext, op: PirOp) -> None:
    ctx.emit("pad3d", {"X": op.inputs[0]}, {"Out": op.outputs[0]},
             {"paddings": ctx.ints(op.inputs[1], "pad3d's paddings"), "mode": op.attrs["mode"],
              "value": op.attrs["pad_value"], "data_format": op.attrs["data_format"]})


@converts("expand", "tile")
def _expand_tile(ctx: PirContext, op: PirOp) -> None:
    """``expand``'s shape and ``tile``'s repeat times: attrs when constant, else a tensor."""
    legacy, slot, attr = ("expand_v2", "Shape", "shape") if op.short == "expand" else ("tile", "RepeatTimes",
                                                                                      "repeat_times")
    if ctx.is_const(op.inputs[1]):
        ctx.emit(legacy, {"X": op.inputs[0]}, {"Out": op.outputs[0]}, {attr: ctx.ints(op.inputs[1], attr)})
    else:
        ctx.emit(legacy, {"X": op.inputs[0], slot: op.inputs[1]}, {"Out": op.outputs[0]})


@converts("gather")
def _gather(ctx: PirContext, op: PirOp) -> None:
    axis = int(ctx.const(op.inputs[2], "gather's axis").reshape(-1)[0])
    ctx.emit("gather", {"X": op.inputs[0], "Index": op.inputs[1]}, {"Out": op.outputs[0]}, {"axis": axis})


@converts("split_with_num")
def _split_with_num(ctx: PirContext, op: PirOp) -> None:
    """One ``split``; its pieces become the values of the ``builtin.split`` that unpacks the list."""
    axis = int(ctx.const(op.inputs[1], "split's axis").reshape(-1)[0])
    num = op.attrs["num"]
    declared = ctx.types.get(op.outputs[0])
    items = len(declared.items) if declared is not None else 0
    dims = ctx.block.var(ctx.var(op.inputs[0])).shape or ()
    dim = dims[axis] if -len(dims) <= axis < len(dims) else None
    if not isinstance(num, int) or num < 1 or num != items or (dim is not None and dim >= 0 and dim % num):
        ctx.fail(f"value %{op.outputs[0]}: num {num!r} must split the dim {dim} along axis {axis} into the "
                 f"{items} pieces its type declares")
    pieces = [ctx.new_value() for _ in range(num)]
    ctx.emit("split", {"X": op.inputs[0]}, {"Out": pieces}, {"axis": axis, "num": num})
    ctx.lists[op.outputs[0]] = pieces


@converts("split")
def _unpack(ctx: PirContext, op: PirOp) -> None:
    """``builtin.split``: the values of a list (``pd_op.split`` would be sections, not supported here)."""
    if op.name != "builtin.split":
        ctx.fail("pd_op.split with sections is not supported; split_with_num is")
    for value, piece in zip(op.outputs, ctx.listed(op.inputs[0])):
        ctx.names[value] = ctx.var(piece)


@converts("stack")
def _stack(ctx: PirContext, op: PirOp) -> None:
    """stack = an unsqueeze2 of each input at ``axis`` and one concat."""
    axis = op.attrs["axis"]
    parts = []
    for value in ctx.listed(op.inputs[0]):
        out = ctx.emit("unsqueeze2", {"X": value}, {"Out": None}, {"axes": [axis]}).output("Out")[0]
        parts.append(ctx.scratch(out))
    ctx.emit("concat", {"X": parts}, {"Out": op.outputs[0]}, {"axis": axis})
