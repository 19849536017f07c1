"""numpy kernel of the n-gram op: tfidf_vectorizer (a loop over starts, skips and lengths)."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.ngram import ngram_table
from ..registry import Kernel, KernelSpec, register_kernel

__all__: list[str] = []


@register_kernel("tfidf_vectorizer", dtypes=(DType.int32, DType.int64))
def _tfidf(spec: KernelSpec) -> Kernel:
    a = spec.attrs
    table = ngram_table(list(a["pool_int64s"]), list(a["ngram_counts"]), list(a["ngram_indexes"]))
    size = max(a["ngram_indexes"], default=-1) + 1
    low, high, skips, mode = a["min_gram_length"], a["max_gram_length"], a["max_skip_count"], a["mode"]
    weights = np.asarray(a["weights"], np.float32) if len(a["weights"]) else np.ones(size, np.float32)

    def counted(row: list[int]) -> np.ndarray:
        counts = np.zeros(size, np.float32)
        for gap in range(1, skips + 2):
            for start in range(len(row)):
                for n in range(max(low, 1 if gap == 1 else 2), high + 1):
                    last = start + gap * (n - 1)
                    if last >= len(row):
                        break
                    hit = table.get(tuple(row[start:last + 1:gap]))
                    if hit is not None:
                        counts[hit] += 1
        if mode == "TF":
            return counts
        return np.where(counts > 0, weights, 0).astype(np.float32) if mode == "IDF" else counts * weights

    def run(x: np.ndarray) -> np.ndarray:
        rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
        out = np.stack([counted(r.tolist()) for r in rows])
        return out if x.ndim == 2 else out[0]

    return run
