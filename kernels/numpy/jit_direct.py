"""The compiled direct convolution that ``halfway.kernels.numpy.jit`` imports (with numba) at first
use: a dense (one group) NCHW convolution of any window, stride and dilation, with its epilogue.

im2col and a GEMM is the fast way where BLAS gets large products, but a layer of few channels makes
a thin one: YOLO's 32 -> 32 3x3 layer on a 160x160 map gathers 30 MB of columns (0.7 ms, two cores)
for a GEMM of 32 rows that OpenBLAS runs at half its speed (2.0 ms). This loop reads the input
where it lies:

1. Every input channel is copied into its stride phases (``jit_windows.phases``; a padded copy at
   stride 1), all channels into one scratch, once per call (``fill``). Tap (i, j) of output pixel
   (y, x) is then ``planes[c, base(i, j) + y * Wq + x]``, contiguous in x whatever the stride: a
   sum over the steps (c, i, j) of one weight times a run of the planes, for every output
   channel.
2. The output is computed a block of rows at a time (whole rows at the planes' width ``Wq``, the
   columns past the output's width computed and dropped; ``BLOCK_BYTES`` of input, which stays in
   L2; more for a large filter, ``BLOCK_MAX_BYTES``), ``jit_tiles.OUTS`` output channels at once by ``jit_tiles.tile_sums``, whose accumulators
   stay in registers for the whole sum.
3. Each block's sums get the bias, the residual and the activation (``jit_act.finish``) as
   they are copied into the output, while they are in cache; where the planes are as wide as the
   output, the sums are written into it and finished in place.

The sums are FMAs in the order of the steps, another order than a GEMM's (rounding differs from
im2col's by float32's usual few ulps).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .jit_act import finish
from .jit_tiles import OUTS, tile_sums
from .jit_windows import copy_channel, crop_rows, phases

__all__ = ["BLOCK_PIXELS", "layout", "fill", "dense"]

zero = np.float32(0)
BLOCK_PIXELS = 2048
"""The most output positions per block (whole rows at the planes' width)."""
BLOCK_BYTES = 1 << 18
"""The input a block reads, at most (``BLOCK_PIXELS`` fewer positions for many channels): it
stays in L2 while every group of ``OUTS`` output channels is computed from it."""
BLOCK_MAX_BYTES = 1 << 20
"""The input a block may read where the part's filter is larger than ``BLOCK_BYTES``: every block
streams the whole filter from memory, so the blocks grow (up to this, which still fits L2) to make
fewer passes over it. ResNet-50's 512 -> 512 3x3 stride-2 layer (9.4 MB of filter, 0.5 MB of
input planes) took two blocks, so two passes over its filter from memory in a network where it is
not in cache."""


@njit(cache=True, nogil=True)
def layout(x, oh, ow, pt, pl, sh, sw, kh, kw, dh, dw):  # pragma: no cover - compiled
    """The planes' width ``Wq`` and length per channel, with ``jit_windows.phases``'s row starts,
    column phases and tap offsets for them (its scratch of one channel is dropped)."""
    wq = ow + (kw - 1) * dw // sw
    scratch, starts, firsts, offsets, counts, base = phases(x, oh + (kh - 1) * dh // sh + 1, wq, pt, pl, sh, sw,
                                                           kh, kw, dh, dw, zero, wq)
    return wq, scratch.size, starts, firsts, offsets, counts, base


@njit(cache=True, nogil=True)
def fill(planes, x, starts, firsts, offsets, counts, sw):  # pragma: no cover - compiled
    """Each channel of ``x[N, C, H, W]`` into its phases in ``planes[N, C, :]`` (zeroed where
    padding)."""
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            copy_channel(planes[n, c], x, n, c, starts, firsts, offsets, counts, sw)


@njit(cache=True, nogil=True, error_model="numpy")
def dense(out, planes, offs, wq, w, bias, residual, start, stop, g0, g1, phases, act, a0, a1, a2):  # pragma: no cover - compiled
    """Output rows ``start:stop`` and channels ``g0 * OUTS:g1 * OUTS`` of ``out[N, O, OH, OW] =
    act(conv + bias + residual)``, from ``planes`` (``wq`` wide; ``offs[c * taps + t]`` where tap
    ``t`` of channel ``c`` starts in an image's planes) and the filter ``w[G, C * taps, OUTS]``
    (``G * OUTS >= O``, the channels past O zero); ``phases`` the input's stride phases, each as
    large as the output (the block's input grows with them). Where the planes are as wide as the output,
    the sums go straight into it; else into a scratch, whose rows are cropped into it."""
    outs, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    steps = w.shape[1]
    budget = min(max(BLOCK_BYTES, 4 * (g1 - g0) * OUTS * steps), BLOCK_MAX_BYTES)
    block = max(1, min(BLOCK_PIXELS, budget // (4 * planes.shape[1] * phases)) // wq)
    acc = np.empty(((g1 - g0) * OUTS, block * wq), np.float32)
    in_place = wq == ow
    for n in range(out.shape[0]):
        dst = out[n].reshape(outs, -1)
        res = residual[n].reshape(outs, -1) if residual is not None else dst
        flat = planes[n].reshape(-1)
        for r0 in range(start, stop, block):
            r1 = min(r0 + block, stop)
            src = flat[r0 * wq:]
            for g in range(g0, g1):
                o = g * OUTS
                if in_place and o + OUTS <= outs:
                    sums, stride = dst[o, r0 * ow:], oh * ow
                else:
                    sums, stride = acc[o - g0 * OUTS], acc.shape[1]
                tile_sums(src.ctypes.data, offs.ctypes.data, steps, w[g].ctypes.data, OUTS, 1, sums.ctypes.data,
                          stride, (r1 - r0) * wq)
            for o in range(g0 * OUTS, min(g1 * OUTS, outs)):
                row = dst[o, r0 * ow:] if in_place and (o // OUTS + 1) * OUTS <= outs else acc[o - g0 * OUTS]
                crop_rows(dst[o], row, res[o] if residual is not None else None, bias[o] if bias is not None else zero,
                      r0, r1, wq, ow)
                finish(dst[o, r0 * ow:r1 * ow], act, a0, a1, a2)
