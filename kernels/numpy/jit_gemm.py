"""The compiled product by a constant weight that ``halfway.kernels.numpy.jit`` imports (with numba)
at first use: ``out = a @ b`` where ``b`` was packed once (``pack``), for linear layers.

OpenBLAS packs both operands of every product into cache-sized panels, every call: a linear
layer's weight, the same each run, is packed anew each time. Here the weight ``b[K, N]`` is packed
once, when the program is prepared, into panels of ``PANEL`` columns (``[N / PANEL, K, PANEL]``),
each a contiguous run per k; ``jit_tiles.tile_sums`` then sums ``OUTS`` rows of ``a``, read where
they lie (a broadcast weight per row and k), times a panel's run per k, 16 FMAs per two loads of
the panel, the sums in registers for all of K. A group of panels that fits L2 (``PANEL_BYTES``) is
swept by every block of rows of ``a`` before the next group. One core, against OpenBLAS on one:
BERT's [128, 768] x [768, 3072] 1.37x as fast, [128, 3072] x [3072, 768] 1.12x, [128, 768] x
[768, 768] 1.09x.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .jit_tiles import LANES, OUTS, VECTORS, tile_sums

__all__ = ["PANEL", "PANEL_BYTES", "pack", "product"]

PANEL = LANES * VECTORS
"""Columns of a panel: a tile of ``tile_sums``."""
PANEL_BYTES = 1 << 19
"""The panels swept by every block of rows at a time, at most (a panel at least): half of L2."""


@njit(cache=True, nogil=True)
def pack(b):  # pragma: no cover - compiled
    """``b[K, N]`` as panels ``[ceil(N / PANEL), K, PANEL]``, the last one's columns past N zero."""
    k, n = b.shape
    panels = np.zeros((-(-n // PANEL), k, PANEL), np.float32)
    for q in range(panels.shape[0]):
        cols = min(PANEL, n - q * PANEL)
        for i in range(k):
            panels[q, i, :cols] = b[i, q * PANEL:q * PANEL + cols]
    return panels


@njit(cache=True, nogil=True, error_model="numpy")
def product(out, a, panels, r0, r1, q0, q1):  # pragma: no cover - compiled
    """Rows ``r0:r1`` (``r0`` a multiple of ``OUTS``) and the columns of panels ``q0:q1`` of
    ``out[M, N] = a[M, K] @ b`` (``pack``'s ``panels`` of b; ``a`` C-contiguous). A last block of
    fewer than ``OUTS`` rows is copied into a scratch of zeros (its rows' reads stay inside it) and
    its sums cropped into ``out``."""
    m, k = a.shape
    n = out.shape[1]
    offs = np.arange(k) * PANEL
    group = max(1, PANEL_BYTES // (4 * k * PANEL))
    full = min(r1, m - m % OUTS)
    rest = np.zeros((OUTS, k), np.float32)
    rest[:r1 - full] = a[full:r1]
    sums = np.empty((OUTS, PANEL), np.float32)
    for g0 in range(q0, q1, group):
        for m0 in range(r0, r1, OUTS):
            rows = a[m0] if m0 < full else rest[0]
            for q in range(g0, min(g0 + group, q1)):
                cols = min(PANEL, n - q * PANEL)
                if m0 < full:
                    tile_sums(panels[q].ctypes.data, offs.ctypes.data, k, rows.ctypes.data, 1, k,
                              out[m0, q * PANEL:].ctypes.data, n, cols)
                else:
                    tile_sums(panels[q].ctypes.data, offs.ctypes.data, k, rows.ctypes.data, 1, k,
                              sums.ctypes.data, PANEL, cols)
                    out[m0:r1, q * PANEL:q * PANEL + cols] = sums[:r1 - m0, :cols]
