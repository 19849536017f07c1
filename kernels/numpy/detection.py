"""numpy kernels of the detection ops: non_max_suppression (greedy, per batch and class, in float64) and
roi_align (per roi in float64: an average is a product of per-axis weight matrices, a maximum a
gather of every sample's corners)."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ..registry import Kernel, KernelSpec, register_kernel

__all__: list[str] = []


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """[..., 4] boxes as [y_min, x_min, y_max, x_max]."""
    if center:
        x, y, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=-1)


def _overlaps(box: np.ndarray, kept: np.ndarray, threshold: float) -> bool:
    """Whether ``box`` overlaps any of ``kept`` by an intersection over union above ``threshold``."""
    if not len(kept):
        return False
    low, high = np.maximum(box[:2], kept[:, :2]), np.minimum(box[2:], kept[:, 2:])
    sides = high - low
    inter = np.where((sides > 0).all(axis=1), sides.prod(axis=1), 0.0)
    area, areas = (box[2:] - box[:2]).prod(), (kept[:, 2:] - kept[:, :2]).prod(axis=1)
    union = area + areas - inter
    valid = (inter > 0) & (area > 0) & (areas > 0) & (union > 0)
    return bool((valid & (inter > threshold * np.where(valid, union, 1.0))).any())


def _scalar(args: list[np.ndarray], position: int | None, default: float) -> float:
    value = args[position] if position is not None else None
    return float(value.reshape(-1)[0]) if value is not None and value.size else default


@register_kernel("non_max_suppression", dtypes=(DType.float32, DType.float16, DType.float64))
def _nms(spec: KernelSpec) -> Kernel:
    slots = ["Boxes", "Scores"] + [s for s in ("MaxOutputBoxesPerClass", "IouThreshold", "ScoreThreshold")
                                   if spec.has_input(s)]
    position = {slot: i for i, slot in enumerate(slots)}.get
    center = bool(spec.attrs["center_point_box"])

    def run(*arrays: np.ndarray) -> np.ndarray:
        args = list(arrays)
        boxes, scores = _corners(args[0].astype(np.float64), center), args[1].astype(np.float64)
        limit = max(int(_scalar(args, position("MaxOutputBoxesPerClass"), 0)), 0)
        iou = _scalar(args, position("IouThreshold"), 0.0)
        floor = _scalar(args, position("ScoreThreshold"), -np.inf)
        rows = []
        for b in range(scores.shape[0]):
            for c in range(scores.shape[1]):
                order = [i for i in np.lexsort((np.arange(scores.shape[2]), -scores[b, c])) if scores[b, c, i] > floor]
                kept: list[int] = []
                for i in order:
                    if len(kept) == limit:
                        break
                    if not _overlaps(boxes[b, i], boxes[b, kept], iou):
                        kept.append(int(i))
                rows += [(b, c, i) for i in kept]
        return np.array(rows, np.int64).reshape(-1, 3)

    return run


def _samples(start: float, length: float, bins: int, grid: int, size: int) -> tuple[np.ndarray, ...]:
    """Along one axis of ``size`` pixels, the [bins, grid] samples' two neighbouring pixels and
    their bilinear weights (both 0 for a sample beyond a pixel outside), as ONNX's RoiAlign."""
    bin_size = length / bins
    at = start + np.arange(bins)[:, None] * bin_size + (np.arange(grid)[None, :] + 0.5) * bin_size / grid
    outside = (at < -1.0) | (at > size)
    at = np.maximum(at, 0.0)
    low = at.astype(np.int64)
    last = low >= size - 1
    low = np.where(last, size - 1, low)
    high = np.where(last, size - 1, low + 1)
    frac = np.where(last, 0.0, at - low)
    return (np.where(outside, 0, low), np.where(outside, 0, high), np.where(outside, 0.0, 1.0 - frac),
            np.where(outside, 0.0, frac))


def _roi_images(spec: KernelSpec, args: list[np.ndarray], rois: int, images: int) -> np.ndarray:
    """Each roi's image: BatchIndices, or RoisNum's counts in turn, or image 0 of a one-image X."""
    if spec.has_input("BatchIndices") or spec.has_input("RoisNum"):
        given = args[2].astype(np.int64).reshape(-1)
        which = given if spec.has_input("BatchIndices") else np.repeat(np.arange(len(given)), given)
    elif images == 1:
        which = np.zeros(rois, np.int64)
    else:
        raise HalfwayError(f"roi_align: X holds {images} images; BatchIndices or RoisNum must say whose the rois are")
    if which.shape != (rois,) or (which < 0).any() or (which >= images).any():
        raise HalfwayError(f"roi_align: the rois' images {which.tolist()} must be {rois} indices in [0, {images})")
    return which


@register_kernel("roi_align", dtypes=(DType.float32, DType.float16, DType.float64))
def _roi_align(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    bins = attrs["pooled_height"], attrs["pooled_width"]
    offset, scale, ratio = (0.5 if attrs["aligned"] else 0.0), attrs["spatial_scale"], attrs["sampling_ratio"]

    def pool(image: np.ndarray, roi: np.ndarray) -> np.ndarray:
        """[C, pooled_height, pooled_width] of one roi over its [C, H, W] image."""
        start = roi[[1, 0]] * scale - offset
        length = roi[[3, 2]] * scale - offset - start
        if not attrs["aligned"]:
            length = np.maximum(length, 1.0)
        grid = [ratio if ratio > 0 else int(np.ceil(length[i] / bins[i])) for i in (0, 1)]
        (y_low, y_high, wy_low, wy_high), (x_low, x_high, wx_low, wx_high) = (
            _samples(start[i], length[i], bins[i], grid[i], image.shape[1 + i]) for i in (0, 1))
        if attrs["mode"] == "avg":
            rows = _weights(y_low, y_high, wy_low, wy_high, image.shape[1])
            cols = _weights(x_low, x_high, wx_low, wx_high, image.shape[2])
            return rows @ image @ cols.T / max(grid[0] * grid[1], 1)
        corners = [(wy[:, :, None, None] * wx[None, None]) * image[:, y[:, :, None, None], x[None, None]]
                   for y, wy in ((y_low, wy_low), (y_high, wy_high)) for x, wx in ((x_low, wx_low), (x_high, wx_high))]
        best = np.maximum.reduce(corners)  # [C, bins_h, grid_h, bins_w, grid_w]
        return best.max(axis=(2, 4)) if best.size else np.zeros((image.shape[0], *bins))

    def run(*arrays: np.ndarray) -> np.ndarray:
        x, rois = arrays[0], arrays[1].astype(np.float64)
        images = _roi_images(spec, list(arrays), len(rois), x.shape[0])
        out = [pool(x[i].astype(np.float64), roi) for i, roi in zip(images, rois)]
        return np.array(out, x.dtype).reshape(len(rois), x.shape[1], *bins)

    return run


def _weights(low: np.ndarray, high: np.ndarray, w_low: np.ndarray, w_high: np.ndarray, size: int) -> np.ndarray:
    """The [bins, size] matrix summing each bin's samples' bilinear weights onto its pixels."""
    bins = np.broadcast_to(np.arange(low.shape[0])[:, None], low.shape)
    matrix = np.zeros((low.shape[0], size))
    np.add.at(matrix, (bins, low), w_low)
    np.add.at(matrix, (bins, high), w_high)
    return matrix
