"""The compiled window loops that ``halfway.kernels.numpy.jit`` imports (with numba) at first use: the
depthwise convolution of any window (ShuffleNet's 3x3, MobileNetV3's 5x5, ConvNeXt's 7x7) and 3x3
pooling, NCHW.

numpy runs both as a few passes over memory per call (a depthwise conv as small batched GEMMs over
gathered columns, a pool as ``kh + kw`` shifted maxima or sums); at ShuffleNet's and SqueezeNet's
sizes that costs 2-4x more than the arithmetic. These loops work channel by channel in cache:

1. The channel's padded input is copied into its ``sh * sw`` stride phases, each ``Hq x Wq``
   (as ``conv._Flat``; one scratch for all channels, filled once with the padding value, zero or
   -inf: only the input's own pixels are written per channel). Tap (i, j) of output pixel
   (y, x) is then ``planes[base(i, j) + y * Wq + x]``, contiguous in x whatever the stride.
2. A depthwise conv sums the output over the taps: pixel (y, x) sits at ``y * Wq + x`` of a
   plane as wide as the scratch's (the columns past the output's width are computed and
   dropped), so each tap is one contiguous run of a block of whole rows (``ACC_PIXELS``, in L1;
   all of a 14x14 map). ``jit_tiles.window_sums`` keeps 64 pixels' sums in registers over all
   the taps, a load per FMA (summing a filter row of taps in one pass over the block in memory
   took 2.5). Then the block's epilogue (bias, residual, activation) writes the output.
3. A pool reduces each output pixel's 9 taps in registers (the row's pixels as vector lanes),
   scales an average by its reciprocal count and writes it straight into the output. (A
   branch per max kept LLVM from vectorising: 2-4x slower than numpy.)

The depthwise loops' multiply-adds are FMA instructions (in the order of the taps).

Indices are unsigned where they address the scratch: numba wraps negative indices, and that
check (on signed ones LLVM cannot bound) turns the row's contiguous loads into gathers, 5-10x
slower.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from .jit_act import finish
from .jit_math import CONTRACT
from .jit_tiles import window_sums

__all__ = ["depthwise", "depthwise_small", "pool3x3"]

zero = np.float32(0)
ACC_PIXELS = 1024
"""Output pixels ``depthwise`` accumulates at a time (whole rows of them): a block in L1."""
TRANSPOSE_BLOCK = 16
"""``transpose_into``'s blocks: 16x16 floats, 1 KiB."""


