"""Schemas of the normalisations and the ops alike: batch_norm, layer_norm, skip_layer_norm,
instance_norm, group_norm, rms_norm, skip_rms_norm, lrn, softmax, log_softmax and prelu — Paddle's
op types, slots, attrs and defaults (skip_rms_norm is halfway's).

The statistics outputs (layer_norm's and group_norm's Mean / Variance, instance_norm's
SavedMean / SavedVariance) are float32 under a float16 kernel, as Paddle's; Scale and Bias keep
their own dtype (``keep_dtype_slots``).
"""

from __future__ import annotations

import math

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op
from .window import check_vector, layout_attr, ranked

__all__: list[str] = []


def _stats_dtype(dtype: DType) -> DType:
    return DType.float32 if dtype is DType.float16 else dtype


def _check_vector(ctx: InferContext, slot: str, size: int) -> None:
    if ctx.has_input(slot):
        shape = ctx.input(slot).shape
        ctx.check(math.prod(shape) in (size, -1) or size < 0,
                  f"input {slot!r} must hold {size} values, has shape {list(shape)}")


def _infer_layer_norm(ctx: InferContext) -> None:
    x = ctx.input("X")
    begin = ctx.attr("begin_norm_axis")
    ctx.check(0 <= begin <= len(x.shape),
              f"attr begin_norm_axis {begin} must be in [0, {len(x.shape)}] for X {list(x.shape)}")
    lead, rest = x.shape[:begin], x.shape[begin:]
    cols = -1 if min(rest, default=0) < 0 else math.prod(rest)
    for slot in ("Scale", "Bias"):
        _check_vector(ctx, slot, cols)
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", lead, _stats_dtype(x.dtype))
    ctx.set_output("Variance", lead, _stats_dtype(x.dtype))


register_op(OpSchema(
    "layer_norm", inputs=[Slot("X"), Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)],
    outputs=[Slot("Y"), Slot("Mean", dispensable=True), Slot("Variance", dispensable=True)],
    attrs=[AttrSpec("begin_norm_axis", AttrType.INT, 1), AttrSpec("epsilon", AttrType.FLOAT, 1e-5)],
    infer=_infer_layer_norm, keep_dtype_slots=("Scale", "Bias"),
    doc="Y = (X - mean) / sqrt(variance + epsilon) * Scale + Bias, the statistics over the dims from "
        "begin_norm_axis on (Scale and Bias flattened over them); Mean and Variance of X's leading dims "
        "(Paddle 3's shape; Paddle 2 flattened them to one dim).",
))


def _infer_skip_norm(ctx: InferContext) -> None:
    """skip_layer_norm and skip_rms_norm: X and Y of one shape and dtype, the affine vectors of the
    normalised dims' size."""
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(len(x.shape) == len(y.shape) and all(a == b or min(a, b) < 0 for a, b in zip(x.shape, y.shape))
              and x.dtype is y.dtype,
              f"Y {y.dtype.name} {list(y.shape)} must have X's shape and dtype ({x.dtype.name} {list(x.shape)})")
    begin = ctx.attr("begin_norm_axis")
    ctx.check(0 <= begin < max(len(x.shape), 1),
              f"attr begin_norm_axis {begin} must be in [0, {len(x.shape)}) for X {list(x.shape)}")
    rest = x.shape[begin:]
    cols = -1 if min(rest, default=0) < 0 else math.prod(rest)
    for slot in ("Scale", "Bias"):
        _check_vector(ctx, slot, cols)
    shape = tuple(a if a >= 0 else b for a, b in zip(x.shape, y.shape))
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Sum", shape, x.dtype)


register_op(OpSchema(
    "skip_layer_norm", inputs=[Slot("X"), Slot("Y"), Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)],
    outputs=[Slot("Out"), Slot("Sum", dispensable=True)],
    attrs=[AttrSpec("begin_norm_axis", AttrType.INT, 1), AttrSpec("epsilon", AttrType.FLOAT, 1e-5)],
    infer=_infer_skip_norm, dtype_slots=("X", "Y"), keep_dtype_slots=("Scale", "Bias"),
    doc="Out = layer_norm(X + Y) (Paddle's skip_layernorm: a residual add and the layer_norm after it in one "
        "pass over memory), the statistics over the dims from begin_norm_axis on, in float32; Sum (dispensable) "
        "is X + Y, written for the other readers of the residual stream (pre-norm transformers).",
))


def _channels(ctx: InferContext, least: int) -> tuple[tuple[int, ...], int]:
    x = ctx.input("X")
    ctx.check(len(x.shape) >= least, f"X must have rank >= {least}, has shape {list(x.shape)}")
    return x.shape, x.shape[1]


