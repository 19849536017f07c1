"""The compiled direct convolution that ``halfway.kernels.numpy.jit`` imports (with numba) at first
use: a dense (one group) NCHW convolution of any window, stride and dilation, with its epilogue.

im2col and a GEMM is the fast way where BLAS gets large products, but a layer of few channels makes
a thin one: YOLO's 32 -> 32 3x3 layer on a 160x160 map gathers 30 MB of columns (0.7 ms, two cores)
for a GEMM of 32 rows that OpenBLAS runs at half its speed (2.0 ms), where the multiply-adds alone
take under 1 ms. This loop reads the input where it lies:

1. Every input channel is copied into its stride phases (``jit_windows.phases``; a padded copy at
   stride 1), all channels into one scratch, once per call (``fill``). Tap (i, j) of output pixel
   (y, x) is then ``planes[c, base(i, j) + y * Wq + x]``, contiguous in x whatever the stride.
2. The output is computed ``BLOCK_PIXELS`` at a time (whole rows at the planes' width ``Wq``, the
   columns past the output's width computed and dropped), ``OUTS`` output channels at once: per
   input channel, each filter row is one pass over the block that loads each of its taps' pixels
   once and multiply-adds it into the four channels' accumulators (12 FMAs per 3 loads for a row
   of 3). A pass per output channel is bound by its loads and stores instead, 2x slower.
3. Each block's accumulators, started at the bias, get the residual and the activation
   (``jit_epilogue.finish``) and are written into the output while they are in L1.

The multiply-adds are FMA instructions (``jit_math.CONTRACT``); the sums are in another order
than a GEMM's (rounding differs from im2col's by float32's usual few ulps).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from halfway.kernels.numpy.jit_epilogue import finish
from halfway.kernels.numpy.jit_math import CONTRACT
from halfway.kernels.numpy.jit_windows import VECTOR_RUN, copy_channel, phases

__all__ = ["OUTS", "BLOCK_PIXELS", "ROW_SKEW", "layout", "fill", "dense"]

zero = np.float32(0)
OUTS = 4
"""Output channels a pass accumulates: their 12 weights of three taps and 4 accumulators stay in
the 32 vector registers of AVX-512; 8 spill them."""
BLOCK_PIXELS = 2048
"""Output pixels per block (whole rows): 4 rows of 8 KiB accumulators, which stay in L1 (1.2-1.5x
faster than 512 or 1024 on YOLO's 160x160 maps; 4096 spills to L2)."""
ROW_SKEW = 16
"""Floats between the accumulator rows beyond the block: rows 8 KiB apart alias in L1's sets."""


@njit(cache=True, nogil=True)
def layout(x, oh, ow, pt, pl, sh, sw, kh, kw, dh, dw):  # pragma: no cover - compiled
    """The planes' width ``Wq`` and length per channel, with ``jit_windows.phases``'s row starts,
    column phases and tap offsets for them (its scratch of one channel is dropped)."""
    wq = ow + (kw - 1) * dw // sw
    scratch, starts, firsts, offsets, counts, base = phases(x, oh + (kh - 1) * dh // sh + 1, wq, pt, pl, sh, sw,
                                                           kh, kw, dh, dw, zero, VECTOR_RUN + wq)
    return wq, scratch.size, starts, firsts, offsets, counts, base


@njit(cache=True, nogil=True)
def fill(planes, x, starts, firsts, offsets, counts, sw):  # pragma: no cover - compiled
    """Each channel of ``x[N, C, H, W]`` into its phases in ``planes[N, C, :]`` (zeroed where
    padding)."""
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            copy_channel(planes[n, c], x, n, c, starts, firsts, offsets, counts, sw)


@njit(cache=True, nogil=True, fastmath=CONTRACT)
def add3(acc, length, plane, w, o, c, t, s0, s1, s2):  # pragma: no cover - compiled
    """``acc[k, :length] +=`` taps ``t:t + 3`` of ``w[o + k, c]`` times their runs of ``plane`` at
    ``s0``, ``s1`` and ``s2``, for the ``OUTS`` channels ``k``. Each sum starts from the
    accumulator, so that it contracts into three FMAs (a sum of the products added to it would
    be a multiply, two FMAs and an add)."""
    w00, w01, w02 = w[o, c, t], w[o, c, t + 1], w[o, c, t + 2]
    w10, w11, w12 = w[o + 1, c, t], w[o + 1, c, t + 1], w[o + 1, c, t + 2]
    w20, w21, w22 = w[o + 2, c, t], w[o + 2, c, t + 1], w[o + 2, c, t + 2]
    w30, w31, w32 = w[o + 3, c, t], w[o + 3, c, t + 1], w[o + 3, c, t + 2]
    a0, a1, a2 = plane[s0:s0 + length], plane[s1:s1 + length], plane[s2:s2 + length]
    q0, q1, q2, q3 = acc[0], acc[1], acc[2], acc[3]
    for p in range(length):
        v0, v1, v2 = a0[p], a1[p], a2[p]
        q0[p] = q0[p] + w00 * v0 + w01 * v1 + w02 * v2
        q1[p] = q1[p] + w10 * v0 + w11 * v1 + w12 * v2
        q2[p] = q2[p] + w20 * v0 + w21 * v1 + w22 * v2
        q3[p] = q3[p] + w30 * v0 + w31 * v1 + w32 * v2


@njit(cache=True, nogil=True, fastmath=CONTRACT)
def add1(acc, length, plane, w, o, c, t, s0):  # pragma: no cover - compiled
    """``acc[k, :length] +=`` tap ``t`` of ``w[o + k, c]`` times its run at ``s0`` of ``plane``."""
    w0, w1, w2, w3 = w[o, c, t], w[o + 1, c, t], w[o + 2, c, t], w[o + 3, c, t]
    a = plane[s0:s0 + length]
    q0, q1, q2, q3 = acc[0], acc[1], acc[2], acc[3]
    for p in range(length):
        v = a[p]
        q0[p] += w0 * v
        q1[p] += w1 * v
        q2[p] += w2 * v
        q3[p] += w3 * v


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def dense(out, planes, base, wq, w, bias, residual, start, stop, code, alpha, top):  # pragma: no cover - compiled
    """Output rows ``start:stop`` of ``out[N, O, OH, OW] = act(conv + bias + residual)``,
    from ``planes`` (``fill``'s, ``wq`` wide; ``base`` each tap's offset in them) and the filter
    ``w[O', C, KH * KW]`` (O' a multiple of ``OUTS``, the rows past O zero). Taps are taken
    three at a time (``add3``), the last one or two one at a time."""
    outs, channels, taps = out.shape[1], w.shape[1], w.shape[2]
    ow = out.shape[3]
    triples = taps - taps % 3
    block = max(1, BLOCK_PIXELS // wq)
    acc = np.empty((OUTS, block * wq + VECTOR_RUN + ROW_SKEW), np.float32)
    for n in range(out.shape[0]):
        dst = out[n].reshape(outs, -1)
        res = residual[n].reshape(outs, -1) if residual is not None else dst
        for r0 in range(start, stop, block):
            r1 = min(r0 + block, stop)
            length = -(-(r1 - r0) * wq // VECTOR_RUN) * VECTOR_RUN
            shift = r0 * wq
            for o in range(0, w.shape[0], OUTS):
                for k in range(OUTS):
                    acc[k, :length] = bias[o + k] if bias is not None and o + k < outs else zero
                for c in range(channels):
                    plane = planes[n, c]
                    for t in range(0, triples, 3):
                        add3(acc, length, plane, w, o, c, t, base[t] + shift, base[t + 1] + shift, base[t + 2] + shift)
                    for t in range(triples, taps):
                        add1(acc, length, plane, w, o, c, t, base[t] + shift)
                for k in range(min(OUTS, outs - o)):
                    row, target = acc[k], dst[o + k]
                    for oy in range(r0, r1):
                        a0, d0 = (oy - r0) * wq, oy * ow
                        if residual is not None:
                            for ox in range(ow):
                                target[uint64(d0 + ox)] = row[uint64(a0 + ox)] + res[o + k, uint64(d0 + ox)]
                        else:
                            for ox in range(ow):
                                target[uint64(d0 + ox)] = row[uint64(a0 + ox)]
                    finish(target[r0 * ow:r1 * ow], code, alpha, top)