@njit(cache=True, nogil=True)
def phases(x, hq, wq, pt, pl, sh, sw, taps_h, taps_w, dh, dw, fill, slack):  # pragma: no cover - compiled
    """The scratch (filled with ``fill``, ``slack`` elements longer than its planes), where each
    input row starts in it (-1: not needed), per column phase its first input column, offset and
    column count, and each tap's base offset."""
    rows, cols = x.shape[2], x.shape[3]
    plane = hq * wq
    starts = np.full(rows, -1, np.int64)
    for y in range(rows):
        py = y + pt
        if py // sh < hq:
            starts[y] = (py % sh) * sw * plane + py // sh * wq
    firsts, offsets, counts = np.empty(sw, np.int64), np.empty(sw, np.int64), np.empty(sw, np.int64)
    for b in range(sw):
        x0 = (b - pl) % sw
        q0 = (x0 + pl) // sw
        firsts[b], offsets[b] = x0, b * plane + q0
        counts[b] = max(0, min((cols - x0 + sw - 1) // sw, wq - q0))
    base = np.empty(taps_h * taps_w, np.int64)
    for i in range(taps_h):
        for j in range(taps_w):
            base[i * taps_w + j] = (((i * dh) % sh * sw + (j * dw) % sw) * plane + (i * dh) // sh * wq
                                    + (j * dw) // sw)
    return np.full(sh * sw * plane + slack, fill, x.dtype), starts, firsts, offsets, counts, base


@njit(cache=True, nogil=True, inline="always")
def copy_channel(planes, x, n, c, starts, firsts, offsets, counts, sw):  # pragma: no cover - compiled
    """Input channel ``c`` of image ``n`` into its stride phases. At column stride 2 one loop
    reads each row once and writes both phases, which LLVM turns into vector shuffles (a loop
    per phase reads at stride 2 element by element: 2.5x slower on MobileNetV3's 112x112 maps)."""
    src, width = x[n, c].reshape(-1), x.shape[3]
    for y in range(x.shape[2]):
        if starts[y] < 0:
            break
        row = y * width
        if sw == 2 and counts[0] == counts[1]:
            even = 0 if firsts[0] == 0 else 1  # the phase whose first column is column 0
            de, do = starts[y] + offsets[even], starts[y] + offsets[1 - even]
            for u in range(counts[0]):
                planes[uint64(de + u)] = src[uint64(row + 2 * u)]
                planes[uint64(do + u)] = src[uint64(row + 2 * u + 1)]
            continue
        for b in range(sw):
            src0, dst = row + firsts[b], starts[y] + offsets[b]
            if sw == 1:  # contiguous: a vector copy
                for u in range(counts[b]):
                    planes[uint64(dst + u)] = src[uint64(src0 + u)]
            else:
                for u in range(counts[b]):
                    planes[uint64(dst + u)] = src[uint64(src0 + u * sw)]


@njit(cache=True, nogil=True, inline="always")
def crop_rows(target, row, res, b, r0, r1, wq, ow):  # pragma: no cover - compiled
    """Rows ``r0:r1`` of ``target`` (``ow`` wide) = ``row``'s (``wq`` wide, from ``r0``) + ``b`` +
    ``res``'s (None: none)."""
    for oy in range(r0, r1):
        a0, d0 = (oy - r0) * wq, oy * ow
        if res is not None:
            for ox in range(ow):
                target[uint64(d0 + ox)] = (row[uint64(a0 + ox)] + b) + res[uint64(d0 + ox)]
        else:
            for ox in range(ow):
                target[uint64(d0 + ox)] = row[uint64(a0 + ox)] + b


@njit(cache=True, nogil=True, inline="always")
def row_bases(base, row):  # pragma: no cover - compiled
    """The 9 taps' offsets for the output row starting at ``row``."""
    return (base[0] + row, base[1] + row, base[2] + row, base[3] + row, base[4] + row, base[5] + row,
            base[6] + row, base[7] + row, base[8] + row)


@njit(cache=True, nogil=True, inline="always")
def taps(planes, row, ox):  # pragma: no cover - compiled
    """The 9 taps of output pixel ``ox`` of the row ``row_bases`` gave."""
    return (planes[uint64(row[0] + ox)], planes[uint64(row[1] + ox)], planes[uint64(row[2] + ox)],
            planes[uint64(row[3] + ox)], planes[uint64(row[4] + ox)], planes[uint64(row[5] + ox)],
            planes[uint64(row[6] + ox)], planes[uint64(row[7] + ox)], planes[uint64(row[8] + ox)])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def depthwise(out, x, w, bias, residual, pt, pl, sh, sw, dh, dw, act, a0, a1, a2):  # pragma: no cover
    """``out = act(depthwise(x, w) + bias + residual)``; ``w`` is ``[C * mult, 1, KH, KW]``,
    output channel ``c * mult + m`` reads input channel ``c``."""
    channels = x.shape[1]
    outs, kh, kw, oh, ow = w.shape[0], w.shape[2], w.shape[3], out.shape[2], out.shape[3]
    mult = outs // channels
    wq = ow + (kw - 1) * dw // sw
    planes, starts, firsts, offsets, counts, base = phases(x, oh + (kh - 1) * dh // sh + 1, wq, pt, pl, sh, sw,
                                                           kh, kw, dh, dw, zero, wq)
    rows = max(1, ACC_PIXELS // wq)
    acc = np.empty(rows * wq, np.float32)
    for n in range(x.shape[0]):
        for c in range(channels):
            copy_channel(planes, x, n, c, starts, firsts, offsets, counts, sw)
            for o in range(c * mult, (c + 1) * mult):
                dst = out[n, o].reshape(-1)
                res = residual[n, o].reshape(-1) if residual is not None else None
                b = bias[o] if bias is not None else zero
                for r0 in range(0, oh, rows):
                    r1 = min(r0 + rows, oh)
                    window_sums(planes[r0 * wq:].ctypes.data, base.ctypes.data, base.size, w[o].ctypes.data, 1, 0,
                                acc.ctypes.data, 0, (r1 - r0) * wq)
                    crop_rows(dst, acc, res, b, r0, r1, wq, ow)
                finish(dst, act, a0, a1, a2)  # the plane at once: rows of 7 cost more per call


@njit(cache=True, nogil=True)
def transpose_into(dst, src):  # pragma: no cover - compiled
    """``dst[j, i] = src[i, j]`` in square blocks that stay in L1."""
    rows, cols = src.shape
    for i0 in range(0, rows, TRANSPOSE_BLOCK):
        for j0 in range(0, cols, TRANSPOSE_BLOCK):
            for i in range(i0, min(i0 + TRANSPOSE_BLOCK, rows)):
                for j in range(j0, min(j0 + TRANSPOSE_BLOCK, cols)):
                    dst[j, i] = src[i, j]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def depthwise_small(out, x, w, bias, residual, pt, pl, sh, sw, dh, dw, act, a0, a1, a2):  # pragma: no cover
    """``depthwise`` (channel multiplier 1) for small maps, channels as the vector lanes: the
    image's input transposed to ``[H * W, C]`` and the filter to ``[KH * KW, C]``, each output
    pixel accumulates its taps inside the image as multiply-adds over all channels at once, then
    its epilogue, and is written back into the NCHW output. On MobileNetV3's [960, 7, 7] maps
    the loop over channels costs 4x less than ``depthwise``'s, which pays per channel for short
    rows."""
    channels, rows, cols = x.shape[1], x.shape[2], x.shape[3]
    kh, kw, oh, ow = w.shape[2], w.shape[3], out.shape[2], out.shape[3]
    taps = np.empty((kh * kw, channels), np.float32)
    transpose_into(taps, w.reshape(channels, kh * kw))
    pixels = np.empty((rows * cols, channels), np.float32)
    acc = np.empty(channels, np.float32)
    flat_taps, flat_pixels = taps.reshape(-1), pixels.reshape(-1)  # indexed, not sliced: a view per tap costs more than its math
    for n in range(x.shape[0]):
        transpose_into(pixels, x[n].reshape(channels, rows * cols))
        for oy in range(oh):
            for ox in range(ow):
                if bias is not None:
                    acc[:] = bias
                else:
                    acc[:] = zero
                for i in range(kh):
                    iy = oy * sh - pt + i * dh
                    if iy < 0 or iy >= rows:
                        continue
                    for j in range(kw):
                        ix = ox * sw - pl + j * dw
                        if ix < 0 or ix >= cols:
                            continue
                        tap, pixel = (i * kw + j) * channels, (iy * cols + ix) * channels
                        for c in range(channels):
                            acc[c] += flat_taps[uint64(tap + c)] * flat_pixels[uint64(pixel + c)]
                if residual is not None:
                    for c in range(channels):
                        acc[c] += residual[n, c, oy, ox]
                finish(acc, act, a0, a1, a2)
                for c in range(channels):
                    out[n, c, oy, ox] = acc[c]


@njit(cache=True, nogil=True, inline="always")
def larger(a, b):  # pragma: no cover - compiled
    """numpy's maximum: NaN from either side."""
    return b if (b > a) | (b != b) else a


@njit(cache=True, nogil=True)
def pool3x3(out, x, pt, pl, sh, sw, scale):  # pragma: no cover - compiled
    """3x3 max pooling (``scale`` None) or average pooling (the sum times ``scale[OH, OW]``,
    the reciprocal counts)."""
    oh, ow = out.shape[2], out.shape[3]
    wq = ow + 2 // sw
    fill = zero if scale is not None else np.float32(-np.inf)
    planes, starts, firsts, offsets, counts, base = phases(x, oh + 2 // sh + 1, wq, pt, pl, sh, sw,
                                                           3, 3, 1, 1, fill, 0)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            copy_channel(planes, x, n, c, starts, firsts, offsets, counts, sw)
            for oy in range(oh):
                row = row_bases(base, oy * wq)
                for ox in range(ow):
                    v0, v1, v2, v3, v4, v5, v6, v7, v8 = taps(planes, row, ox)
                    if scale is not None:
                        out[n, c, oy, ox] = (v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8) * scale[oy, ox]
                    else:
                        out[n, c, oy, ox] = larger(larger(larger(larger(v0, v1), larger(v2, v3)),
                                                          larger(larger(v4, v5), larger(v6, v7))), v8)
