"""Schemas of the convolutions: conv2d, depthwise_conv2d, conv2d_transpose, conv3d, conv3d_transpose,
deformable_conv, and the fused ones passes make (``fused_conv2d``: a convolution with its bias, residual and
activation; ``fused_conv2d_pool``: one with the pool after it) — Paddle's op types, slots, attrs
and defaults; the geometry is ``halfway.ir.ops.window``'s."""

from __future__ import annotations

import math

from ..attrs import AttrType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, TensorInfo, register_op
from .families import absorbable
from .window import check_vector, infer_window, join_channels, ranked, same_dim, split_channels, window_attrs

__all__ = ["FUSABLE_ACTIVATIONS"]


FUSABLE_ACTIVATIONS = ("", *absorbable())
"""Activations ``fused_conv2d`` may apply: the absorbable family rows (``halfway.ir.ops.families``)."""


def _conv_attrs(dims: int = 2) -> list[AttrSpec]:
    return window_attrs(dims) + [AttrSpec("groups", AttrType.INT, 1), AttrSpec("dilations", AttrType.INTS, [1] * dims)]


def _conv_common(ctx: InferContext, transposed: bool) -> tuple[TensorInfo, bool, int, int, tuple[int, ...]]:
    """Checks shared by all convs; returns (input, channel_last, batch, out channels, in spatial)."""
    rank = 5 if ctx.op_type in ("conv3d", "conv3d_transpose") else 4
    x, w = ranked(ctx, "Input", rank), ranked(ctx, "Filter", rank)
    channel_last = ctx.attr("data_format") in ("NHWC", "NDHWC")
    n, c, spatial = split_channels(x.shape, channel_last)
    groups = ctx.attr("groups")
    ctx.check(groups >= 1, f"attr groups must be >= 1, got {groups}")
    if transposed:
        ctx.check(same_dim(c, w.shape[0]), f"Input has {c} channels but Filter {list(w.shape)} expects "
                                            f"{w.shape[0]} (Filter is [C_in, C_out / groups, kh, kw])")
        ctx.check(w.shape[0] < 0 or w.shape[0] % groups == 0,
                  f"Filter's C_in {w.shape[0]} is not divisible by groups={groups}")
        return x, channel_last, n, (w.shape[1] * groups if w.shape[1] >= 0 else -1), spatial
    expected = w.shape[1] * groups if w.shape[1] >= 0 else -1
    ctx.check(same_dim(c, expected), f"Input has {c} channels but Filter {list(w.shape)} with groups={groups} "
                                      f"expects {expected} (Filter is [C_out, C_in / groups, kh, kw])")
    ctx.check(w.shape[0] < 0 or w.shape[0] % groups == 0,
              f"Filter's C_out {w.shape[0]} is not divisible by groups={groups}")
    if ctx.op_type == "depthwise_conv2d":
        ctx.check(same_dim(c, groups), f"depthwise needs groups == input channels, got groups={groups}, "
                                        f"{c} channels")
    return x, channel_last, n, w.shape[0], spatial


def _conv_output(ctx: InferContext) -> tuple[TensorInfo, tuple[int, ...]]:
    """(the input, the convolution's output shape), checked."""
    x, channel_last, n, c_out, spatial = _conv_common(ctx, transposed=False)
    window = infer_window(ctx, spatial, ctx.input("Filter").shape[2:], ctx.attr("dilations"))
    check_vector(ctx, "Bias", c_out)
    return x, join_channels(n, c_out, window.out, channel_last)


def _infer_conv(ctx: InferContext) -> None:
    x, out = _conv_output(ctx)
    if ctx.has_input("ResidualData"):
        res = ctx.input("ResidualData").shape
        ctx.check(len(res) == len(out) and all(map(same_dim, res, out)),
                  f"ResidualData must have the output's shape {list(out)}, got {list(res)}")
    ctx.set_output("Output", out, x.dtype)


def _infer_conv_transpose(ctx: InferContext) -> None:
    x, channel_last, n, c_out, spatial = _conv_common(ctx, transposed=True)
    strides = ctx.attr("strides")
    window = infer_window(ctx, spatial, ctx.input("Filter").shape[2:], ctx.attr("dilations"), transposed=True)
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
    check_vector(ctx, "Bias", c_out)
    ctx.set_output("Output", join_channels(n, c_out, out, channel_last), x.dtype)


_CONV_SLOTS = [Slot("Input"), Slot("Filter")]
for _type, _doc in (("conv2d", "2-D convolution (grouped when groups > 1)."),
                    ("depthwise_conv2d", "Depthwise 2-D convolution: conv2d with groups == input channels.")):
    register_op(OpSchema(
        _type, inputs=_CONV_SLOTS + [Slot("ResidualData", dispensable=True)], outputs=[Slot("Output")],
        attrs=_conv_attrs(), infer=_infer_conv,
        doc=f"{_doc} ResidualData, when given (Paddle's oneDNN fusions), is added to Output."))

register_op(OpSchema(
    "conv3d", inputs=_CONV_SLOTS, outputs=[Slot("Output")], attrs=_conv_attrs(3), infer=_infer_conv,
    doc="3-D convolution (grouped when groups > 1) over [N, C, D, H, W] (or NDHWC), Filter "
        "[C_out, C_in / groups, kd, kh, kw]; paddings 3 (symmetric) or 6 values.",
))


