"""numpy kernels of the image-geometry ops (``halfway.ir.ops.image``).

pixel_shuffle / pixel_unshuffle are a reshape, a transpose and a reshape, for every dtype. fold
adds each kernel tap's blocks into a strided slice of the padded output, one tap at a time.
grid_sampler samples every output point at once: per spatial axis the source coordinate is
unnormalised, rounded (nearest, half to even as PyTorch) or split into taps (2 linear, 4 cubic),
the coordinate moved inside by the padding mode, and each combination of taps gathered from X
(channels last) and summed weighted; a tap outside X reads 0 (zeros) or the clamped or reflected
pixel. float16 runs widened to float32.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ..registry import Kernel, KernelSpec, register_kernel
from .resize import cubic_kernel
from .tensor import int_source, register_data_kernel

__all__: list[str] = []

_FLOATS = (DType.float32, DType.float16, DType.float64)


@register_data_kernel("pixel_shuffle")
def _pixel_shuffle(spec: KernelSpec) -> Kernel:
    r, crd = spec.attrs["upscale_factor"], spec.attrs["mode"] == "CRD"

    def run(x: np.ndarray) -> np.ndarray:
        n, c, h, w = x.shape
        blocks = x.reshape(n, c // (r * r), r, r, h, w) if crd else x.reshape(n, r, r, c // (r * r), h, w)
        order = (0, 1, 4, 2, 5, 3) if crd else (0, 3, 4, 1, 5, 2)
        return blocks.transpose(order).reshape(n, c // (r * r), h * r, w * r)

    return run


@register_data_kernel("pixel_unshuffle")
def _pixel_unshuffle(spec: KernelSpec) -> Kernel:
    r, crd = spec.attrs["downscale_factor"], spec.attrs["mode"] == "CRD"

    def run(x: np.ndarray) -> np.ndarray:
        n, c, h, w = x.shape
        order = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        return x.reshape(n, c, h // r, r, w // r, r).transpose(order).reshape(n, c * r * r, h // r, w // r)

    return run


def _reflect(v: np.ndarray, low: float, high: float) -> np.ndarray:
    """``v`` folded into [low, high] by reflecting at the borders as often as needed."""
    span = high - low
    if span <= 0:
        return np.full_like(v, low)
    below = v < low
    distance = np.where(below, low - v, v - high)
    folds = np.floor(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    return np.where(below, np.where(even, low + rest, high - rest),
                    np.where(v > high, np.where(even, high - rest, low + rest), v))


class _Axis:
    """One spatial axis of a grid sample: its size, the borders of its valid coordinates, and the
    padding mode."""

    def __init__(self, size: int, align_corners: bool, padding: str) -> None:
        self.size, self.padding, self.align = size, padding, align_corners
        self.low, self.high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)

    def source(self, g: np.ndarray) -> np.ndarray:
        return (g + 1) / 2 * (self.size - 1) if self.align else ((g + 1) * self.size - 1) / 2

    def padded(self, v: np.ndarray) -> np.ndarray:
        if self.padding == "border":
            return np.where((v < self.low) | (v > self.high), np.clip(v, 0, self.size - 1), v)
        return _reflect(v, self.low, self.high) if self.padding == "reflection" else v

    def pixel(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(the index X is read at, whether the tap lies inside X — None when every tap reads X)."""
        if self.padding == "zeros":
            return np.clip(index, 0, self.size - 1), (index >= 0) & (index < self.size)
        if self.padding == "reflection":
            index = np.trunc(_reflect(index.astype(np.float64), self.low, self.high)).astype(np.int64)
        return np.clip(index, 0, self.size - 1), None


