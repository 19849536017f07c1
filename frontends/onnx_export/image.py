"""Exporters of the image ops: pixel_shuffle / pixel_unshuffle (DepthToSpace / SpaceToDepth, or
their reshape-transpose form), grid_sampler (GridSample), affine_grid (AffineGrid) and fold (Col2Im).
"""

from __future__ import annotations

from typing import Any

from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__: list[str] = []


def _channels_first(ctx: ExportContext, op: Operator) -> None:
    if op.attr("data_format") not in ("NCHW", "NCDHW"):
        ctx.fail(f"data_format {op.attr('data_format')} (channels last) is not supported")


@exports("pixel_shuffle")
def pixel_shuffle(ctx: ExportContext, op: Operator) -> None:
    _channels_first(ctx, op)
    ctx.node("DepthToSpace", [op.input("X")[0]], [op.output("Out")[0]], blocksize=op.attr("upscale_factor"),
             mode=op.attr("mode"))


@exports("pixel_unshuffle")
def pixel_unshuffle(ctx: ExportContext, op: Operator) -> None:
    """SpaceToDepth orders the new channels block first (DCR); the CRD order (each channel's
    block together, PyTorch's) is a reshape, a transpose and a reshape."""
    _channels_first(ctx, op)
    x, out, r = op.input("X")[0], op.output("Out")[0], op.attr("downscale_factor")
    if op.attr("mode") == "DCR":
        ctx.node("SpaceToDepth", [x], [out], blocksize=r)
        return
    n, c, h, w = ctx.shape(x)
    if min(c, h, w) < 0:
        ctx.fail(f"CRD order needs known channels, height and width, {x!r} has shape {list(ctx.shape(x))}")
    blocks = ctx.node("Reshape", [x, ctx.ints([-1, c, h // r, r, w // r, r])])
    moved = ctx.node("Transpose", [blocks], perm=[0, 1, 3, 5, 2, 4])
    ctx.node("Reshape", [moved, ctx.ints([-1, c * r * r, h // r, w // r])], [out])


@exports("grid_sampler")
def grid_sampler(ctx: ExportContext, op: Operator) -> None:
    """GridSample: opset 16 names the modes bilinear and bicubic, 20 linear and cubic; 3-D needs 20."""
    x = op.input("X")[0]
    if ctx.opset < 16 or (ctx.rank(x) == 5 and ctx.opset < 20):
        ctx.fail(f"a {ctx.rank(x) - 2}-D GridSample needs opset {16 if ctx.rank(x) == 4 else 20} "
                 f"(asked for {ctx.opset})")
    mode = op.attr("mode")
    if ctx.opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    ctx.node("GridSample", [x, op.input("Grid")[0]], [op.output("Output")[0]], mode=mode,
             padding_mode=op.attr("padding_mode"), align_corners=int(op.attr("align_corners")))


@exports("affine_grid")
def affine_grid(ctx: ExportContext, op: Operator) -> None:
    if ctx.opset < 20:
        ctx.fail(f"AffineGrid needs opset 20 (asked for {ctx.opset})")
    given = op.input("OutputShape")
    size = ctx.int64(given[0]) if given else ctx.ints(op.attr("output_shape"))
    ctx.node("AffineGrid", [op.input("Theta")[0], size], [op.output("Output")[0]],
             align_corners=int(op.attr("align_corners")))


@exports("fold")
def fold(ctx: ExportContext, op: Operator) -> None:
    """Col2Im (opset 18); fold's paddings are ONNX's pads, all begins then all ends."""
    if ctx.opset < 18:
        ctx.fail(f"Col2Im needs opset 18 (asked for {ctx.opset})")
    options: dict[str, Any] = {name: list(op.attr(attr)) or None
               for name, attr in (("strides", "strides"), ("dilations", "dilations"), ("pads", "paddings"))}
    sizes = [ctx.int64(op.input(slot)[0]) if op.input(slot) else ctx.ints(op.attr(attr))
             for slot, attr in (("OutputSizesTensor", "output_sizes"), ("KernelSizesTensor", "kernel_sizes"))]
    ctx.node("Col2Im", [op.input("X")[0], *sizes], [op.output("Y")[0]], **options)


