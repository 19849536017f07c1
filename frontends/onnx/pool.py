"""Converters of ONNX's poolings: MaxPool (with its Indices in 2-D), AveragePool and LpPool in 1-D,
2-D and 3-D, dilated or not, and GlobalAveragePool / GlobalMaxPool; padding as ``window``'s, ceil
mode as ONNX counts it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto

from ...ir.dtypes import DType
from .context import GraphContext
from .registry import converts
from .window import lifts_1d, spatial_dims, window_paddings

__all__: list[str] = []


def _onnx_pool_out(size: int, k: int, s: int, before: int, after: int, ceil_mode: bool) -> int:
    """ONNX's pooled size: ceil mode drops a last window that would start in the end padding."""
    span = size + before + after - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + before:
        out -= 1
    return out


_POOLING = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}


@converts("MaxPool", "AveragePool", "LpPool", makes={"MaxPool": ("pool2d", "pool3d", "max_pool2d_with_index"),
                                                     "AveragePool": ("pool2d", "pool3d"), "LpPool": ("pool2d", "pool3d")})
@lifts_1d
def pool(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    """pool2d, or pool3d for a 5-D input; LpPool is "lp" pooling of order p; a 2-D MaxPool whose
    Indices are read, max_pool2d_with_index."""
    sizes = ctx.shape(node.input[0])[2:]
    if len(sizes) not in (2, 3):
        ctx.fail(f"only 1-D, 2-D and 3-D {node.op_type} are supported, the input has shape "
                 f"{list(ctx.shape(node.input[0]))}")
    kernel, dims = list(attrs["kernel_shape"]), len(sizes)
    dilations, strides = list(attrs.get("dilations", [1] * dims)), list(attrs.get("strides", [1] * dims))
    paddings, algorithm = window_paddings(ctx, attrs, sizes, kernel, strides, dilations)
    window = {"strides": strides, "paddings": paddings, "padding_algorithm": algorithm}
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if ctx.is_used(node, 1):
        if dims != 2 or algorithm != "EXPLICIT" or ceil_mode or any(d != 1 for d in dilations):
            ctx.fail("the Indices output of MaxPool is supported in 2-D, with explicit pads, without ceil_mode "
                     "or dilations")
        _with_indices(ctx, node, {"ksize": kernel, "strides": strides, "paddings": paddings},
                      attrs.get("storage_order", 0))
        return
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


def _with_indices(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any], storage_order: int) -> None:
    """max_pool2d_with_index, its Mask (h * W + w in each plane) made ONNX's Indices: the plane's
    offset plus h * W + w, or w * H + h with ``storage_order`` 1."""
    n, c, h, w = ctx.static_shape(node.input[0], "MaxPool's Indices")
    mask, index = ctx.temp(f"{node.output[1]}.mask"), ctx.temp(f"{node.output[1]}.in_plane")
    ctx.emit("max_pool2d_with_index", {"X": node.input[0]}, {"Out": node.output[0], "Mask": mask}, attrs)
    if storage_order:  # h * W + w -> w * H + h, looked up
        column_major = np.arange(h * w, dtype=np.int64).reshape(w, h).T.reshape(-1)
        table = ctx.add_const(f"{node.output[1]}.column_major", column_major)
        deep = ctx.temp(f"{mask}.nd")
        ctx.emit("unsqueeze2", {"X": mask}, {"Out": deep}, {"axes": [4]})
        ctx.emit("gather_nd", {"X": table, "Index": deep}, {"Out": index})
    else:
        ctx.emit("cast", {"X": mask}, {"Out": index}, {"in_dtype": int(DType.int32), "out_dtype": int(DType.int64)})
    planes = ctx.add_const(f"{node.output[1]}.planes", (np.arange(n * c, dtype=np.int64) * h * w).reshape(n, c, 1, 1))
    ctx.emit("elementwise_add", {"X": index, "Y": planes}, {"Out": node.output[1]})


def _covers_input(ctx: GraphContext, node: NodeProto, kernel: Sequence[int], window: dict[str, Any],
                  ceil_mode: bool, counts_input_only: bool) -> bool:
    """Whether the pool is one window over the whole input, averaging (or maximising) the input
    alone: a global pool (an exporter's pooler with a kernel larger than the map)."""
    sizes = spatial_dims(ctx, node, node.input[0])
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


@converts("GlobalAveragePool", "GlobalMaxPool", makes="pool2d")
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


@converts("MaxUnpool", makes="max_unpool")
def max_unpool(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    inputs = {"X": node.input[0], "Indices": node.input[1]}
    if len(node.input) > 2 and node.input[2]:
        inputs["OutputShape"] = node.input[2]
    ctx.emit("max_unpool", inputs, {"Out": node.output[0]},
             {"ksize": list(attrs["kernel_shape"]), "strides": list(attrs.get("strides", [])),
              "paddings": list(attrs.get("pads", []))})
