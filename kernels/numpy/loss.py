"""numpy kernel of ``nll_loss`` (``halfway.ir.ops.loss``); float16 runs widened to float32."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ..registry import Kernel, KernelSpec, register_kernel

__all__: list[str] = []


@register_kernel("nll_loss", dtypes=(DType.float32, DType.float16, DType.float64))
def _nll_loss(spec: KernelSpec) -> Kernel:
    ignore, reduction = spec.attrs["ignore_index"], spec.attrs["reduction"]
    wanted = [slot for slot, _ in spec.output_keys]

    def run(x: np.ndarray, label: np.ndarray, weight: np.ndarray | None = None) -> object:
        classes = x.shape[1]
        kept = label != ignore
        safe = np.where(kept, label, 0).astype(np.int64)
        if np.any((safe < 0) | (safe >= classes)):
            raise HalfwayError(f"nll_loss: Label holds a class outside [0, {classes}) that is not ignore_index "
                               f"({ignore})")
        picked = np.take_along_axis(x, safe[:, None], axis=1)[:, 0]
        weights = (weight[safe] if weight is not None else np.ones_like(picked)) * kept
        loss = -picked * weights
        total = weights.sum(dtype=x.dtype)
        if reduction == "sum":
            loss = loss.sum(dtype=x.dtype)
        elif reduction == "mean":
            loss = loss.sum(dtype=x.dtype) / total
        outs = {"Out": np.asarray(loss, x.dtype), "Total_weight": np.asarray(total, x.dtype)}
        return outs["Out"] if len(wanted) == 1 else tuple(outs[slot] for slot in wanted)

    return run
