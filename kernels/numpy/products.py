"""Matrix products cut among the numpy backend's threads (``threads``): each thread multiplies a
block of rows (or of columns, where the other operand is the smaller) with OpenBLAS on one
thread; or, by a constant weight packed when the program is prepared (``pack``), in compiled
loops (``jit.compiled_product``). A product of fewer than ``PACKED_ROWS`` rows (a decode step's)
reads its weight once for a few multiply-adds per element: memory-bound, it is cut along the
shared dim instead, each thread reading a contiguous block of the weight's rows into a result of
its own, the results summed (``_by_depth``), where cut by columns each thread would read short
strided pieces of every row.

OpenBLAS's own threads sleep a few microseconds after each product (``halfway.api.openblas`` keeps
them from spinning, which would take the cores from the backend's loops), and on a virtual
machine waking them costs tens of microseconds per product: MobileNetV3's forty 1x1 convolutions
paid it forty times. The backend's threads poll between parts, so a product cut among them
starts at once.
"""

from __future__ import annotations

import functools
import threading
import weakref

import numpy as np

from .jit import compiled_product, packed_weight
from .threads import MULTIPLY_ADDS_PER_ELEMENT, run_parts, single_threaded_blas, spans, team_size

__all__ = ["PACKED_ROWS", "pack", "matmul"]

PACKED_ROWS = 8
"""The fewest rows of a product that the compiled loop takes (its tiles' rows): a product of fewer
reads the weight once for few multiply-adds, which OpenBLAS's GEMV does at twice its speed (and
``_by_depth`` cuts). Two cores, against OpenBLAS: BERT's products of 128 rows 1.2-1.35x as fast,
ViT's of 197 1.15x, ConvNeXt's of 49 to 3,136 1.05-1.3x."""

DEPTH_ALIGN = 16
"""Depth cuts start on multiples of this many of the weight's rows."""


_packed: dict[tuple[int, int, tuple[int, ...], tuple[int, ...]], tuple[weakref.ref[np.ndarray], np.ndarray]] = {}
"""(the weight's owning array, its data address, shape and strides) -> (the owner, the packed copy),
while the owner lives."""
_packing = threading.Lock()


def pack(b: np.ndarray | None) -> np.ndarray | None:
    """The constant weight ``b[K, N]`` of a linear layer packed for ``matmul`` (``jit.packed_weight``),
    or None (no constant, no numba, not float32). Kernels made for the same weight (a program
    prepared again for each feed signature, each binding its own view of the parameter) share one
    packed copy while its values are the weight's: each lookup compares them, so a weight changed in
    place between prepares is packed anew."""
    if b is None:
        return None
    owner = b if b.base is None else b.base
    key = (id(owner), b.__array_interface__["data"][0], b.shape, b.strides)
    with _packing:
        known = _packed.get(key)
        if known is not None and known[0]() is owner and _holds(known[1], b):
            return known[1]
        packed = packed_weight(b)
        if packed is not None:
            try:
                _packed[key] = (weakref.ref(owner, lambda _: _packed.pop(key, None)), packed)
            except TypeError:  # an owner that takes no weak reference (a buffer numpy wraps)
                pass
        return packed


def _holds(panels: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``panels`` are ``b``'s values (one pass over it, cheaper than packing it)."""
    k, n = b.shape
    return bool(np.array_equal(panels.transpose(1, 0, 2).reshape(k, -1)[:, :n], b))


def matmul(a: np.ndarray, b: np.ndarray, packed: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` of 2-D float arrays (numpy's result), cut among the threads where it is worth it:
    by columns of ``b`` where ``a`` is the smaller operand (every thread packs all of the operand
    it does not cut: BERT's [128, 768] activations rather than its [768, 3072] weights), else by
    rows of ``a``; products of fewer than ``PACKED_ROWS`` rows along k (``_by_depth``). With ``b``
    packed (``pack``), the compiled loop takes products of at least ``PACKED_ROWS`` rows."""
    m, k = a.shape
    n = b.shape[1]
    if packed is not None and m >= PACKED_ROWS:
        out = compiled_product(a, packed, n)
        if out is not None:
            return out
    out = np.empty((m, n), np.result_type(a, b))
    if out.dtype.kind != "f" or team_size() == 0:
        return np.matmul(a, b, out=out)
    if m < PACKED_ROWS:
        return _by_depth(a, b, out)
    by_rows = m > n
    cuts = spans(m if by_rows else n, (k * n if by_rows else k * m) // MULTIPLY_ADDS_PER_ELEMENT)
    if len(cuts) == 1:
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


def _by_depth(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``a @ b`` into ``out`` cut along k: part i multiplies ``a[:, ki]`` by the rows ``b[ki]``
    (a contiguous block of a C-contiguous weight, read once) into a result of its own, the first
    into ``out``, which the others are added to. Parts are sized by the weight elements they
    read, the cost of a product of few rows."""
    k, n = b.shape
    cuts = spans(k, n, align=DEPTH_ALIGN)
    if len(cuts) == 1:
        return np.matmul(a, b, out=out)
    with single_threaded_blas() as single:
        if not single:
            return np.matmul(a, b, out=out)
        results = [out] + [np.empty_like(out) for _ in cuts[1:]]
        run_parts([functools.partial(np.matmul, a[:, k0:k1], b[k0:k1], out=result)
                   for (k0, k1), result in zip(cuts, results)])
    for result in results[1:]:
        np.add(out, result, out=out)
    return out
