"""numpy kernels of the convolutions (``conv2d``, ``depthwise_conv2d``, ``fused_conv2d``,
``fused_conv2d_pool``, ``conv2d_transpose``, ``conv3d``, ``conv3d_transpose``) and the fused epilogue — bias, residual, activation — that fusion passes
target.

How a convolution runs (the plan is fixed at prepare time from the ``KernelSpec``; every path
returns a new array, or a crop of one, in the output's layout, NCHW or NHWC):

1. **pointwise** (1x1, unpadded): the input itself, subsampled when strided, is the GEMM operand:
   ``Out[n] = W[O, C] @ X[n][C, H*W]`` (NHWC: ``X[N*H*W, C] @ W[O, C].T``), one batched matmul
   over groups.
2. **im2col** (the general case, any stride, dilation, padding, groups): the input is padded
   once (channels-first), and a strided view of it holds every tap's window,
   ``[N, C, kh, kw, OH, OW]``. A few output rows at a time (``CHUNK_BYTES`` of columns, so the
   copy lands in cache and BLAS reads it from there) the view is copied into a contiguous
   ``cols[(c, i, j), rows * OW]`` buffer and one batched GEMM per group,
   ``W[g][Og, Cg*kh*kw] @ cols[g]``, writes those rows of the output in place — transposed
   (``cols.T @ W.T``) for NHWC, so no output copy is needed in either layout.
   2a. **shifted** (stride 1, one group, NCHW): the same GEMM, with columns gathered as one
   contiguous run per tap and channel from the flattened padded input (``_shifted``), computed at
   the padded width and cropped; taken where the padding widens rows by at most an eighth.
   2b. **Winograd** (3x3, stride 1, one group, NCHW, a constant filter, sizes as
   ``_takes_winograd``): F(2x2, 3x3) (Lavin and Gray, 2015). The padded input is cut into 4x4
   tiles overlapping by 2; each tile ``d`` becomes ``B^T d B`` and each filter ``g`` becomes
   ``G g G^T`` (4x4 each; the filters once, at prepare); 16 GEMMs ``U[k, c] @ V[c, tiles]``, one
   per tile position, replace the 9 of im2col at a quarter of the columns each (2.25x fewer
   multiply-adds), and ``A^T m A`` turns each 4x4 product tile into a 2x2 output block. Each
   transform is one small GEMM over all tiles; they are memory passes all the same, so small
   channel counts lose more to them than the GEMMs save.
   2c. **tap sum** (stride 1, one group, NCHW, at most a quarter as many outputs as input
   channels, whatever the padding's waste): one GEMM multiplies every tap's filter with the
   whole flattened padded input, ``P = [W_0; ...; W_T] @ X`` (``kh * kw * O`` rows, where ``O``
   alone would starve BLAS), and ``Out = sum_t P_t`` shifted by each tap's offset: nothing is
   gathered, and the ``kh * kw - 1`` additions are of the few output channels (``_tap_sum``).
3. **depthwise** (one input channel per group, any channel multiplier): NCHW, im2col per block of
   channels and one batched GEMM ``W[c, mult, kh*kw] @ cols[c, kh*kw, OH*OW]``, with columns
   gathered as in 2a at stride 1; NHWC, ``kh * kw`` vectorised multiply-adds of shifted views of
   the padded input. With numba (``halfway[jit]``), an NCHW one and its epilogue run as one
   compiled loop instead, channel by channel in cache (``jit_windows``; 2-4x faster at
   ShuffleNet's 3x3 sizes; MobileNetV3's 5x5 and ConvNeXt's 7x7 take its loop for any window).
4. **direct** (with numba; one group, NCHW, a window of several taps, where Winograd is not
   taken, ``_takes_direct``): ``jit_direct``'s loop reads the padded input where it lies, eight
   output channels at a time in registers (``jit_tiles``), the epilogue as the sums leave cache.
   im2col's columns are a gather of 9x the input, and its GEMM thin for few channels (32 rows
   for YOLO's 32 -> 32 layers): the loop takes 0.5-0.9x its time.
5. **transposed** (2-D and 3-D): one GEMM ``W[C_in, (O, kh, kw)].T @ X[C_in, H*W]`` per image and
   group, then one strided add per tap (col2im) into the zeroed full output, cropped by the paddings.
6. **3-D** (``conv3d``): im2col as in 2, over a strided view ``[N, C, kd, kh, kw, OD, OH, OW]`` of
   the input padded once (channels-first), a few output depth slices at a time.

The epilogue ``Out = act(Out + Bias[C] + ResidualData)`` (``make_epilogue``) runs in place on the
output buffer the kernel allocated; where a path returns a crop of a wider result (2a, 2c, 3,
Winograd's odd sizes; conv2d_transpose's paddings), its first addition reads the crop and writes
a new buffer, so cropping costs no pass of its own. float16 runs through the registry's
widening: float16 storage, float32 GEMMs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...ir.ops.families import UNARY, epilogue_op
from ...ir.ops.window import split_channels, window_geometry
from ..conv_pool import conv_and_pool
from ..registry import Kernel, KernelSpec, register_kernel
from .jit import (
    CompiledActivation,
    compiled_activation,
    compiled_dense,
    compiled_depthwise,
    compiled_epilogue,
    dense_filter,
)
from .pool import pool2d
from .threads import MULTIPLY_ADDS_PER_ELEMENT, run_parts, single_threaded_blas, spans, thread_count

__all__ = ["Epilogue", "make_activation", "make_epilogue", "ConvGeometry", "conv_geometry", "VolumeGeometry",
           "volume_geometry", "slot_positions"]

Activation = Callable[[np.ndarray], None]

CHUNK_BYTES = 4 << 20
"""Size of the im2col buffer: output rows are gathered and multiplied this many bytes of
columns at a time, so the copy lands in cache and the GEMM reads it from there."""


# -- the fused epilogue ---------------------------------------------------------------------------
def make_activation(op_type: str, attrs: Mapping[str, Any]) -> Activation:
    """Activation ``op_type`` with ``attrs`` (float32 scalars), written in place: the row's numpy
    math with ``out=y`` where it takes one, else its result copied back."""
    fn = UNARY[op_type].numpy
    bound = functools.partial(fn, **{k: np.float32(v) if isinstance(v, float) else v for k, v in attrs.items()})
    if "out" in inspect.signature(fn).parameters:
        return lambda y: bound(y, out=y)
    return lambda y: np.copyto(y, bound(y))


class Epilogue(NamedTuple):
    """``out = act(source + bias + residual)`` written into ``out`` (a buffer its caller owns).

    ``bias_shape`` broadcasts Bias[C] against the output (e.g. ``(C, 1, 1)`` for NCHW). Without
    ``source`` the epilogue works on ``out``'s own values. With ``compiled`` (numba installed, an
    activation its loops know) it is one compiled pass (``halfway.kernels.numpy.jit``), else one
    numpy pass per term.
    """

    activation: Activation | None
    bias_shape: tuple[int, ...]
    compiled: CompiledActivation | None = None

    def __call__(self, out: np.ndarray, bias: np.ndarray | None = None, residual: np.ndarray | None = None,
                 source: np.ndarray | None = None) -> np.ndarray:
        if self.compiled is not None and compiled_epilogue(self.compiled, len(self.bias_shape) == 1, out, source,
                                                           bias, residual):
            return out
        if source is not None and bias is not None:
            np.add(source, bias.reshape(self.bias_shape), out=out)
        elif source is not None:
            np.copyto(out, source)
        elif bias is not None:
            out += bias.reshape(self.bias_shape)
        if residual is not None:
            out += residual
        if self.activation is not None:
            self.activation(out)
        return out


def make_epilogue(bias_shape: Sequence[int], activation: str = "", alpha: float = 0.0,
                  beta: float = 0.0) -> Epilogue:
    """The epilogue of a fused op with ``fuse_activation`` (``fc``'s ``activation_type``) and its
    parameters (read by ``halfway.ir.ops.families.epilogue_op``)."""
    op = epilogue_op(activation, alpha, beta)
    if op is None:
        return Epilogue(None, tuple(bias_shape), compiled_activation("", {}))
    return Epilogue(make_activation(*op), tuple(bias_shape), compiled_activation(*op))


def slot_positions(spec: KernelSpec) -> dict[str, int]:
    """Where each present input slot's (first) array sits in the kernel's positional arguments."""
    positions: dict[str, int] = {}
    for index, (slot, _) in enumerate(spec.input_keys):
        positions.setdefault(slot, index)
    return positions


# -- geometry -------------------------------------------------------------------------------------
class ConvGeometry(NamedTuple):
    """A 2-D convolution's sizes, in channels-first terms whatever the layout."""

    n: int
    c: int
    h: int
    w: int
    o: int
    groups: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[tuple[int, int], tuple[int, int]]
    out: tuple[int, int]
    channel_last: bool

    @property
    def taps(self) -> list[tuple[int, int]]:
        return [(i, j) for i in range(self.kernel[0]) for j in range(self.kernel[1])]

    def out_shape(self) -> tuple[int, ...]:
        oh, ow = self.out
        return (self.n, oh, ow, self.o) if self.channel_last else (self.n, self.o, oh, ow)

    def bias_shape(self) -> tuple[int, ...]:
        return (self.o,) if self.channel_last else (self.o, 1, 1)


def conv_geometry(spec: KernelSpec, transposed: bool = False) -> ConvGeometry:
    attrs = spec.attrs
    channel_last = attrs["data_format"] == "NHWC"
    x, w, y = spec.input("Input").shape, spec.input("Filter").shape, spec.output("Output").shape
    n, c, h, wd = (x[0], x[3], x[1], x[2]) if channel_last else x
    o = y[3] if channel_last else y[1]
    kernel = (w[2], w[3])
    window = window_geometry((h, wd), kernel, attrs["strides"], attrs["dilations"], attrs["paddings"],
                             attrs["padding_algorithm"], transposed=transposed)
    out = (y[1], y[2]) if channel_last else (y[2], y[3])
    return ConvGeometry(n, c, h, wd, o, attrs["groups"], kernel, tuple(attrs["strides"]), window.dilations,
                        window.pads, out, channel_last)


class VolumeGeometry(NamedTuple):
    """A 3-D convolution's sizes, channels-first whatever the layout: ``sizes`` and ``out`` are
    (D, H, W) of the input and the output, ``pads`` (before, after) per spatial dim."""

    n: int
    c: int
    sizes: tuple[int, ...]
    o: int
    groups: int
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    out: tuple[int, ...]
    channel_last: bool


def volume_geometry(spec: KernelSpec) -> VolumeGeometry:
    """The geometry of a ``conv3d`` op."""
    attrs = spec.attrs
    channel_last = attrs["data_format"] == "NDHWC"
    x, w = spec.input("Input").shape, spec.input("Filter").shape
    n, c, sizes = (x[0], x[4], x[1:4]) if channel_last else (x[0], x[1], x[2:])
    kernel = tuple(w[2:])
    window = window_geometry(sizes, kernel, attrs["strides"], attrs["dilations"], attrs["paddings"],
                             attrs["padding_algorithm"])
    return VolumeGeometry(n, c, tuple(sizes), w[0], attrs["groups"], kernel, tuple(attrs["strides"]),
                          window.dilations, window.pads, window.out, channel_last)


def _channels_first(x: np.ndarray, channel_last: bool) -> np.ndarray:
    return x.transpose(0, 3, 1, 2) if channel_last else x


# -- padded inputs ---------------------------------------------------------------------------------
class Padding(NamedTuple):
    """Copies the input into a zeroed buffer with the conv's padding (once per call), in
    channels-first order or in the input's own layout; passes the input through when neither
    padding nor a layout change is needed."""

    shape: tuple[int, ...] | None
    inner: tuple[slice, ...]
    transpose: bool

    @classmethod
    def plan(cls, g: ConvGeometry, channels_first: bool = True) -> Padding:
        (pt, pb), (pl, pr) = g.pads
        hp, wp = g.h + pt + pb, g.w + pl + pr
        rows, cols = slice(pt, pt + g.h), slice(pl, pl + g.w)
        transpose = g.channel_last and channels_first
        needed = transpose or any((pt, pb, pl, pr))
        if g.channel_last and not channels_first:
            return cls((g.n, hp, wp, g.c) if needed else None, (slice(None), rows, cols, slice(None)), False)
        return cls((g.n, g.c, hp, wp) if needed else None, (slice(None), slice(None), rows, cols), transpose)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.shape is None:
            return x
        padded = np.zeros(self.shape, x.dtype)
        padded[self.inner] = _channels_first(x, self.transpose)
        return padded


# -- conv2d: im2col + GEMM --------------------------------------------------------------------------
def _pointwise(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """1x1 unpadded convolution: the (subsampled) input is the GEMM operand. Returns a new
    array in the output's layout."""
    sh, sw = g.strides
    oh, ow = g.out
    groups, cg, og, length = g.groups, g.c // g.groups, g.o // g.groups, g.out[0] * g.out[1]
    if g.channel_last:
        sub = (slice(None), slice(None, None, sh), slice(None, None, sw), slice(None))
        if groups == 1:
            return lambda x, w: np.matmul(x[sub].reshape(g.n * length, g.c), w.reshape(g.o, g.c).T).reshape(
                g.n, oh, ow, g.o)

        def grouped_nhwc(x: np.ndarray, w: np.ndarray) -> np.ndarray:
            out = np.empty(g.out_shape(), x.dtype)
            np.matmul(x[sub].reshape(g.n * length, groups, cg).transpose(1, 0, 2),
                      w.reshape(groups, og, cg).transpose(0, 2, 1),
                      out=out.reshape(g.n * length, groups, og).transpose(1, 0, 2))
            return out

        return grouped_nhwc
    sub = (slice(None), slice(None), slice(None, None, sh), slice(None, None, sw))
    return lambda x, w: np.matmul(w.reshape(groups, og, cg), x[sub].reshape(g.n, groups, cg, length)).reshape(
        g.n, g.o, oh, ow)


def _im2col(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The general convolution (module docstring, case 2). Returns a new array in the output's
    layout."""
    kh, kw = g.kernel
    (sh, sw), (dh, dw) = g.strides, g.dilations
    oh, ow = g.out
    groups, og = g.groups, g.o // g.groups
    k = g.c // groups * kh * kw
    rows = _chunk_rows(oh, CHUNK_BYTES // (groups * k * ow * 4), g.o * k * oh * ow)
    chunks = [(r, min(oh, r + rows)) for r in range(0, oh, rows)]
    pad = Padding.plan(g)

    def windows(xp: np.ndarray) -> np.ndarray:
        """All taps' windows of the padded input, ``[N, C, kh, kw, OH, OW]`` (a strided view)."""
        sn, sc, sy, sx = xp.strides
        return as_strided(xp, (g.n, g.c, kh, kw, oh, ow), (sn, sc, sy * dh, sx * dw, sy * sh, sx * sw),
                          writeable=False)

    if g.channel_last:
        def product(w: np.ndarray, cols: np.ndarray, out: np.ndarray, r0: int, r1: int) -> None:
            block = out[r0 * ow:r1 * ow].reshape(-1, groups, og).transpose(1, 0, 2)
            np.matmul(cols.reshape(groups, k, -1).transpose(0, 2, 1), w.transpose(0, 2, 1), out=block)

        flat_out = (g.n, oh * ow, g.o)
    else:
        def product(w: np.ndarray, cols: np.ndarray, out: np.ndarray, r0: int, r1: int) -> None:
            np.matmul(w, cols.reshape(groups, k, -1), out=out[:, :, r0 * ow:r1 * ow])

        flat_out = (g.n, groups, og, oh * ow)

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        view = windows(pad(x))
        wg = w.reshape(groups, og, k)
        out = np.empty(flat_out, x.dtype)

        def chunk(buf: np.ndarray, n: int, r0: int, r1: int) -> None:
            cols = buf[:, :, :, :r1 - r0]
            np.copyto(cols, view[n, :, :, :, r0:r1])
            product(wg, cols, out[n], r0, r1)

        _in_chunks(chunk, (g.c, kh, kw, rows, ow), x.dtype, g.n, chunks, og * k * rows * ow)
        return out.reshape(g.out_shape())

    return run


CUT_MULTIPLY_ADDS = 1 << 26
"""The fewest multiply-adds of a convolution whose chunks are cut among the threads: below,
OpenBLAS's own threads do as well (the 3x3 layers of a 224x224 SqueezeNet: 30 million at most;
YOLO's at 160x160: 240 million)."""


def _chunk_rows(rows: int, fit: int, multiply_adds: int) -> int:
    """Output rows per chunk: as many as ``fit`` in ``CHUNK_BYTES`` of columns and, where the
    convolution's ``multiply_adds`` (an image's) are worth cutting among the threads, few enough
    that every thread gets a chunk (at least one row)."""
    share = -(-rows // thread_count()) if multiply_adds >= CUT_MULTIPLY_ADDS else rows
    return max(1, min(rows, fit, share))


def _in_chunks(chunk: Callable[[np.ndarray, int, int, int], None], buffer: tuple[int, ...], dtype: np.dtype,
               images: int, chunks: Sequence[tuple[int, int]], multiply_adds: int) -> None:
    """``chunk(buf, n, a, b)`` for every image ``n`` and chunk ``(a, b)``, each with a scratch
    ``buf`` of shape ``buffer``: the chunks cut among the numpy backend's threads, each gathering
    its columns into its own buffer and multiplying them with OpenBLAS on one thread
    (``threads.single_threaded_blas``), so that a chunk's columns stay in its core's cache and
    the skinny products of few output channels (YOLO's 32) do not wait on OpenBLAS's threads.
    ``multiply_adds``: a chunk's; the work is cut from ``CUT_MULTIPLY_ADDS`` in all."""
    tasks = [(n, a, b) for n in range(images) for a, b in chunks]

    def part(share: Sequence[tuple[int, int, int]]) -> None:
        buf = np.empty(buffer, dtype)
        for n, a, b in share:
            chunk(buf, n, a, b)

    worth = len(tasks) * multiply_adds >= CUT_MULTIPLY_ADDS
    cuts = spans(len(tasks), multiply_adds // MULTIPLY_ADDS_PER_ELEMENT) if worth else [(0, len(tasks))]
    with single_threaded_blas() if len(cuts) > 1 else contextlib.nullcontext(False) as single:
        if single:
            run_parts([functools.partial(part, tasks[a:b]) for a, b in cuts])
        else:  # too little to cut, or no way to keep OpenBLAS to one thread: its own threads
            part(tasks)


class _Flat(NamedTuple):
    """The stride-1 NCHW layout of cases 2a, 2c and 3: the input padded and flattened per
    channel, where tap (i, j) of output pixel (y, x) sits at ``(y + i*dh) * Wp + x + j*dw``. For
    output rows computed at the padded width ``Wp``, each tap's columns are then one contiguous
    run per channel, ``flat[:, off_t:off_t + rows * Wp]``; the ``Wp - OW`` extra columns of each
    row are cropped at the end, and one spare zero row keeps the last tap's run inside."""

    g: ConvGeometry
    wp: int
    offsets: list[int]

    @classmethod
    def plan(cls, g: ConvGeometry) -> _Flat:
        (_, _), (pl, pr) = g.pads
        wp = g.w + pl + pr
        return cls(g, wp, [i * g.dilations[0] * wp + j * g.dilations[1] for i, j in g.taps])

    @property
    def length(self) -> int:
        """The columns of one image: ``OH * Wp``."""
        return self.g.out[0] * self.wp

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x`` padded and flattened, ``[N, C, (Hp + 1) * Wp]``."""
        g = self.g
        (pt, pb), (pl, _) = g.pads
        xp = np.zeros((g.n, g.c, g.h + pt + pb + 1, self.wp), x.dtype)
        xp[:, :, pt:pt + g.h, pl:pl + g.w] = x
        return xp.reshape(g.n, g.c, -1)

    def crop(self, wide: np.ndarray) -> np.ndarray:
        """The outputs ``[N, O, OH, OW]`` (a view) of ``wide[N, O, OH * Wp]``."""
        g = self.g
        return wide.reshape(g.n, -1, g.out[0], self.wp)[..., :g.out[1]]


def _shifted(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Stride-1 NCHW convolution (module docstring, case 2a): per block of output rows, each
    tap's runs (``_Flat``) are copied into the columns of one GEMM."""
    flat_of = _Flat.plan(g)
    wp = flat_of.wp
    k = g.c * len(flat_of.offsets)
    rows = _chunk_rows(g.out[0], CHUNK_BYTES // (k * wp * 4), g.o * k * g.out[0] * wp)
    chunks = [(r * wp, min(g.out[0], r + rows) * wp) for r in range(0, g.out[0], rows)]

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        flat = flat_of(x)
        wide = np.empty((g.n, g.o, flat_of.length), x.dtype)
        wk = w.reshape(g.o, k)

        def chunk(buf: np.ndarray, n: int, a: int, b: int) -> None:
            cols = buf[:, :, :b - a]
            for t, off in enumerate(flat_of.offsets):
                cols[:, t] = flat[n, :, a + off:b + off]
            np.matmul(wk, cols.reshape(k, b - a), out=wide[n, :, a:b])

        _in_chunks(chunk, (g.c, len(flat_of.offsets), rows * wp), x.dtype, g.n, chunks, g.o * k * rows * wp)
        return flat_of.crop(wide)

    return run


def _tap_sum(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Stride-1 NCHW convolution with few output channels (module docstring, case 2c). Every
    tap's product with the whole flattened padded input (``_Flat``) comes out of one GEMM,
    ``P[(t, o), :] = W_t @ flat``, whose ``kh * kw * O`` rows keep BLAS efficient where ``O``
    alone (DenseNet's 32) would not; then ``Out = sum_t P[t][:, off_t:off_t + OH * Wp]``, the
    ``kh * kw - 1`` shifted additions of the (small) products. No columns are gathered."""
    flat_of = _Flat.plan(g)
    length, offsets = flat_of.length, flat_of.offsets
    span = length + max(offsets)
    taps = len(offsets)

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        flat = flat_of(x)
        stacked = np.ascontiguousarray(w.reshape(g.o, g.c, taps).transpose(2, 0, 1)).reshape(taps * g.o, g.c)
        wide = np.empty((g.n, g.o, length), x.dtype)
        for n in range(g.n):
            products = np.matmul(stacked, flat[n, :, :span]).reshape(taps, g.o, span)
            shifted = [products[t, :, off:off + length] for t, off in enumerate(offsets)]
            if taps == 1:
                np.copyto(wide[n], shifted[0])
            else:
                np.add(shifted[0], shifted[1], out=wide[n])
            for product in shifted[2:]:
                wide[n] += product
        return flat_of.crop(wide)

    return run


def _depthwise(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """One input channel per group (output channel ``c * mult + m`` reads input channel ``c``),
    on the input padded in its own layout. NCHW: per block of channels (``CHUNK_BYTES`` of
    columns), the taps' windows are copied into ``cols[c, kh * kw, OH * OW]`` and one batched
    GEMM ``W[c, mult, kh * kw] @ cols[c]`` writes the block's outputs. NHWC: ``kh * kw``
    weighted shifted views accumulated."""
    if not g.channel_last:
        return _depthwise_shifted(g) if g.strides == (1, 1) else _depthwise_gemm(g)
    kh, kw = g.kernel
    (sh, sw), (dh, dw) = g.strides, g.dilations
    oh, ow = g.out
    mult = g.o // g.c
    pad = Padding.plan(g, channels_first=False)
    rows = [slice(i * dh, i * dh + (oh - 1) * sh + 1, sh) for i in range(kh)]
    cols = [slice(j * dw, j * dw + (ow - 1) * sw + 1, sw) for j in range(kw)]
    keep = slice(None)
    views = [(keep, rows[i], cols[j], keep, None) for i, j in g.taps]  # [N, OH, OW, C, 1] views

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        xp = pad(x)
        taps = np.ascontiguousarray(w.reshape(g.c, mult, kh * kw).transpose(2, 0, 1))  # [C, mult] weights
        acc = np.multiply(xp[views[0]], taps[0])
        tmp = np.empty_like(acc)
        for view, weight in zip(views[1:], taps[1:]):
            np.multiply(xp[view], weight, out=tmp)
            acc += tmp
        return acc.reshape(g.out_shape())

    return run


def _depthwise_shifted(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Stride-1 NCHW depthwise convolution. The taps' runs (``_Flat``) of every channel form one
    strided view with whole rows inside: per block of channels it is copied into
    ``cols[c, kh, kw, OH * Wp]`` (a copy of long runs, unlike the window view's rows of ``OW``)
    and one batched GEMM ``W[c, mult, kh * kw] @ cols[c]`` computes the block."""
    kh, kw = g.kernel
    dh, dw = g.dilations
    flat_of = _Flat.plan(g)
    length = flat_of.length
    block = max(1, min(g.c, CHUNK_BYTES // (kh * kw * length * 4)))

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        flat = flat_of(x)
        sn, sc, step = flat.strides
        view = as_strided(flat, (g.n, g.c, kh, kw, length), (sn, sc, dh * flat_of.wp * step, dw * step, step),
                          writeable=False)
        return flat_of.crop(_depthwise_blocks(view, w, block))

    return run


def _depthwise_gemm(g: ConvGeometry) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    kh, kw = g.kernel
    (sh, sw), (dh, dw) = g.strides, g.dilations
    oh, ow = g.out
    block = max(1, min(g.c, CHUNK_BYTES // (kh * kw * oh * ow * 4)))
    pad = Padding.plan(g)

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        xp = pad(x)
        sn, sc, sy, sx = xp.strides
        view = as_strided(xp, (g.n, g.c, kh, kw, oh, ow), (sn, sc, sy * dh, sx * dw, sy * sh, sx * sw),
                          writeable=False)
        return _depthwise_blocks(view, w, block).reshape(g.out_shape())

    return run


def _depthwise_blocks(view: np.ndarray, w: np.ndarray, block: int) -> np.ndarray:
    """The depthwise GEMMs over the taps' columns ``view[N, C, kh, kw, ...]``: per image and block
    of ``block`` channels, the columns are copied out and ``W[c, mult, kh*kw] @ cols[c]`` written to
    ``out[N, C, mult, columns]``."""
    n_images, channels, kh, kw = view.shape[:4]
    length = math.prod(view.shape[4:])
    mult = w.shape[0] // channels
    wk = w.reshape(channels, mult, kh * kw)
    out = np.empty((n_images, channels, mult, length), view.dtype)
    buf = np.empty((block, kh, kw, *view.shape[4:]), view.dtype)
    for n in range(n_images):
        for c0 in range(0, channels, block):
            c1 = min(channels, c0 + block)
            cols = buf[:c1 - c0]
            np.copyto(cols, view[n, c0:c1])
            np.matmul(wk[c0:c1], cols.reshape(c1 - c0, kh * kw, length), out=out[n, c0:c1])
    return out


WINOGRAD_MIN_CHANNELS = ((16, 160), (56, 256))
"""(largest output side, fewest input and output channels) where Winograd beats the shifted GEMM
(VGG-19's, ResNet-50's and GoogLeNet's 3x3 layers, 2 cores): 1.1-1.6x on 14x14 from 160, 1.3-2x
on 28x28 to 56x56 from 256 (VGG-19 1.33x end to end, ResNet-50 1.03x); on larger images its
memory passes outgrow the GEMMs' saving."""
WINOGRAD_CACHED_FILTER = 1 << 17
"""On outputs up to 8x8 Winograd pays only while the transformed filter, ``16 * C * O`` floats,
stays in cache: ``C * O`` at most this (not ResNet-50's 512x512 layers)."""

_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
_WINOGRAD_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
_WINOGRAD_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)
_WINOGRAD_GG = np.kron(_WINOGRAD_G, _WINOGRAD_G)
_WINOGRAD_BB = np.kron(_WINOGRAD_BT, _WINOGRAD_BT)
_WINOGRAD_AA = np.kron(_WINOGRAD_AT, _WINOGRAD_AT)
"""``M d M^T`` for a tile ``d`` flattened row-major is ``(M kron M) @ d``: each transform is one
GEMM over all tiles (or filters) at once."""


def _takes_winograd(g: ConvGeometry) -> bool:
    if not (g.kernel == (3, 3) and g.strides == (1, 1) and g.dilations == (1, 1) and g.groups == 1
            and not g.channel_last):
        return False
    side = max(g.out)
    if side <= 8 and g.c * g.o > WINOGRAD_CACHED_FILTER:
        return False
    return any(side <= largest and min(g.c, g.o) >= fewest for largest, fewest in WINOGRAD_MIN_CHANNELS)


def _winograd_filter(w: np.ndarray) -> np.ndarray:
    """``G g G^T`` for each 3x3 filter of ``w[K, C, 3, 3]``, as ``U[16, K, C]`` (tile position first)."""
    k, c = w.shape[:2]
    return np.matmul(_WINOGRAD_GG, w.reshape(k * c, 9).T.astype(np.float32)).reshape(16, k, c)


def _winograd(g: ConvGeometry, w: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """3x3 stride-1 convolution by Winograd F(2x2, 3x3) (module docstring, case 2b) with the
    constant filter ``w``, transformed once here."""
    u = _winograd_filter(w)
    (pt, _), (pl, _) = g.pads
    oh, ow = g.out
    th, tw = -(-oh // 2), -(-ow // 2)
    columns = g.n * th * tw

    def run(x: np.ndarray, _: np.ndarray) -> np.ndarray:
        xp = np.zeros((g.n, g.c, 2 * th + 2, 2 * tw + 2), x.dtype)
        xp[:, :, pt:pt + g.h, pl:pl + g.w] = x
        sn, sc, sy, sx = xp.strides
        tiles = np.empty((4, 4, g.c, g.n, th, tw), x.dtype)  # element (i, j) of every 4x4 tile
        np.copyto(tiles, as_strided(xp, tiles.shape, (sy, sx, sc, sn, 2 * sy, 2 * sx), writeable=False))
        v = np.matmul(_WINOGRAD_BB, tiles.reshape(16, -1)).reshape(16, g.c, columns)
        m = np.matmul(u, v)  # [16, O, N * tiles]
        y = np.matmul(_WINOGRAD_AA, m.reshape(16, -1)).reshape(2, 2, g.o, g.n, th, tw)
        out = np.empty((g.n, g.o, th, 2, tw, 2), x.dtype)
        for a in range(2):
            for b in range(2):
                out[:, :, :, a, :, b] = y[a, b].transpose(1, 0, 2, 3)
        out = out.reshape(g.n, g.o, 2 * th, 2 * tw)
        return out[:, :, :oh, :ow]

    return run


TAP_SUM_CHANNELS = 4
"""``_tap_sum`` is taken for at most 1/TAP_SUM_CHANNELS as many output channels as input channels,
whatever the padding's waste (DenseNet-121's 128 -> 32 3x3 layers: the whole model 1.2x faster
with a GEMM per tap, 1.06-1.12x more with the taps stacked into one GEMM). With as many outputs
as inputs (ResNet-50's 3x3 layers) the additions cost more than the gather they save (1.09x
slower)."""


def _little_waste(g: ConvGeometry) -> bool:
    """The shifted path computes ``Wp - OW`` wasted columns per row: take it where that is at
    most an eighth of the work (wide images; small ones gather their columns instead)."""
    (_, _), (pl, pr) = g.pads
    return 8 * g.out[1] >= 7 * (g.w + pl + pr)


def _conv_runner(g: ConvGeometry, w: np.ndarray | None = None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The path for ``g`` (module docstring); ``w`` is the filter when it is a constant."""
    if g.groups == g.c and g.groups > 1:
        return _depthwise(g)
    if g.kernel == (1, 1) and not any(p for pair in g.pads for p in pair):
        return _pointwise(g)
    if w is not None and _takes_winograd(g):
        return _winograd(g, w)
    if g.strides == (1, 1) and g.groups == 1 and not g.channel_last:
        if TAP_SUM_CHANNELS * g.o <= g.c:
            return _tap_sum(g)
        if _little_waste(g):
            return _shifted(g)
    return _im2col(g)


def _conv_kernel(spec: KernelSpec, conv: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 epilogue: Epilogue) -> Kernel:
    """Bind ``conv`` (which returns a new array in the output's layout) and the epilogue, run in
    place on that array, to the op's input slots."""
    where = slot_positions(spec)
    bias_at, residual_at = where.get("Bias"), where.get("ResidualData")

    def run(*args: np.ndarray) -> np.ndarray:
        out = conv(args[0], args[1])
        bias, residual = None if bias_at is None else args[bias_at], None if residual_at is None else args[residual_at]
        if out.flags.c_contiguous:
            return epilogue(out, bias, residual)
        return epilogue(np.empty(out.shape, out.dtype), bias, residual, source=out)  # a crop: copied by the first add

    return run


CompiledConv = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None], bool]
"""A compiled conv ``(out, x, w, bias, residual) -> done`` (``jit``'s, bound to an op's geometry)."""


def _compiled_conv(spec: KernelSpec, g: ConvGeometry, compiled: CompiledConv, numpy_kernel: Kernel,
                   filter_of: Callable[[np.ndarray], np.ndarray] = lambda w: w) -> Kernel:
    """The NCHW conv and its epilogue as ``compiled`` loops (``jit_windows``, ``jit_direct``), on
    the filter as ``filter_of`` lays it out (once, for a constant one); ``numpy_kernel`` runs where
    the arrays do not suit them (float16 widened to float64, say)."""
    where = slot_positions(spec)
    bias_at, residual_at = where.get("Bias"), where.get("ResidualData")
    constant = spec.constant("Filter")
    laid_out = None if constant is None else filter_of(constant)

    def run(*args: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(args[0])  # a transposed view (ConvNeXt's blocks) copied first
        w = laid_out if laid_out is not None else filter_of(args[1])
        out = np.empty(g.out_shape(), x.dtype)
        bias, residual = None if bias_at is None else args[bias_at], None if residual_at is None else args[residual_at]
        if compiled(out, x, w, bias, residual):
            return out
        return numpy_kernel(*args)

    return run


def _takes_direct(g: ConvGeometry) -> bool:
    """Whether the direct convolution (``jit_direct``) is taken for ``g``: one group, NCHW, a window
    of several taps, and not a layer for Winograd, whose 2.25x fewer multiply-adds win there
    (ResNet's 256 -> 256 3x3 layers on 14x14 maps: 0.75x the direct loop's time on one core, as
    fast on two). Against im2col or a GEMM per tap and OpenBLAS, two cores: YOLO's 32 -> 32 3x3
    layers on 160x160 maps 0.53x the time, its stride-2 layers 0.58-0.9x, 64 -> 64 on 40x40 to
    80x80 0.7-0.75x, 128 -> 128 on 28x28 0.75x, 512 -> 512 on 7x7 0.65-0.75x. 1x1 layers stay
    GEMMs: OpenBLAS runs them 1.2-2.5x faster than the loop."""
    return g.groups == 1 and not g.channel_last and g.kernel != (1, 1) and not _takes_winograd(g)


def _conv(spec: KernelSpec, g: ConvGeometry, epilogue: Epilogue) -> Kernel:
    kernel = _conv_kernel(spec, _conv_runner(g, spec.constant("Filter")), epilogue)
    act = epilogue.compiled
    if act is None or g.channel_last:
        return kernel
    (pt, _), (pl, _) = g.pads
    if g.groups == g.c > 1:
        return _compiled_conv(spec, g, functools.partial(compiled_depthwise, act, (pt, pl), g.strides, g.dilations),
                              kernel, np.ascontiguousarray)
    if _takes_direct(g):
        return _compiled_conv(spec, g, functools.partial(compiled_dense, act, g.kernel, (pt, pl), g.strides,
                                                         g.dilations), kernel, dense_filter)
    return kernel


@register_kernel("conv2d")
@register_kernel("depthwise_conv2d")
def conv2d(spec: KernelSpec) -> Kernel:
    g = conv_geometry(spec)
    return _conv(spec, g, make_epilogue(g.bias_shape()))


@register_kernel("fused_conv2d")
def fused_conv2d(spec: KernelSpec) -> Kernel:
    g = conv_geometry(spec)
    attrs = spec.attrs
    return _conv(spec, g, make_epilogue(g.bias_shape(), attrs["fuse_activation"], attrs["fuse_alpha"], attrs["fuse_beta"]))


@register_kernel("fused_conv2d_pool")
def fused_conv2d_pool(spec: KernelSpec) -> Kernel:
    """The convolution, then the pool of its output (``conv_and_pool``)."""
    conv_spec, pool_spec = conv_and_pool(spec)
    conv, pool = fused_conv2d(conv_spec), pool2d(pool_spec)
    return lambda *args: pool(conv(*args))


# -- conv3d: a GEMM per tap -----------------------------------------------------------------------
@register_kernel("conv3d")
def conv3d(spec: KernelSpec) -> Kernel:
    """The 3-D convolution (module docstring, case 6)."""
    g = volume_geometry(spec)
    (kd, kh, kw), (od, oh, ow) = g.kernel, g.out
    groups, og, plane = g.groups, g.o // g.groups, oh * ow
    k = g.c // groups * kd * kh * kw
    rows = _chunk_rows(od, CHUNK_BYTES // (groups * k * plane * 4), g.o * k * od * plane)
    chunks = [(r, min(od, r + rows)) for r in range(0, od, rows)]
    padded = (g.n, g.c, *(size + before + after for size, (before, after) in zip(g.sizes, g.pads)))
    inner = (slice(None), slice(None), *(slice(before, before + size) for size, (before, _) in zip(g.sizes, g.pads)))
    steps = (*g.dilations, *g.strides)

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        xp = np.zeros(padded, x.dtype)
        xp[inner] = x.transpose(0, 4, 1, 2, 3) if g.channel_last else x
        sn, sc, *spatial = xp.strides
        view = as_strided(xp, (g.n, g.c, kd, kh, kw, od, oh, ow),
                          (sn, sc, *(stride * step for stride, step in zip(spatial * 2, steps))), writeable=False)
        wg = w.reshape(groups, og, k)
        out = np.empty((g.n, groups, og, od * plane), x.dtype)

        def chunk(buf: np.ndarray, n: int, r0: int, r1: int) -> None:
            cols = buf[:, :, :, :, :r1 - r0]
            np.copyto(cols, view[n, :, :, :, :, r0:r1])
            np.matmul(wg, cols.reshape(groups, k, -1), out=out[n, :, :, r0 * plane:r1 * plane])

        _in_chunks(chunk, (g.c, kd, kh, kw, rows, oh, ow), x.dtype, g.n, chunks, og * k * rows * plane)
        y = out.reshape(g.n, g.o, od, oh, ow)
        return np.ascontiguousarray(y.transpose(0, 2, 3, 4, 1)) if g.channel_last else y

    return run


# -- conv2d_transpose, conv3d_transpose: GEMM + col2im --------------------------------------------
@register_kernel("conv2d_transpose")
@register_kernel("conv3d_transpose")
def conv_transpose(spec: KernelSpec) -> Kernel:
    """The transposed convolution in 2-D or 3-D (module docstring, case 5)."""
    attrs = spec.attrs
    channel_last = attrs["data_format"] in ("NHWC", "NDHWC")
    n, c, sizes = split_channels(spec.input("Input").shape, channel_last)
    _, o, out = split_channels(spec.output("Output").shape, channel_last)
    kernel, strides = spec.input("Filter").shape[2:], attrs["strides"]
    window = window_geometry(sizes, kernel, strides, attrs["dilations"], attrs["paddings"], attrs["padding_algorithm"],
                             transposed=True)
    befores = [before for before, _ in window.pads]
    groups, cg, og, dims = attrs["groups"], c // attrs["groups"], o // attrs["groups"], len(sizes)
    full = [max((size - 1) * s + (k - 1) * d + 1, before + o_)
            for size, s, k, d, before, o_ in zip(sizes, strides, kernel, window.dilations, befores, out)]
    everything = (slice(None), slice(None))
    scatter = [(tap, everything + tuple(slice(i * d, i * d + (size - 1) * s + 1, s)
                                        for i, d, size, s in zip(tap, window.dilations, sizes, strides)))
               for tap in np.ndindex(*kernel)]
    crop = everything + tuple(slice(before, before + o_) for before, o_ in zip(befores, out))
    last = (0, *range(2, dims + 2), 1)  # channels-first -> channels-last
    epilogue = make_epilogue((o,) if channel_last else (o, *[1] * dims))
    bias_at = slot_positions(spec).get("Bias")

    def run(*args: np.ndarray) -> np.ndarray:
        x, w = args[0], args[1]
        if channel_last:
            x = x.transpose(0, dims + 1, *range(1, dims + 1))
        xg = x.reshape(n, groups, cg, math.prod(sizes))
        cols = np.matmul(w.reshape(groups, cg, og * math.prod(kernel)).transpose(0, 2, 1), xg)
        cols = cols.reshape(n, o, *kernel, *sizes)
        padded = np.zeros((n, o, *full), cols.dtype)
        for tap, where in scatter:
            padded[where] += cols[everything + tap]
        source = padded[crop].transpose(last) if channel_last else padded[crop]
        bias = None if bias_at is None else args[bias_at]
        return epilogue(np.empty(source.shape, cols.dtype), bias, source=source)

    return run


def _bilinear_taps(x: np.ndarray, y: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """x [N, G, C, H, W] read at the points (y, xs) [N, G, P], bilinearly, a corner outside x
    reading 0: [N, G, C, P]."""
    h, w = x.shape[-2:]
    flat = x.reshape(*x.shape[:3], h * w)
    low_y, low_x = np.floor(y), np.floor(xs)
    out = np.zeros((*x.shape[:3], y.shape[-1]), np.float64)
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        cy, cx = low_y + dy, low_x + dx
        weight = (1 - np.abs(y - cy)) * (1 - np.abs(xs - cx)) * ((cy >= 0) & (cy < h) & (cx >= 0) & (cx < w))
        index = (np.clip(cy, 0, h - 1) * w + np.clip(cx, 0, w - 1)).astype(np.int64)
        out += np.take_along_axis(flat, index[:, :, None, :], axis=3) * weight[:, :, None, :]
    return out


@register_kernel("deformable_conv")
def _deformable_conv(spec: KernelSpec) -> Kernel:
    """The columns of every tap read at its moved place (``_bilinear_taps``), times Mask, then each
    group's product with its filters; in float64."""
    g, groups = conv_geometry(spec), spec.attrs["deformable_groups"]
    (kh, kw), (oh, ow) = g.kernel, g.out
    rows = np.arange(oh)[None, :] * g.strides[0] - g.pads[0][0] + np.arange(kh)[:, None] * g.dilations[0]
    cols = np.arange(ow)[None, :] * g.strides[1] - g.pads[1][0] + np.arange(kw)[:, None] * g.dilations[1]
    has_mask = spec.has_input("Mask")

    def run(*args: np.ndarray) -> np.ndarray:
        x, offset, w = args[0], args[1], args[-1]
        offset = offset.astype(np.float64).reshape(g.n, groups, kh, kw, 2, oh, ow)
        y = rows[None, None, :, None, :, None] + offset[:, :, :, :, 0]
        xs = cols[None, None, None, :, None, :] + offset[:, :, :, :, 1]
        taps = _bilinear_taps(x.astype(np.float64).reshape(g.n, groups, g.c // groups, g.h, g.w),
                              y.reshape(g.n, groups, -1), xs.reshape(g.n, groups, -1))
        if has_mask:
            taps *= args[2].astype(np.float64).reshape(g.n, groups, 1, -1)
        columns = taps.reshape(g.n, g.groups, g.c // g.groups * kh * kw, oh * ow)
        filters = w.astype(np.float64).reshape(g.groups, g.o // g.groups, -1)
        return np.einsum("gok,ngkp->ngop", filters, columns).reshape(g.out_shape()).astype(x.dtype)

    return run