def _infer_instance_norm(ctx: InferContext) -> None:
    shape, channels = _channels(ctx, 3)
    for slot in ("Scale", "Bias"):
        _check_vector(ctx, slot, channels)
    dtype = ctx.input("X").dtype
    ctx.set_output("Y", shape, dtype)
    rows = -1 if min(shape[:2]) < 0 else shape[0] * shape[1]
    ctx.set_output("SavedMean", [rows], _stats_dtype(dtype))
    ctx.set_output("SavedVariance", [rows], _stats_dtype(dtype))


register_op(OpSchema(
    "instance_norm", inputs=[Slot("X"), Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)],
    outputs=[Slot("Y"), Slot("SavedMean", dispensable=True), Slot("SavedVariance", dispensable=True)],
    attrs=[AttrSpec("epsilon", AttrType.FLOAT, 1e-5)], infer=_infer_instance_norm,
    keep_dtype_slots=("Scale", "Bias"),
    doc="Y = (X - mean) / sqrt(variance + epsilon) * Scale + Bias per sample and channel (dim 1), the "
        "statistics over the spatial dims; SavedMean and the inverse standard deviation SavedVariance per "
        "(sample, channel).",
))


def _infer_group_norm(ctx: InferContext) -> None:
    shape, channels = _channels(ctx, 2)
    groups = ctx.attr("groups")
    ctx.check(groups >= 1 and (channels < 0 or channels % groups == 0),
              f"attr groups {groups} must divide the {channels} channels")
    for slot in ("Scale", "Bias"):
        _check_vector(ctx, slot, channels)
    dtype = ctx.input("X").dtype
    ctx.set_output("Y", shape, dtype)
    ctx.set_output("Mean", [shape[0], groups], _stats_dtype(dtype))
    ctx.set_output("Variance", [shape[0], groups], _stats_dtype(dtype))


register_op(OpSchema(
    "group_norm", inputs=[Slot("X"), Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)],
    outputs=[Slot("Y"), Slot("Mean", dispensable=True), Slot("Variance", dispensable=True)],
    attrs=[AttrSpec("epsilon", AttrType.FLOAT, 1e-5), AttrSpec("groups", AttrType.INT),
           AttrSpec("data_layout", AttrType.STRING, "NCHW", choices=("NCHW",))],
    infer=_infer_group_norm, keep_dtype_slots=("Scale", "Bias"),
    doc="Y = (X - mean) / sqrt(variance + epsilon) * Scale + Bias, the statistics per sample over each of "
        "`groups` runs of channels (dim 1) and the spatial dims; Scale and Bias per channel.",
))


def _infer_along_axis(ctx: InferContext) -> None:
    """softmax and log_softmax: Out is X's shape; axis within its rank."""
    x = ctx.input("X")
    rank, axis = max(len(x.shape), 1), ctx.attr("axis")
    ctx.check(-rank <= axis < rank, f"attr axis must be in [{-rank}, {rank}) for X {list(x.shape)}, got {axis}")
    ctx.set_output("Out", x.shape, x.dtype)


register_op(OpSchema(
    "log_softmax", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("axis", AttrType.INT, -1)],
    infer=_infer_along_axis, doc="Out = log(softmax(X)) along `axis`, computed as X - max - log(sum(exp)).",
))


def _infer_prelu(ctx: InferContext) -> None:
    x, alpha = ctx.input("X"), ctx.input("Alpha")
    mode = ctx.attr("mode")
    ctx.check(mode == "all" or len(x.shape) >= 2, f"mode {mode!r} needs X of rank >= 2, has {list(x.shape)}")
    want = {"all": (), "channel": x.shape[1:2], "element": x.shape[1:]}[mode]
    sizes = [math.prod(s) if min(s, default=0) >= 0 else -1 for s in (want, alpha.shape)]
    ctx.check(-1 in sizes or sizes[0] == sizes[1],
              f"Alpha {list(alpha.shape)} does not fit mode {mode!r} for X {list(x.shape)} ({sizes[0]} values)")
    ctx.set_output("Out", x.shape, x.dtype)


register_op(OpSchema(
    "prelu", inputs=[Slot("X"), Slot("Alpha")], outputs=[Slot("Out")],
    attrs=[AttrSpec("mode", AttrType.STRING, "all", choices=("all", "channel", "element")),
           AttrSpec("data_format", AttrType.STRING, "NCHW", choices=("NCHW",))],
    infer=_infer_prelu,
    doc="Out = X where X > 0 else Alpha * X; Alpha is one value (all), one per channel (channel) or one per "
        "entry of a sample (element).",
))


_BN_PARAMS = ("Scale", "Bias", "Mean", "Variance")


def _infer_batch_norm(ctx: InferContext) -> None:
    x = ranked(ctx, "X", 2, 3, 4, 5)
    c = x.shape[-1] if ctx.attr("data_layout") == "NHWC" else x.shape[1]
    ctx.check(ctx.attr("epsilon") >= 0, f"attr epsilon must be >= 0, got {ctx.attr('epsilon')}")
    for slot in _BN_PARAMS:
        check_vector(ctx, slot, c)
    stats = ctx.input("Mean").dtype
    ctx.set_output("Y", x.shape, x.dtype)
    for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
        ctx.set_output(slot, (c,), stats)


