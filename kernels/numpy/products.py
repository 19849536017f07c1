"""Matrix products cut among the numpy backend's threads (``threads``): each thread multiplies a
block of rows (or, for few rows, of columns) with OpenBLAS on one thread.

OpenBLAS's own threads sleep a few microseconds after each product (``halfway.openblas`` keeps
them from spinning, which would take the cores from the backend's loops), and on a virtual
machine waking them costs tens of microseconds per product: MobileNetV3's forty 1x1 convolutions
paid it forty times. The backend's threads poll between parts, so a product cut among them
starts at once.
"""

from __future__ import annotations

import functools

import numpy as np

from halfway.kernels.numpy.threads import MULTIPLY_ADDS_PER_ELEMENT, run_parts, single_threaded_blas, spans, team_size

__all__ = ["matmul"]


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of 2-D float arrays (numpy's result), cut among the threads where it is worth it:
    by columns of ``b`` where ``a`` is the smaller operand (every thread packs all of the operand
    it does not cut: BERT's [128, 768] activations rather than its [768, 3072] weights), else by
    rows of ``a``."""
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n), np.result_type(a, b))
    by_rows = m > n
    cuts = spans(m if by_rows else n, (k * n if by_rows else k * m) // MULTIPLY_ADDS_PER_ELEMENT)
    if len(cuts) == 1 or out.dtype.kind != "f" or team_size() == 0:
        return np.matmul(a, b, out=out)
    with single_threaded_blas() as single:
        if not single:
            return np.matmul(a, b, out=out)
        if by_rows:
            parts = [functools.partial(np.matmul, a[r0:r1], b, out=out[r0:r1]) for r0, r1 in cuts]
        else:
            parts = [functools.partial(np.matmul, a, b[:, c0:c1], out=out[:, c0:c1]) for c0, c1 in cuts]
        run_parts(parts)
    return out
