"""Schemas of the image-geometry ops: pixel_shuffle, pixel_unshuffle, grid_sampler, affine_grid
and fold — Paddle's op types, slots, attrs and defaults, plus halfway attrs for ONNX (fold takes
any number of spatial dims, Paddle's two among them).

pixel_shuffle / pixel_unshuffle move channel blocks into space and back; their ``mode`` (a
halfway attr) orders a channel's block as Paddle does, channel-major ("CRD": channel c's r * r
values are adjacent), or block-major ("DCR", ONNX DepthToSpace's default and SpaceToDepth's only
order). grid_sampler's ``mode`` takes "bicubic" beside Paddle's "bilinear" and "nearest" (ONNX's
cubic GridSample); X may have 2 or 3 spatial dims, the grid's last dim holding (x, y[, z]).
"""

from __future__ import annotations

import math

import numpy as np

from ..attrs import AttrType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op

__all__: list[str] = []

_BLOCK_ORDERS = ("CRD", "DCR")


def _scaled(dim: int, factor: int) -> int:
    return dim * factor if dim >= 0 else -1


def _infer_pixel_shuffle(ctx: InferContext) -> None:
    x, r = ctx.input("X"), ctx.attr("upscale_factor")
    ctx.check(len(x.shape) == 4 and r >= 1, f"needs a 4-D X and upscale_factor >= 1, has {list(x.shape)} and {r}")
    n, c, h, w = x.shape
    ctx.check(c < 0 or c % (r * r) == 0, f"X's {c} channels are not a multiple of upscale_factor^2 = {r * r}")
    ctx.set_output("Out", [n, c // (r * r) if c >= 0 else -1, _scaled(h, r), _scaled(w, r)], x.dtype)


def _infer_pixel_unshuffle(ctx: InferContext) -> None:
    x, r = ctx.input("X"), ctx.attr("downscale_factor")
    ctx.check(len(x.shape) == 4 and r >= 1, f"needs a 4-D X and downscale_factor >= 1, has {list(x.shape)} and {r}")
    n, c, h, w = x.shape
    ctx.check(all(d < 0 or d % r == 0 for d in (h, w)), f"X's spatial dims {[h, w]} are not multiples of {r}")
    ctx.set_output("Out", [n, _scaled(c, r * r), h // r if h >= 0 else -1, w // r if w >= 0 else -1], x.dtype)


for _op_type, _factor, _infer, _what in (
        ("pixel_shuffle", "upscale_factor", _infer_pixel_shuffle, "X's channels, in blocks of r * r, spread into "
                                                                  "r x r pixels: [N, C, H, W] -> [N, C / r^2, H r, W r]"),
        ("pixel_unshuffle", "downscale_factor", _infer_pixel_unshuffle, "X's r x r pixel blocks gathered into "
                                                                        "channels: [N, C, H, W] -> [N, C r^2, H / r, W / r]")):
    register_op(OpSchema(
        _op_type, inputs=[Slot("X")], outputs=[Slot("Out")],
        attrs=[AttrSpec(_factor, AttrType.INT, 1), AttrSpec("data_format", AttrType.STRING, "NCHW", choices=("NCHW",)),
               AttrSpec("mode", AttrType.STRING, "CRD", choices=_BLOCK_ORDERS)],
        infer=_infer, doc=f"{_what}; `mode` orders each channel block (see the module docstring).",
    ))


def _infer_grid_sampler(ctx: InferContext) -> None:
    x, grid = ctx.input("X"), ctx.input("Grid")
    spatial = len(x.shape) - 2
    ctx.check(spatial in (2, 3) and len(grid.shape) == spatial + 2,
              f"needs X [N, C, (D,) H, W] and Grid [N, (D_out,) H_out, W_out, {max(spatial, 2)}], "
              f"has {list(x.shape)} and {list(grid.shape)}")
    ctx.check(grid.shape[-1] in (spatial, -1), f"Grid's last dim must be {spatial}, has {list(grid.shape)}")
    ctx.check(grid.dtype == x.dtype, f"Grid is {grid.dtype.name} but X is {x.dtype.name}")
    batch = x.shape[0] if x.shape[0] >= 0 else grid.shape[0]
    ctx.set_output("Output", [batch, x.shape[1], *grid.shape[1:-1]], x.dtype)


register_op(OpSchema(
    "grid_sampler", inputs=[Slot("X"), Slot("Grid")], outputs=[Slot("Output")],
    attrs=[AttrSpec("mode", AttrType.STRING, "bilinear", choices=("bilinear", "nearest", "bicubic")),
           AttrSpec("padding_mode", AttrType.STRING, "zeros", choices=("zeros", "border", "reflection")),
           AttrSpec("align_corners", AttrType.BOOLEAN, True)],
    infer=_infer_grid_sampler, dtype_slots=("X", "Grid"),
    doc="Output[n, c, p] = X[n, c] sampled at Grid[n, p] (coordinates in [-1, 1], x first), by `mode`; "
        "samples outside X read zeros, the border, or X reflected (padding_mode).",
))


def _infer_affine_grid(ctx: InferContext) -> None:
    theta = ctx.input("Theta")
    shape = list(ctx.attr("output_shape"))
    if ctx.has_input("OutputShape"):
        value = ctx.input_value("OutputShape")
        count = ctx.input("OutputShape").shape[0] if len(ctx.input("OutputShape").shape) == 1 else -1
        shape = [int(v) for v in np.asarray(value).reshape(-1)] if value is not None else [-1] * count
    ctx.check(len(shape) in (4, 5), f"output_shape {shape} must be [N, C, H, W] or [N, C, D, H, W]")
    spatial = len(shape) - 2
    ctx.check(len(theta.shape) == 3 and theta.shape[1:] in ((spatial, spatial + 1), (-1, -1)),
              f"Theta must be [N, {spatial}, {spatial + 1}] for output_shape {shape}, has {list(theta.shape)}")
    ctx.set_output("Output", [theta.shape[0], *shape[2:], spatial], theta.dtype)


register_op(OpSchema(
    "affine_grid", inputs=[Slot("Theta"), Slot("OutputShape", dispensable=True)], outputs=[Slot("Output")],
    attrs=[AttrSpec("output_shape", AttrType.INTS, []), AttrSpec("align_corners", AttrType.BOOLEAN, True)],
    infer=_infer_affine_grid, keep_dtype_slots=("OutputShape",),
    doc="Output[n, p] = Theta[n] @ (p's normalised coordinates in [-1, 1], x first, then 1): the sampling grid "
        "of an affine map, for an output of output_shape (or the OutputShape tensor) [N, C, (D,) H, W].",
))


def _infer_fold(ctx: InferContext) -> None:
    x = ctx.input("X")
    if ctx.has_input("OutputSizesTensor"):  # sizes computed at run time: one per spatial dim
        (spatial,) = ctx.input("OutputSizesTensor").shape
        ctx.check(len(x.shape) == 3 and spatial >= 1, f"X must be [N, C * prod(kernel_sizes), L], has {list(x.shape)}")
        ctx.set_output("Y", [x.shape[0], -1, *[-1] * spatial], x.dtype)
        return
    sizes, kernel = list(ctx.attr("output_sizes")), list(ctx.attr("kernel_sizes"))
    spatial = len(sizes)
    lists = {name: list(ctx.attr(name)) or [default] * spatial
             for name, default in (("strides", 1), ("dilations", 1))}
    paddings = list(ctx.attr("paddings")) or [0] * (2 * spatial)
    ctx.check(len(x.shape) == 3, f"X must be [N, C * prod(kernel_sizes), L], has {list(x.shape)}")
    ctx.check(spatial >= 1 and len(kernel) == spatial and all(len(v) == spatial for v in lists.values())
              and len(paddings) == 2 * spatial and min(paddings) >= 0 and min([*kernel, *sizes]) > 0,
              f"output_sizes {sizes}, kernel_sizes {kernel}, strides, dilations and paddings ({2 * spatial} values) "
              f"must describe the same {spatial} spatial dims")
    blocks = [(size + paddings[i] + paddings[spatial + i] - (lists["dilations"][i] * (k - 1) + 1))
              // lists["strides"][i] + 1 for i, (size, k) in enumerate(zip(sizes, kernel))]
    taps = math.prod(kernel)
    ctx.check(min(blocks) >= 1 and x.shape[2] in (math.prod(blocks), -1) and (x.shape[1] < 0 or x.shape[1] % taps == 0),
              f"X {list(x.shape)} must hold C * {taps} rows of {math.prod(blocks)} blocks ({blocks}) for "
              f"output_sizes {sizes}")
    ctx.set_output("Y", [x.shape[0], x.shape[1] // taps if x.shape[1] >= 0 else -1, *sizes], x.dtype)


register_op(OpSchema(
    "fold", inputs=[Slot("X"), Slot("OutputSizesTensor", dispensable=True), Slot("KernelSizesTensor", dispensable=True)],
    outputs=[Slot("Y")], keep_dtype_slots=("OutputSizesTensor", "KernelSizesTensor"),
    attrs=[AttrSpec("output_sizes", AttrType.INTS, []), AttrSpec("kernel_sizes", AttrType.INTS, []),
           AttrSpec("strides", AttrType.INTS, []), AttrSpec("paddings", AttrType.INTS, []),
           AttrSpec("dilations", AttrType.INTS, [])],
    infer=_infer_fold,
    doc="The sliding blocks of X [N, C * prod(kernel_sizes), L] summed into Y [N, C, *output_sizes] (im2col's "
        "adjoint); paddings are every dim's start then every dim's end; any number of spatial dims; "
        "OutputSizesTensor and KernelSizesTensor (computed at run time, both or neither) replace the sizes.",
))