register_op(OpSchema(
    "batch_norm",
    inputs=[Slot("X"), *(Slot(s) for s in _BN_PARAMS), Slot("MomentumTensor", dispensable=True)],
    outputs=[Slot("Y"), Slot("MeanOut"), Slot("VarianceOut"), Slot("SavedMean"), Slot("SavedVariance"),
             Slot("ReserveSpace", dispensable=True)],
    attrs=[AttrSpec("epsilon", AttrType.FLOAT, 1e-5), AttrSpec("momentum", AttrType.FLOAT, 0.9),
           layout_attr("data_layout"), AttrSpec("is_test", AttrType.BOOLEAN, False),
           AttrSpec("use_global_stats", AttrType.BOOLEAN, False),
           AttrSpec("trainable_statistics", AttrType.BOOLEAN, False)],
    infer=_infer_batch_norm,
    keep_dtype_slots=(*_BN_PARAMS, "MomentumTensor"),
    inplace={"X": "Y"}, views={"MeanOut": "Mean", "VarianceOut": "Variance", "SavedMean": "Mean"},
    doc="Y = (X - Mean) / sqrt(Variance + epsilon) * Scale + Bias per channel (inference: MeanOut/VarianceOut "
        "alias Mean/Variance).",
))


def _infer_lrn(ctx: InferContext) -> None:
    x = ranked(ctx, "X", 4)
    n = ctx.attr("n")
    ctx.check(n > 0 and n % 2 == 1, f"attr n must be a positive odd number, got {n}")
    for name in ("k", "alpha", "beta"):
        ctx.check(ctx.attr(name) > 0, f"attr {name} must be > 0, got {ctx.attr(name)}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("MidOut", x.shape, x.dtype)


register_op(OpSchema(
    "lrn", inputs=[Slot("X")], outputs=[Slot("Out"), Slot("MidOut")],
    attrs=[AttrSpec("n", AttrType.INT, 5), AttrSpec("k", AttrType.FLOAT, 2.0),
           AttrSpec("alpha", AttrType.FLOAT, 1e-4), AttrSpec("beta", AttrType.FLOAT, 0.75),
           layout_attr(default="AnyLayout")],
    infer=_infer_lrn,
    doc="Local response normalisation across n channels: Out = X / (k + alpha * sum(X^2))^beta; "
        "MidOut holds the denominator base.",
))




register_op(OpSchema(
    "softmax", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("axis", AttrType.INT, -1)],
    infer=_infer_along_axis, doc="Softmax along axis.",
))


def _broadcasts(dim: int, to: int) -> bool:
    return dim in (1, to) or min(dim, to) < 0


def _infer_rms_norm(ctx: InferContext) -> None:
    x = ctx.input("X")
    begin = ctx.attr("begin_norm_axis")
    ctx.check(0 <= begin < max(len(x.shape), 1),
              f"attr begin_norm_axis {begin} must be in [0, {len(x.shape)}) for X {list(x.shape)}")
    normalized = x.shape[begin:]
    if ctx.has_input("Scale"):
        scale = ctx.input("Scale").shape
        ctx.check(len(scale) <= len(normalized) and all(
            _broadcasts(s, n) for s, n in zip(scale[::-1], normalized[::-1])),
            f"Scale {list(scale)} must broadcast to the normalised dims {list(normalized)} of X {list(x.shape)}")
    ctx.set_output("Y", x.shape, x.dtype)


register_op(OpSchema(
    "rms_norm", inputs=[Slot("X"), Slot("Scale", dispensable=True)], outputs=[Slot("Y")],
    attrs=[AttrSpec("begin_norm_axis", AttrType.INT, 1), AttrSpec("epsilon", AttrType.FLOAT, 1e-5)],
    infer=_infer_rms_norm, keep_dtype_slots=("Scale",),
    doc="Y = X / sqrt(mean(X^2) + epsilon) * Scale, the mean over the dims from begin_norm_axis on; Scale "
        "broadcasts to those dims (LLaMA's and T5's normalisation: no centring, no bias).",
))


register_op(OpSchema(
    "skip_rms_norm", inputs=[Slot("X"), Slot("Y"), Slot("Scale", dispensable=True)],
    outputs=[Slot("Out"), Slot("Sum", dispensable=True)],
    attrs=[AttrSpec("begin_norm_axis", AttrType.INT, 1), AttrSpec("epsilon", AttrType.FLOAT, 1e-5)],
    infer=_infer_skip_norm, dtype_slots=("X", "Y"), keep_dtype_slots=("Scale",),
    doc="Out = rms_norm(X + Y) (a pre-norm decoder's residual add and the RMSNorm after it in one pass over "
        "memory), the statistics over the dims from begin_norm_axis on, in float32, Scale one value per "
        "normalised entry; Sum (dispensable) is X + Y, written for the other readers of the residual stream.",
))
