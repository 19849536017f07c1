"""Schemas of the neural-network ops: convolution, pooling, normalisation, padding, dropout,
softmax, matrix products, and the fused ops later passes produce (``fc``, ``fused_conv2d``,
``fused_conv2d_pool``).

Slots, attr names and defaults follow Paddle's operators. Sliding-window ops (conv, pool)
share one geometry rule, ``window_geometry``, which kernels call too, so inference and
execution cannot disagree on padding:

* ``paddings`` holds 2 values (symmetric ``[pad_h, pad_w]``) or 4 (``[top, bottom, left,
  right]``); ``padding_algorithm`` EXPLICIT uses them, VALID pads nothing, SAME pads so that
  ``out = ceil(in / stride)`` (odd totals put the extra pixel after) and, as Paddle does,
  ignores ``dilations``;
* ``out = (in + before + after - (dilation * (k - 1) + 1)) // stride + 1``; pool2d's
  ``ceil_mode`` adds ``stride - 1`` before dividing (Paddle's rule: no PyTorch-style clamp);
* a filter is ``[C_out, C_in / groups, kh, kw]`` (``[C_in, C_out / groups, kh, kw]`` for
  conv2d_transpose) whatever ``data_format`` is; "AnyLayout" reads as channels-first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, InferError, InferFn, OpSchema, Slot, TensorInfo, register_op
from .families import UNARY, absorbable, fc_absorbable

__all__ = ["Window", "window_geometry", "pad_pairs", "FUSABLE_ACTIVATIONS"]

_CHANNEL_LAYOUTS = ("NCHW", "NHWC", "AnyLayout")
FUSABLE_ACTIVATIONS = ("", *absorbable())
"""Activations ``fused_conv2d`` may apply: the absorbable family rows (``halfway.ir.ops.families``)."""
_PLAIN_ACTIVATIONS = ("", *(name for name in absorbable() if fc_absorbable(UNARY[name])))
"""Activations ``fc`` may apply: those its epilogue computes without parameters."""


# -- shared helpers -------------------------------------------------------------------------------
class Window(NamedTuple):
    """The resolved geometry of a 2-D sliding window: per spatial dim, the (before, after)
    padding, the dilation actually used, and the output size (-1 where the input's is; SAME
    padding of such a dim reads (0, 0) until its size is known)."""

    pads: tuple[tuple[int, int], ...]
    dilations: tuple[int, ...]
    out: tuple[int, ...]


def pad_pairs(paddings: Sequence[int], ndim: int) -> tuple[tuple[int, int], ...]:
    """Paddle's ``paddings`` as (before, after) per spatial dim: ``ndim`` symmetric values or
    ``2 * ndim`` values ``[d0_before, d0_after, d1_before, d1_after, ...]``."""
    values = list(paddings)
    if any(p < 0 for p in values):
        raise InferError(f"paddings must be >= 0, got {values}")
    if len(values) == ndim:
        return tuple((p, p) for p in values)
    if len(values) == 2 * ndim:
        return tuple((values[2 * i], values[2 * i + 1]) for i in range(ndim))
    raise InferError(f"paddings must have {ndim} (symmetric) or {2 * ndim} (before/after per dim) values, "
                     f"got {len(values)}: {values}")


def _same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    if size < 0:
        return (0, 0)
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return (total // 2, total - total // 2)


def window_geometry(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                    dilations: Sequence[int], paddings: Sequence[int], algorithm: str = "EXPLICIT",
                    ceil_mode: bool = False, transposed: bool = False) -> Window:
    """Resolve padding and output sizes of a sliding window over ``sizes`` (see the module
    docstring). ``transposed``: the output of conv2d_transpose, ``(in - 1) * stride - before
    - after + dilation * (k - 1) + 1``, before any output_size/output_padding.

    Raises:
        InferError: bad attr lengths or values, or a window larger than the padded input.
    """
    n = len(sizes)
    for name, values in (("kernel size", kernel), ("strides", strides), ("dilations", dilations)):
        if len(values) != n or any(v <= 0 for v in values):
            raise InferError(f"{name} must be {n} positive values, got {list(values)}")
    explicit = pad_pairs(paddings, n) if algorithm == "EXPLICIT" else ((0, 0),) * n
    pads, dils, out = [], [], []
    for i, (size, k, s) in enumerate(zip(sizes, kernel, strides)):
        pad, d = explicit[i], dilations[i]
        if algorithm == "SAME":
            pad, d = _same_pads(size, k, s), 1
        pads.append(pad)
        dils.append(d)
        extent = d * (k - 1) + 1
        if size < 0:
            out.append(-1)
        elif transposed:
            out.append((size - 1) * s - pad[0] - pad[1] + extent)
        else:
            span = size + pad[0] + pad[1] - extent + (s - 1 if ceil_mode else 0)
            if span < 0:
                raise InferError(f"spatial dim {i}: the window ({extent} with dilation) is larger than the "
                                 f"padded input ({size} + {pad[0]} + {pad[1]})")
            out.append(span // s + 1)
    return Window(tuple(pads), tuple(dils), tuple(out))


def _window(ctx: InferContext, sizes: Sequence[int], kernel: Sequence[int], dilations: Sequence[int],
            ceil_mode: bool = False, transposed: bool = False) -> Window:
    try:
        return window_geometry(sizes, kernel, ctx.attr("strides"), dilations, ctx.attr("paddings"),
                               ctx.attr("padding_algorithm"), ceil_mode, transposed)
    except InferError as e:
        return ctx.fail(f"{e} (input spatial dims {list(sizes)})")


def _ranked(ctx: InferContext, slot: str, *ranks: int) -> TensorInfo:
    info = ctx.input(slot)
    ctx.check(len(info.shape) in ranks, f"{slot} must have rank {' or '.join(map(str, ranks))}, "
                                        f"got shape {list(info.shape)}")
    return info


def _split(shape: tuple[int, ...], channel_last: bool) -> tuple[int, int, tuple[int, ...]]:
    """(batch, channels, spatial dims) of an NC... or N...C shape."""
    if channel_last:
        return shape[0], shape[-1], shape[1:-1]
    return shape[0], shape[1], shape[2:]


def _join(n: int, c: int, spatial: Sequence[int], channel_last: bool) -> tuple[int, ...]:
    return (n, *spatial, c) if channel_last else (n, c, *spatial)


def _same_dim(a: int, b: int) -> bool:
    return a < 0 or b < 0 or a == b


def _check_vector(ctx: InferContext, slot: str, size: int) -> None:
    """Input ``slot``, when present, is a 1-D tensor of ``size`` elements."""
    if ctx.has_input(slot):
        shape = ctx.input(slot).shape
        ctx.check(len(shape) == 1 and _same_dim(shape[0], size),
                  f"{slot} must have shape [{size}], got {list(shape)}")


def _prod(dims: Sequence[int]) -> int:
    """Product of ``dims``, -1 if any is unknown."""
    return -1 if any(d < 0 for d in dims) else math.prod(dims)


def _register(op_type: str, *, infer: InferFn, **fields: Any) -> None:
    register_op(OpSchema(op_type, infer=infer, **fields))


def _layout_attr(name: str = "data_format", default: str = "NCHW") -> AttrSpec:
    return AttrSpec(name, AttrType.STRING, default, choices=_CHANNEL_LAYOUTS)


def _window_attrs() -> list[AttrSpec]:
    return [
        AttrSpec("strides", AttrType.INTS, [1, 1]),
        AttrSpec("paddings", AttrType.INTS, [0, 0]),
        AttrSpec("padding_algorithm", AttrType.STRING, "EXPLICIT", choices=("EXPLICIT", "SAME", "VALID")),
        _layout_attr(),
    ]


def _conv_attrs() -> list[AttrSpec]:
    return _window_attrs() + [AttrSpec("groups", AttrType.INT, 1), AttrSpec("dilations", AttrType.INTS, [1, 1])]


# -- convolution ----------------------------------------------------------------------------------
def _conv_common(ctx: InferContext, transposed: bool) -> tuple[TensorInfo, bool, int, int, tuple[int, ...]]:
    """Checks shared by all convs; returns (input, channel_last, batch, out channels, in spatial)."""
    x, w = _ranked(ctx, "Input", 4), _ranked(ctx, "Filter", 4)
    channel_last = ctx.attr("data_format") == "NHWC"
    n, c, spatial = _split(x.shape, channel_last)
    groups = ctx.attr("groups")
    ctx.check(groups >= 1, f"attr groups must be >= 1, got {groups}")
    if transposed:
        ctx.check(_same_dim(c, w.shape[0]), f"Input has {c} channels but Filter {list(w.shape)} expects "
                                            f"{w.shape[0]} (Filter is [C_in, C_out / groups, kh, kw])")
        ctx.check(w.shape[0] < 0 or w.shape[0] % groups == 0,
                  f"Filter's C_in {w.shape[0]} is not divisible by groups={groups}")
        return x, channel_last, n, (w.shape[1] * groups if w.shape[1] >= 0 else -1), spatial
    expected = w.shape[1] * groups if w.shape[1] >= 0 else -1
    ctx.check(_same_dim(c, expected), f"Input has {c} channels but Filter {list(w.shape)} with groups={groups} "
                                      f"expects {expected} (Filter is [C_out, C_in / groups, kh, kw])")
    ctx.check(w.shape[0] < 0 or w.shape[0] % groups == 0,
              f"Filter's C_out {w.shape[0]} is not divisible by groups={groups}")
    if ctx.op_type == "depthwise_conv2d":
        ctx.check(_same_dim(c, groups), f"depthwise needs groups == input channels, got groups={groups}, "
                                        f"{c} channels")
    return x, channel_last, n, w.shape[0], spatial


def _conv_output(ctx: InferContext) -> tuple[TensorInfo, tuple[int, ...]]:
    """(the input, the convolution's output shape), checked."""
    x, channel_last, n, c_out, spatial = _conv_common(ctx, transposed=False)
    window = _window(ctx, spatial, ctx.input("Filter").shape[2:], ctx.attr("dilations"))
    _check_vector(ctx, "Bias", c_out)
    return x, _join(n, c_out, window.out, channel_last)


def _infer_conv(ctx: InferContext) -> None:
    x, out = _conv_output(ctx)
    if ctx.has_input("ResidualData"):
        res = ctx.input("ResidualData").shape
        ctx.check(len(res) == 4 and all(map(_same_dim, res, out)),
                  f"ResidualData must have the output's shape {list(out)}, got {list(res)}")
    ctx.set_output("Output", out, x.dtype)


def _infer_conv_transpose(ctx: InferContext) -> None:
    x, channel_last, n, c_out, spatial = _conv_common(ctx, transposed=True)
    strides = ctx.attr("strides")
    window = _window(ctx, spatial, ctx.input("Filter").shape[2:], ctx.attr("dilations"), transposed=True)
    out = list(window.out)
    output_size, output_padding = ctx.attr("output_size"), ctx.attr("output_padding")
    for name, values in (("output_size", output_size), ("output_padding", output_padding)):
        ctx.check(len(values) in (0, len(out)), f"attr {name} must be empty or have {len(out)} values, "
                                                f"got {list(values)}")
    for i, size in enumerate(out):
        if output_size:
            ok = size < 0 or size <= output_size[i] < size + strides[i]
            ctx.check(ok, f"output_size[{i}] = {output_size[i]} must be in [{size}, {size + strides[i]})")
            out[i] = output_size[i]
        elif output_padding:
            limit = max(strides[i], window.dilations[i])
            ctx.check(0 <= output_padding[i] < limit,
                      f"output_padding[{i}] = {output_padding[i]} must be in [0, {limit})")
            out[i] = size + output_padding[i] if size >= 0 else -1
    _check_vector(ctx, "Bias", c_out)
    ctx.set_output("Output", _join(n, c_out, out, channel_last), x.dtype)


_CONV_SLOTS = [Slot("Input"), Slot("Filter")]
for _type, _doc in (("conv2d", "2-D convolution (grouped when groups > 1)."),
                    ("depthwise_conv2d", "Depthwise 2-D convolution: conv2d with groups == input channels.")):
    _register(
        _type, inputs=_CONV_SLOTS + [Slot("ResidualData", dispensable=True)], outputs=[Slot("Output")],
        attrs=_conv_attrs(), infer=_infer_conv,
        doc=f"{_doc} ResidualData, when given (Paddle's oneDNN fusions), is added to Output.")

def _fused_conv_attrs() -> list[AttrSpec]:
    return _conv_attrs() + [AttrSpec("fuse_activation", AttrType.STRING, "", choices=FUSABLE_ACTIVATIONS),
                            AttrSpec("fuse_alpha", AttrType.FLOAT, 0.0), AttrSpec("fuse_beta", AttrType.FLOAT, 0.0)]


def _infer_conv_pool(ctx: InferContext) -> None:
    x, out = _conv_output(ctx)
    size = ctx.attr("pool_size")
    ctx.check(len(size) == 2 and all(s > 0 for s in size), f"attr pool_size must be 2 positive values, got {list(size)}")
    channel_last = ctx.attr("data_format") == "NHWC"
    n, c, spatial = _split(out, channel_last)
    ctx.check(all(d < 0 or d >= s for d, s in zip(spatial, size)),
              f"the convolution's output {list(spatial)} is smaller than pool_size {list(size)}")
    pooled = [d // s if d >= 0 else -1 for d, s in zip(spatial, size)]
    ctx.set_output("Output", _join(n, c, pooled, channel_last), x.dtype)


_register(
    "fused_conv2d",
    inputs=_CONV_SLOTS + [Slot("Bias", dispensable=True), Slot("ResidualData", dispensable=True)],
    outputs=[Slot("Output")],
    attrs=_fused_conv_attrs(),
    infer=_infer_conv,
    doc="Output = act(conv2d(Input, Filter) + Bias[C] + ResidualData); act = fuse_activation, with "
        "fuse_alpha and fuse_beta its parameters as Paddle's fused_conv2d reads them (0: the default).",
)

_register(
    "fused_conv2d_pool",
    inputs=_CONV_SLOTS + [Slot("Bias", dispensable=True)], outputs=[Slot("Output")],
    attrs=_fused_conv_attrs() + [AttrSpec("pool_type", AttrType.STRING, "max", choices=("max", "avg")),
                                 AttrSpec("pool_size", AttrType.INTS, [2, 2])],
    infer=_infer_conv_pool,
    doc="halfway's fused_conv2d followed by a pool2d of pool_size windows at their own stride, unpadded "
        "(rows and columns past the last whole window are dropped): Output = pool(act(conv2d(Input, Filter) "
        "+ Bias[C])). fuse_conv_pool makes it; on tensor cores in NHWC a 2x2 max pool is the GEMM's epilogue.",
)

_register(
    "conv2d_transpose",
    inputs=_CONV_SLOTS + [Slot("Bias", dispensable=True)], outputs=[Slot("Output")],
    attrs=_conv_attrs() + [AttrSpec("output_padding", AttrType.INTS, []),
                           AttrSpec("output_size", AttrType.INTS, [])],
    infer=_infer_conv_transpose,
    doc="Transposed 2-D convolution (the gradient of conv2d w.r.t. its input), plus Bias[C_out] when given.",
)


# -- pooling --------------------------------------------------------------------------------------
def _infer_pool(ctx: InferContext) -> None:
    rank = 5 if ctx.op_type == "pool3d" else 4
    x = _ranked(ctx, "X", rank)
    channel_last = ctx.attr("data_format") in ("NHWC", "NDHWC")
    n, c, spatial = _split(x.shape, channel_last)
    ksize = ctx.attr("ksize")
    ctx.check(len(ksize) == rank - 2 and all(k > 0 for k in ksize),
              f"attr ksize must be {rank - 2} positive values, got {list(ksize)}")
    ctx.check(ctx.attr("norm_type") > 0, f"attr norm_type must be positive, got {ctx.attr('norm_type')}")
    if ctx.attr("global_pooling"):
        out: Sequence[int] = (1,) * (rank - 2)
    elif ctx.attr("adaptive"):
        ctx.check(rank == 4 and ctx.attr("pooling_type") != "lp", "adaptive pooling is supported in 2-D, max or avg")
        out = ksize
    else:
        dilations = ctx.attr("dilations") or (1,) * (rank - 2)
        out = _window(ctx, spatial, ksize, dilations, ceil_mode=ctx.attr("ceil_mode")).out
    ctx.set_output("Out", _join(n, c, out, channel_last), x.dtype)


def _pool_attrs(window: list[AttrSpec]) -> list[AttrSpec]:
    """pool2d's and pool3d's attrs around the ``window`` ones, with halfway's ``dilations`` (empty:
    ones) and "lp" pooling, (sum |x|^norm_type)^(1 / norm_type) over each window, pads adding zeros."""
    return [AttrSpec("pooling_type", AttrType.STRING, choices=("max", "avg", "lp")), AttrSpec("ksize", AttrType.INTS),
            *window, AttrSpec("global_pooling", AttrType.BOOLEAN, False), AttrSpec("adaptive", AttrType.BOOLEAN, False),
            AttrSpec("ceil_mode", AttrType.BOOLEAN, False), AttrSpec("exclusive", AttrType.BOOLEAN, True),
            AttrSpec("dilations", AttrType.INTS, []), AttrSpec("norm_type", AttrType.FLOAT, 2.0)]


_register(
    "pool2d", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=_pool_attrs(_window_attrs()),
    infer=_infer_pool,
    doc="2-D max/avg/lp pooling; global_pooling pools each plane to 1x1 (ignoring ksize, paddings, adaptive), "
        "adaptive makes the output ksize; exclusive avg divides by the unpadded window area.",
)
_register(
    "pool3d", inputs=[Slot("X")], outputs=[Slot("Out")],
    attrs=_pool_attrs([AttrSpec("strides", AttrType.INTS, [1, 1, 1]), AttrSpec("paddings", AttrType.INTS, [0, 0, 0]),
                       AttrSpec("padding_algorithm", AttrType.STRING, "EXPLICIT", choices=("EXPLICIT", "SAME", "VALID")),
                       AttrSpec("data_format", AttrType.STRING, "NCDHW", choices=("NCDHW", "NDHWC"))]),
    infer=_infer_pool,
    doc="3-D max/avg/lp pooling over [N, C, D, H, W] (or NDHWC), as pool2d (adaptive excepted).",
)


# -- normalisation --------------------------------------------------------------------------------
_BN_PARAMS = ("Scale", "Bias", "Mean", "Variance")


def _infer_batch_norm(ctx: InferContext) -> None:
    x = _ranked(ctx, "X", 2, 3, 4, 5)
    c = x.shape[-1] if ctx.attr("data_layout") == "NHWC" else x.shape[1]
    ctx.check(ctx.attr("epsilon") >= 0, f"attr epsilon must be >= 0, got {ctx.attr('epsilon')}")
    for slot in _BN_PARAMS:
        _check_vector(ctx, slot, c)
    stats = ctx.input("Mean").dtype
    ctx.set_output("Y", x.shape, x.dtype)
    for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
        ctx.set_output(slot, (c,), stats)


_register(
    "batch_norm",
    inputs=[Slot("X"), *(Slot(s) for s in _BN_PARAMS), Slot("MomentumTensor", dispensable=True)],
    outputs=[Slot("Y"), Slot("MeanOut"), Slot("VarianceOut"), Slot("SavedMean"), Slot("SavedVariance"),
             Slot("ReserveSpace", dispensable=True)],
    attrs=[AttrSpec("epsilon", AttrType.FLOAT, 1e-5), AttrSpec("momentum", AttrType.FLOAT, 0.9),
           _layout_attr("data_layout"), AttrSpec("is_test", AttrType.BOOLEAN, False),
           AttrSpec("use_global_stats", AttrType.BOOLEAN, False),
           AttrSpec("trainable_statistics", AttrType.BOOLEAN, False)],
    infer=_infer_batch_norm,
    keep_dtype_slots=(*_BN_PARAMS, "MomentumTensor"),
    inplace={"X": "Y"}, views={"MeanOut": "Mean", "VarianceOut": "Variance", "SavedMean": "Mean"},
    doc="Y = (X - Mean) / sqrt(Variance + epsilon) * Scale + Bias per channel (inference: MeanOut/VarianceOut "
        "alias Mean/Variance).",
)


def _infer_lrn(ctx: InferContext) -> None:
    x = _ranked(ctx, "X", 4)
    n = ctx.attr("n")
    ctx.check(n > 0 and n % 2 == 1, f"attr n must be a positive odd number, got {n}")
    for name in ("k", "alpha", "beta"):
        ctx.check(ctx.attr(name) > 0, f"attr {name} must be > 0, got {ctx.attr(name)}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("MidOut", x.shape, x.dtype)


_register(
    "lrn", inputs=[Slot("X")], outputs=[Slot("Out"), Slot("MidOut")],
    attrs=[AttrSpec("n", AttrType.INT, 5), AttrSpec("k", AttrType.FLOAT, 2.0),
           AttrSpec("alpha", AttrType.FLOAT, 1e-4), AttrSpec("beta", AttrType.FLOAT, 0.75),
           _layout_attr(default="AnyLayout")],
    infer=_infer_lrn,
    doc="Local response normalisation across n channels: Out = X / (k + alpha * sum(X^2))^beta; "
        "MidOut holds the denominator base.",
)


# -- padding, dropout, softmax --------------------------------------------------------------------
def _infer_pad3d(ctx: InferContext) -> None:
    x = _ranked(ctx, "X", 5)
    channel_last = ctx.attr("data_format") == "NDHWC"
    n, c, (d, h, w) = _split(x.shape, channel_last)
    if ctx.has_input("Paddings"):
        value = ctx.input_value("Paddings")
        if value is None:
            ctx.set_output("Out", _join(n, c, (-1, -1, -1), channel_last), x.dtype)
            return
        paddings = [int(v) for v in value.reshape(-1)]
    else:
        paddings = list(ctx.attr("paddings"))
    ctx.check(len(paddings) == 6 and min(paddings) >= 0,
              f"paddings must be 6 values >= 0 [left, right, top, bottom, front, back], got {paddings}")
    pairs = ((paddings[4], paddings[5]), (paddings[2], paddings[3]), (paddings[0], paddings[1]))
    out = []
    for axis, (size, (before, after)) in zip("DHW", zip((d, h, w), pairs)):
        if ctx.attr("mode") == "reflect" and size >= 0:
            ctx.check(max(before, after) < size, f"reflect padding of {axis} ({before}, {after}) must be "
                                                 f"smaller than the input's {axis} ({size})")
        out.append(size + before + after if size >= 0 else -1)
    ctx.set_output("Out", _join(n, c, out, channel_last), x.dtype)


_register(
    "pad3d", inputs=[Slot("X"), Slot("Paddings", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("paddings", AttrType.INTS, [0] * 6),
           AttrSpec("mode", AttrType.STRING, "constant", choices=("constant", "reflect", "replicate", "circular")),
           AttrSpec("value", AttrType.FLOAT, 0.0),
           AttrSpec("data_format", AttrType.STRING, "NCDHW", choices=("NCDHW", "NDHWC"))],
    infer=_infer_pad3d, keep_dtype_slots=("Paddings",),
    doc="Pads the D, H, W dims of a 5-D tensor; paddings (or the Paddings tensor) are "
        "[left, right, top, bottom, front, back].",
)


def _infer_pad(ctx: InferContext) -> None:
    x = ctx.input("X")
    if ctx.has_input("Paddings"):
        value = ctx.input_value("Paddings")
        paddings = [int(v) for v in np.asarray(value).reshape(-1)] if value is not None else None
    else:
        paddings = list(ctx.attr("paddings"))
    if paddings is None:
        ctx.set_output("Out", [-1] * len(x.shape), x.dtype)
        return
    ctx.check(len(paddings) == 2 * len(x.shape) and min(paddings, default=0) >= 0,
              f"paddings must be {2 * len(x.shape)} values >= 0 (before, after per dim of X "
              f"{list(x.shape)}), got {paddings}")
    out = [d + paddings[2 * i] + paddings[2 * i + 1] if d >= 0 else -1 for i, d in enumerate(x.shape)]
    ctx.set_output("Out", out, x.dtype)


_register(
    "pad", inputs=[Slot("X"), Slot("Paddings", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("paddings", AttrType.INTS, []), AttrSpec("pad_value", AttrType.FLOAT, 0.0)],
    infer=_infer_pad, keep_dtype_slots=("Paddings",),
    doc="Pads every dim of X with pad_value; paddings are [before_0, after_0, before_1, after_1, ...] "
        "(the Paddings tensor, a halfway extension for run-time pads, overrides the attr).",
)


def _infer_dropout(ctx: InferContext) -> None:
    x = ctx.input("X")
    p = ctx.attr("dropout_prob")
    ctx.check(0.0 <= p <= 1.0, f"attr dropout_prob must be in [0, 1], got {p}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Mask", x.shape, DType.uint8)


_register(
    "dropout", inputs=[Slot("X"), Slot("Seed", dispensable=True)],
    outputs=[Slot("Out"), Slot("Mask", dispensable=True)],
    attrs=[AttrSpec("dropout_prob", AttrType.FLOAT, 0.5), AttrSpec("is_test", AttrType.BOOLEAN, False),
           AttrSpec("dropout_implementation", AttrType.STRING, "downgrade_in_infer",
                    choices=("downgrade_in_infer", "upscale_in_train")),
           AttrSpec("fix_seed", AttrType.BOOLEAN, False), AttrSpec("seed", AttrType.INT, 0)],
    infer=_infer_dropout, keep_dtype_slots=("Seed",), inplace={"X": "Out"}, views={"Out": "X"},
    doc="Inference dropout: Out = X * (1 - dropout_prob) (downgrade_in_infer) or X (upscale_in_train).",
)


def _infer_softmax(ctx: InferContext) -> None:
    x = ctx.input("X")
    rank, axis = max(len(x.shape), 1), ctx.attr("axis")
    ctx.check(-rank <= axis < rank, f"attr axis must be in [{-rank}, {rank}) for X {list(x.shape)}, got {axis}")
    ctx.set_output("Out", x.shape, x.dtype)


_register(
    "softmax", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("axis", AttrType.INT, -1)],
    infer=_infer_softmax, doc="Softmax along axis.",
)


# -- matrix products ------------------------------------------------------------------------------
def _broadcast(ctx: InferContext, a: Sequence[int], b: Sequence[int]) -> list[int]:
    """numpy broadcasting of two dim lists, carrying -1 (unknown)."""
    a, b = [1] * (len(b) - len(a)) + list(a), [1] * (len(a) - len(b)) + list(b)
    out = []
    for da, db in zip(a, b):
        if da == 1 or da == db:
            out.append(db)
        elif db == 1:
            out.append(da)
        elif da < 0 or db < 0:
            out.append(max(da, db))
        else:
            ctx.fail(f"batch dims {a} and {b} do not broadcast ({da} vs {db})")
    return out


def _infer_matmul_v2(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.check(len(x.shape) >= 1 and len(y.shape) >= 1,
              f"X and Y must have rank >= 1, got {list(x.shape)} and {list(y.shape)}")
    xs = [1, *x.shape] if len(x.shape) == 1 else list(x.shape)
    ys = [*y.shape, 1] if len(y.shape) == 1 else list(y.shape)
    if ctx.attr("trans_x") and len(x.shape) > 1:
        xs[-1], xs[-2] = xs[-2], xs[-1]
    if ctx.attr("trans_y") and len(y.shape) > 1:
        ys[-1], ys[-2] = ys[-2], ys[-1]
    ctx.check(_same_dim(xs[-1], ys[-2]),
              f"X's contracted dim {xs[-1]} != Y's {ys[-2]} (X {list(x.shape)}, Y {list(y.shape)}, "
              f"trans_x={ctx.attr('trans_x')}, trans_y={ctx.attr('trans_y')})")
    out = _broadcast(ctx, xs[:-2], ys[:-2])
    out += [xs[-2]] if len(x.shape) > 1 else []
    out += [ys[-1]] if len(y.shape) > 1 else []
    ctx.set_output("Out", out, x.dtype)


_register(
    "matmul_v2", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")],
    attrs=[AttrSpec("trans_x", AttrType.BOOLEAN, False), AttrSpec("trans_y", AttrType.BOOLEAN, False)],
    infer=_infer_matmul_v2,
    doc="numpy.matmul (batch broadcasting, 1-D operands as vectors) after transposing the last two dims of "
        "X/Y when trans_x/trans_y (ignored for 1-D).",
)


def _flattened(ctx: InferContext, slot: str, attr: str) -> tuple[tuple[int, ...], int, int]:
    """(shape, col dims, flattened row length) of a mul/fc operand flattened at attr's dim."""
    shape = ctx.input(slot).shape
    cols = ctx.attr(attr)
    ctx.check(0 < cols < len(shape), f"attr {attr} must be in [1, {len(shape) - 1}] for {slot} "
                                     f"{list(shape)}, got {cols}")
    return shape, cols, _prod(shape[cols:])


def _infer_mul(ctx: InferContext) -> None:
    x, xc, k = _flattened(ctx, "X", "x_num_col_dims")
    y, yc, _ = _flattened(ctx, "Y", "y_num_col_dims")
    k_y = _prod(y[:yc])
    ctx.check(_same_dim(k, k_y), f"X {list(x)} flattened at {xc} has {k} columns but Y {list(y)} flattened "
                                 f"at {yc} has {k_y} rows")
    ctx.set_output("Out", (*x[:xc], *y[yc:]), ctx.input("X").dtype)


_register(
    "mul", inputs=[Slot("X"), Slot("Y")], outputs=[Slot("Out")],
    attrs=[AttrSpec("x_num_col_dims", AttrType.INT, 1), AttrSpec("y_num_col_dims", AttrType.INT, 1)],
    infer=_infer_mul,
    doc="X flattened to 2-D at x_num_col_dims times Y flattened at y_num_col_dims; "
        "Out = X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:].",
)


def _infer_fc(ctx: InferContext) -> None:
    x, cols, k = _flattened(ctx, "Input", "in_num_col_dims")
    w = _ranked(ctx, "W", 2).shape
    pad = 4 if ctx.attr("padding_weights") else 0
    k_w, n = (w[0] - pad if w[0] >= 0 else -1), (w[1] - pad if w[1] >= 0 else -1)
    ctx.check(_same_dim(k, k_w), f"Input {list(x)} flattened at {cols} has {k} columns but W {list(w)} "
                                 f"has {k_w} rows" + (" (padding_weights)" if pad else ""))
    if ctx.has_input("Bias"):
        bias = ctx.input("Bias").shape
        ok = len(bias) in (1, 2) and _same_dim(bias[-1], n) and (len(bias) == 1 or _same_dim(bias[0], 1))
        ctx.check(ok, f"Bias must have shape [{n}] or [1, {n}], got {list(bias)}")
    ctx.set_output("Out", (*x[:cols], n), ctx.input("Input").dtype)


_register(
    "fc", inputs=[Slot("Input"), Slot("W"), Slot("Bias", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("in_num_col_dims", AttrType.INT, 1),
           AttrSpec("activation_type", AttrType.STRING, "", choices=_PLAIN_ACTIVATIONS),
           AttrSpec("padding_weights", AttrType.BOOLEAN, False)],
    infer=_infer_fc,
    doc="Out = activation_type(Input flattened at in_num_col_dims @ W[in, out] + Bias); padding_weights: W "
        "is stored [in + 4, out + 4] and only its top-left [in, out] is used.",
)