def _taps(axis: _Axis, v: np.ndarray, mode: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(index, weight) per tap of one axis at the (padded) coordinates ``v``."""
    if mode == "nearest":
        index, inside = axis.pixel(v.astype(np.int64))
        return [(index, np.ones_like(v) if inside is None else inside.astype(v.dtype))]
    base = np.floor(v)
    frac, offsets = v - base, ((0, 1) if mode == "bilinear" else (-1, 0, 1, 2))
    taps = []
    for offset in offsets:
        weight = 1 - np.abs(frac - offset) if mode == "bilinear" else cubic_kernel(frac - offset, -0.75)
        index, inside = axis.pixel(base.astype(np.int64) + offset)
        taps.append((index, weight if inside is None else weight * inside))
    return taps


@register_kernel("grid_sampler", dtypes=_FLOATS)
def _grid_sampler(spec: KernelSpec) -> Kernel:
    mode, padding, align = spec.attrs["mode"], spec.attrs["padding_mode"], spec.attrs["align_corners"]

    def run(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
        spatial = x.ndim - 2
        axes = [_Axis(size, align, padding) for size in x.shape[2:]]
        coords = [axis.source(grid[..., spatial - 1 - i]) for i, axis in enumerate(axes)]
        if mode == "nearest":
            coords = [np.rint(v) for v in coords]
        per_axis = [_taps(axis, axis.padded(v), mode) for axis, v in zip(axes, coords)]
        channels_last = np.moveaxis(x, 1, -1)
        batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
        out = np.zeros(grid.shape[:-1] + (x.shape[1],), x.dtype)
        for combination in itertools.product(*per_axis):
            weight = np.prod([w for _, w in combination], axis=0).astype(x.dtype)
            out += channels_last[(batch, *(i for i, _ in combination))] * weight[..., None]
        return np.ascontiguousarray(np.moveaxis(out, -1, 1))

    return run


@register_kernel("affine_grid", dtypes=_FLOATS)
def _affine_grid(spec: KernelSpec) -> Kernel:
    align, given = spec.attrs["align_corners"], list(spec.attrs["output_shape"])

    def run(theta: np.ndarray, *shape: np.ndarray) -> np.ndarray:
        dims = [int(v) for v in shape[0].reshape(-1)] if shape else given
        lines = [np.linspace(-1, 1, d) if align else (np.arange(d) * 2 + 1) / d - 1 for d in dims[2:]]
        mesh = np.meshgrid(*lines, indexing="ij")  # mesh[i] runs along spatial dim i; points list x (the last) first
        points = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1).astype(theta.dtype)
        return np.einsum("...k,njk->n...j", points, theta)

    return run


@register_kernel("fold", dtypes=_FLOATS)
def _fold(spec: KernelSpec) -> Kernel:
    """The sizes from the attrs, or from OutputSizesTensor and KernelSizesTensor at run time."""
    attrs = spec.attrs
    sizes_of = int_source(spec, ["OutputSizesTensor"], attrs["output_sizes"])
    kernel_of = int_source(spec, ["KernelSizesTensor"], attrs["kernel_sizes"])
    return lambda *args: _folded(args[0], sizes_of(args), kernel_of(args), attrs)


def _folded(x: np.ndarray, sizes: list[int], kernel: list[int], attrs: Mapping[str, Any]) -> np.ndarray:
    spatial = len(sizes)
    strides, dilations = list(attrs["strides"]) or [1] * spatial, list(attrs["dilations"]) or [1] * spatial
    pads = list(attrs["paddings"]) or [0] * (2 * spatial)
    padded = [size + pads[i] + pads[spatial + i] for i, size in enumerate(sizes)]
    blocks = [(p - (d * (k - 1) + 1)) // s + 1 for p, k, s, d in zip(padded, kernel, strides, dilations)]
    n = x.shape[0]
    cols = x.reshape(n, -1, *kernel, *blocks)
    out = np.zeros((n, cols.shape[1], *padded), x.dtype)
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(t * d, t * d + (b - 1) * s + 1, s) for t, d, b, s in zip(tap, dilations, blocks, strides))
        source: tuple[slice | int, ...] = (slice(None), slice(None), *tap)
        out[(slice(None), slice(None), *window)] += cols[source]
    return np.ascontiguousarray(out[(slice(None), slice(None), *(slice(pads[i], pads[i] + size)
                                                                 for i, size in enumerate(sizes)))])
