"""numpy kernel of the detection op: non_max_suppression (greedy, per batch and class, in float64)."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
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