def _fused_conv_attrs() -> list[AttrSpec]:
    return _conv_attrs() + [AttrSpec("fuse_activation", AttrType.STRING, "", choices=FUSABLE_ACTIVATIONS),
                            AttrSpec("fuse_alpha", AttrType.FLOAT, 0.0), AttrSpec("fuse_beta", AttrType.FLOAT, 0.0)]


def _infer_conv_pool(ctx: InferContext) -> None:
    x, out = _conv_output(ctx)
    size = ctx.attr("pool_size")
    ctx.check(len(size) == 2 and all(s > 0 for s in size), f"attr pool_size must be 2 positive values, got {list(size)}")
    channel_last = ctx.attr("data_format") == "NHWC"
    n, c, spatial = split_channels(out, channel_last)
    ctx.check(all(d < 0 or d >= s for d, s in zip(spatial, size)),
              f"the convolution's output {list(spatial)} is smaller than pool_size {list(size)}")
    pooled = [d // s if d >= 0 else -1 for d, s in zip(spatial, size)]
    ctx.set_output("Output", join_channels(n, c, pooled, channel_last), x.dtype)


register_op(OpSchema(
    "fused_conv2d",
    inputs=_CONV_SLOTS + [Slot("Bias", dispensable=True), Slot("ResidualData", dispensable=True)],
    outputs=[Slot("Output")],
    attrs=_fused_conv_attrs(),
    infer=_infer_conv,
    doc="Output = act(conv2d(Input, Filter) + Bias[C] + ResidualData); act = fuse_activation, with "
        "fuse_alpha and fuse_beta its parameters as Paddle's fused_conv2d reads them (0: the default).",
))


register_op(OpSchema(
    "fused_conv2d_pool",
    inputs=_CONV_SLOTS + [Slot("Bias", dispensable=True)], outputs=[Slot("Output")],
    attrs=_fused_conv_attrs() + [AttrSpec("pool_type", AttrType.STRING, "max", choices=("max", "avg")),
                                 AttrSpec("pool_size", AttrType.INTS, [2, 2])],
    infer=_infer_conv_pool,
    doc="halfway's fused_conv2d followed by a pool2d of pool_size windows at their own stride, unpadded "
        "(rows and columns past the last whole window are dropped): Output = pool(act(conv2d(Input, Filter) "
        "+ Bias[C])). fuse_conv_pool makes it; on tensor cores in NHWC a 2x2 max pool is the GEMM's epilogue.",
))


for _type, _dims in (("conv2d_transpose", 2), ("conv3d_transpose", 3)):
    register_op(OpSchema(
        _type,
        inputs=_CONV_SLOTS + [Slot("Bias", dispensable=True)], outputs=[Slot("Output")],
        attrs=_conv_attrs(_dims) + [AttrSpec("output_padding", AttrType.INTS, []),
                                    AttrSpec("output_size", AttrType.INTS, [])],
        infer=_infer_conv_transpose,
        doc=f"Transposed {_dims}-D convolution (the gradient of conv{_dims}d w.r.t. its input), plus Bias[C_out] "
            f"when given; Filter is [C_in, C_out / groups, *kernel].",
    ))


def _infer_deformable_conv(ctx: InferContext) -> None:
    x, out = _conv_output(ctx)
    ctx.check(ctx.attr("data_format") == "NCHW", f"data_format must be NCHW, got {ctx.attr('data_format')}")
    groups, taps = ctx.attr("deformable_groups"), math.prod(ctx.input("Filter").shape[2:])
    ctx.check(groups >= 1 and (x.shape[1] < 0 or x.shape[1] % groups == 0),
              f"attr deformable_groups = {groups} must be >= 1 and divide Input's {x.shape[1]} channels")
    for slot, per_tap in (("Offset", 2), ("Mask", 1)):
        if ctx.has_input(slot):
            want = [out[0], groups * taps * per_tap, *out[2:]]
            got = ctx.input(slot).shape
            ctx.check(len(got) == 4 and all(map(same_dim, got, want)),
                      f"{slot} must be {want} ([N, deformable_groups * kh * kw{' * 2' if per_tap == 2 else ''}, "
                      f"out_h, out_w]), has shape {list(got)}")
    ctx.set_output("Output", out, x.dtype)


register_op(OpSchema(
    "deformable_conv",
    inputs=[Slot("Input"), Slot("Offset"), Slot("Mask", dispensable=True), Slot("Filter")], outputs=[Slot("Output")],
    attrs=_conv_attrs() + [AttrSpec("deformable_groups", AttrType.INT, 1), AttrSpec("im2col_step", AttrType.INT, 64)],
    infer=_infer_deformable_conv,
    doc="Paddle's deformable convolution (v2 with Mask): each tap of each output reads Input bilinearly "
        "(0 outside) at its place moved by Offset [N, deformable_groups * kh * kw * 2, oh, ow] ((dy, dx) per "
        "tap, the input channels cut into deformable_groups), times Mask when given; then the convolution's sum.",
))
