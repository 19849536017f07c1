"""GEMM launches: the plain tiled kernel (``gemm.cl``) or, for float16 buffers on NVIDIA devices of
compute capability >= 8.0, the tensor-core kernel (``gemm_mma.cl``), with the fused epilogue
(bias, residual, activation). Convolutions use the same kernels as implicit GEMMs (``ConvShape``).
Products of a few rows with large weights take a GEMV kernel (``gemv.cl``, or ``gemv_t.cl`` for
k-contiguous weights: ``uses_gemv``).

Tile sizes come from a per-device table: the largest tile that still gives every compute unit a
work-group, else the smallest (``choose_tile``); on tensor cores, of the tiles that do, the
one of least cost (``_tile_cost``: its padding past the edges, and its local-memory traffic per
multiply-add), so that ResNet-50's 64-channel layers take 64-row tiles (float16 batch 32 on the
H100: 49 -> 38 us for 3x3 ones on 56x56 maps). Split-K's work-groups do not count toward filling
it: counted everywhere, ResNet-50 at batch 1 got slower (1.27 -> 1.87 ms, a second launch per
GEMM); counted for tiles that fill half the device by themselves, ResNet-50's 1x1 layers of 1024
channels on 14x14 maps got slower (36 -> 47 us) and BERT's at batch 1 took 48 MiB of workspace; when even that leaves compute units idle and K
is long, K is split across work-groups (``split_k``). Their float32 partial sums are added up,
and the epilogue applied, by the last of a tile's work-groups to finish (``SPLITK_SERIAL``: one
launch, where the host's enqueues bound a batch-1 run), or by a second kernel after the CPU
kernel.

On tensor cores the tuner (``tuning.py``) may replace that choice of tile and split: with
``OpenCLPlace(tune=True)`` it times ``_mma_candidates`` as the program is prepared and keeps the
fastest per device and shape; without, it returns a choice measured before, if any.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ...ir.dtypes import DType
from .activations import Activation
from .base import DeviceArray, Launch, launch, source
from .runtime import Runtime, cl
from .tuning import tuner

__all__ = ["Gemm", "ConvShape", "Tile", "choose_tile", "split_k", "gemm_launch", "uses_tensor_cores", "uses_gemv",
           "k_major_gemv"]


class Gemm(NamedTuple):
    """out[b](m, n) = sum_k A[b](m, k) B[b](k, n): sizes and (batch, row, column) element strides."""

    m: int
    n: int
    k: int
    batch: int
    a: tuple[int, int, int]
    b: tuple[int, int, int]
    c: tuple[int, int, int]
    bias: tuple[int, int, int] = (0, 0, 0)


class ConvShape(NamedTuple):
    """The geometry defines of an implicit-GEMM convolution (NCHW)."""

    C: int
    H: int
    W: int
    O: int
    OG: int
    CG: int
    OH: int
    OW: int
    KH: int
    KW: int
    SH: int
    SW: int
    DH: int
    DW: int
    PT: int
    PL: int
    POOL: int = 0
    """1: the epilogue stores the 2x2 max pool of the output (NHWC on tensor cores, gemm_index.h)."""


class Tile(NamedTuple):
    """A work-group's tile: plain (tm, tn, tk, wptm, wptn) or tensor-core (warps_m, warps_n, mi, ni,
    stages of local memory); ``direct``: the CPU kernel (tm rows per work-item, tn work-items, no
    local memory); ``gemv``: a GEMV kernel (rows, columns, work-items), ``gemv_t`` on k-contiguous
    weights with ``k_major``."""

    mma: bool
    sizes: tuple[int, ...]
    direct: bool = False
    gemv: bool = False
    k_major: bool = False

    @property
    def kernel(self) -> str:
        if self.gemv:
            return "gemv_t" if self.k_major else "gemv"
        return "gemm_mma" if self.mma else "gemm_direct" if self.direct else "gemm"

    @property
    def files(self) -> tuple[str, ...]:
        if self.mma:
            return "mma.h", "gemm_index.h", "gemm_mma.cl"
        return "gemm_index.h", f"{self.kernel}.cl" if self.gemv else "gemm.cl"

    @property
    def block(self) -> tuple[int, int]:
        if self.mma:
            wm, wn, mi, ni, _ = self.sizes
            return wm * mi * 16, wn * ni * 8
        return self.sizes[0], self.sizes[1]

    @property
    def local(self) -> tuple[int, int, int]:
        if self.direct:
            return self.sizes[1], 1, 1
        if self.gemv:
            return self.sizes[2], 1, 1
        if self.mma:
            wm, wn, _, _, _ = self.sizes
            return wm * wn * 32, 1, 1
        tm, tn, _, wm, wn = self.sizes
        return tn // wn, tm // wm, 1

    def defines(self) -> dict[str, int]:
        if self.mma:
            stages = self.sizes[4]
            return {**dict(zip(("WARPS_M", "WARPS_N", "MI", "NI", "STAGES"), self.sizes)), "BK": MMA_K_SLICE,
                    "PENDING": stages - 2}
        if self.gemv:
            return dict(zip(("GEMV_ROWS", "GEMV_COLS", "GEMV_THREADS"), self.sizes))
        return dict(zip(("TSM", "TSN", "TSK", "WPTM", "WPTN"), self.sizes))


_GPU_TILES = [(128, 128, 16, 8, 8), (64, 64, 16, 4, 4), (32, 32, 16, 2, 2)]
_CPU_TILES = [(8, 32, 16, 8, 1)]  # gemm_direct: 8 rows per work-item, 32 work-items across columns
_MMA_TILES = [(2, 2, 4, 8, 3), (2, 2, 2, 8, 3), (2, 2, 4, 4, 3), (2, 2, 2, 4, 4), (2, 2, 1, 2, 4)]
MMA_TUNE_TILES = [*_MMA_TILES, (2, 2, 2, 2, 4), (2, 4, 2, 4, 3)]
"""The tensor-core tiles the tuner times: the table's, 64 x 32, and 64 x 128 of eight warps (the best
of some of VGG-19's layers at batch 1 on the H100; 32 x 64, and 128 x 64 of eight warps, never were)."""
TUNE_WAVES = (1, 1.5, 2, 3, 4)
"""A tile of fewer than 2 work-groups per compute unit splits K toward these many (the tuner's
candidates); one of more keeps K whole."""
MMA_K_SLICE = 32
"""The tensor-core kernel's k slice; its local memory holds stages x (BM + BN) x MMA_K_SLICE halves."""
SPLIT_K_MIN = 256
"""Each split of a split-K GEMM sums at least this many k."""
NARROW_ROWS = 16
"""Channels-last copies of at most this many (padded) channels take a work-item per pixel
(``transpose16_narrow``): the tiled transpose leaves most of a 64-channel tile idle on a stem's 3."""
SPLIT_K_STEP = 32
"""Split boundaries fall on multiples of every kernel's k slice."""
CONV_SPLIT_WAVES = 4
"""How many work-groups per compute unit a convolution's split K aims at (a GEMM's: 2). On the
H100, float16 on the device, A/B in one process: VGG-19 at batch 1 0.755 -> 0.727 ms, ResNet-50
1.012 -> 0.991, batch 32 unchanged (no split); 8 no better. Its partial sums are small at the batch
sizes that split (GEMMs keep 2: BERT-base's float16 memory at batch 1 rose 300 -> 410 MiB at 4)."""
GEMV_MAX_ROWS = 8
"""GEMMs of at most this many rows may take a GEMV kernel (``uses_gemv``): a decoder's projections
at batch 1 to 8, a fully-connected layer at small batches."""
GEMV_MIN_WEIGHTS = 1 << 20
"""The fewest weights (N * K) for which a GEMM of few rows takes the GEMV kernel: smaller products
take microseconds on any kernel."""
_GEMV_SHAPE = (16, 256)  # gemv.cl: 16 work-items of 16-byte loads across a row, 256 in a work-group
_GEMV_T_SHAPE = (16, 128)  # gemv_t.cl: 16 columns, 4 rows of 32 work-items (4 columns each)
GEMV_GROUPS_PER_UNIT = 2
"""A GEMV splits K while it has fewer work-groups than this per compute unit (into twice as many):
a work-group keeps 16 KiB of loads in flight (256 work-items, 4 rows of 16 bytes each), and the
H100's memory needs some 2.5 MB in flight over its 132 units (3.3 TB/s for ~0.7 us)."""
GEMV_SPLIT_MIN = 128
"""Each split of a GEMV sums at least this many k (two steps of its work-groups' loads)."""


def uses_tensor_cores(rt: Runtime, dtype: DType) -> bool:
    return rt.caps.tensor_cores and rt.storage(dtype) == np.float16


def _vector_width(rt: Runtime, dtype: DType) -> int:
    """Elements of ``dtype``'s device buffers in 16 bytes (VW in gemv.cl)."""
    return 16 // rt.storage(dtype).itemsize


def uses_gemv(rt: Runtime, dtype: DType, g: Gemm, conv: ConvShape | None = None) -> bool:
    """Whether a GEMM takes a GEMV kernel: not a convolution, at most ``GEMV_MAX_ROWS`` rows and at
    least ``GEMV_MIN_WEIGHTS`` weights B in whole 16-byte vectors along n (``gemv.cl``: N and B's
    strides multiples of 16 bytes) or along k (``gemv_t.cl``, ``k_major_gemv``). Such a product is
    a few multiply-adds per weight, bound by reading B: the tiled kernels' tiles are mostly rows
    past M, while a GEMV reads each weight once, 16 bytes a load."""
    width = _vector_width(rt, dtype)
    if conv is not None or g.m > GEMV_MAX_ROWS or g.n * g.k < GEMV_MIN_WEIGHTS:
        return False
    n_major = g.b[2] == 1 and g.n % width == 0 and g.b[0] % width == 0 and g.b[1] % width == 0
    return n_major or k_major_gemv(rt, dtype, g)


def k_major_gemv(rt: Runtime, dtype: DType, g: Gemm) -> bool:
    """Whether B is k-contiguous in whole 16-byte vectors (K and B's strides multiples of 16 bytes)."""
    width = _vector_width(rt, dtype)
    return g.b[1] == 1 and g.k % width == 0 and g.b[0] % width == 0 and g.b[2] % width == 0


def choose_tile(rt: Runtime, dtype: DType, g: Gemm, conv: ConvShape | None = None) -> Tile:
    if uses_gemv(rt, dtype, g, conv):
        if k_major_gemv(rt, dtype, g):
            return Tile(False, (g.m, *_GEMV_T_SHAPE), gemv=True, k_major=True)
        lanes, threads = _GEMV_SHAPE
        return Tile(False, (g.m, lanes * _vector_width(rt, dtype), threads), gemv=True)
    mma = uses_tensor_cores(rt, dtype)
    table = _MMA_TILES if mma else _GPU_TILES if rt.caps.is_gpu else _CPU_TILES
    tiles = [Tile(mma, sizes, direct=table is _CPU_TILES) for sizes in table]
    if not mma:
        return next((tile for tile in tiles if _work_groups(tile, g) >= rt.caps.compute_units), tiles[-1])
    filling = [tile for tile in tiles if _work_groups(tile, g) >= rt.caps.compute_units]
    return min(filling, key=lambda tile: _tile_cost(tile, g)) if filling else tiles[-1]


def _tile_cost(tile: Tile, g: Gemm) -> float:
    """The multiply-adds ``tile`` computes, the padding past M and N included, weighted by what a
    tile moves through local memory per multiply-add (``1/BM + 1/BN``)."""
    bm, bn = tile.block
    return -(-g.m // bm) * bm * -(-g.n // bn) * bn * (1 + 64 / bm + 64 / bn)


def _work_groups(tile: Tile, g: Gemm) -> int:
    bm, bn = tile.block
    return -(-g.m // bm) * -(-g.n // bn) * g.batch


def split_k(rt: Runtime, tile: Tile, g: Gemm, conv: bool = False) -> tuple[int, int]:
    """(splits, k per split): split K when the tiles leave compute units idle (a GEMV: with fewer
    than ``GEMV_GROUPS_PER_UNIT`` work-groups each) and K is long, into twice as many work-groups
    (a convolution: ``CONV_SPLIT_WAVES`` times as many)."""
    groups = _work_groups(tile, g)
    fill = rt.caps.compute_units * (GEMV_GROUPS_PER_UNIT if tile.gemv else 1)
    splits = 1
    if groups < fill:
        waves = CONV_SPLIT_WAVES if conv else 2
        splits = max(1, min(waves * fill // groups, g.k // (GEMV_SPLIT_MIN if tile.gemv else SPLIT_K_MIN)))
    return _chunked(g.k, splits)


def _chunked(k: int, splits: int) -> tuple[int, int]:
    """(splits, k per split) for about ``splits`` splits of ``k``, on ``SPLIT_K_STEP`` boundaries."""
    chunk = -(-(-(-k // splits)) // SPLIT_K_STEP) * SPLIT_K_STEP
    return -(-k // chunk), chunk


def _vector_defines(g: Gemm, conv: ConvShape | None) -> dict[str, str]:
    """VEC_A / VEC_B where an operand moves 8 float16 at a time (tensor-core and k-major GEMV kernels)."""
    defines = {}
    if g.a[2] == 1 and g.k % 8 == 0 and g.a[0] % 8 == 0 and g.a[1] % 8 == 0:
        defines["VEC_A"] = ""
    if conv is None and g.b[2] == 1 and g.n % 8 == 0 and g.b[0] % 8 == 0 and g.b[1] % 8 == 0:
        defines["VEC_B"] = ""
    return defines


def _vector_out(g: Gemm, conv: ConvShape | None) -> int:
    """How many consecutive columns the tensor-core epilogue may store at once (VEC_OUT in
    gemm_mma.cl; 0: one at a time): 8 or 2 where they are as many consecutive outputs, aligned to
    their size."""
    for width in (8, 2):
        if conv is not None and conv.OH * conv.OW % width == 0:
            return width
        if conv is None and g.c[2] == 1 and g.n % width == 0 and g.c[0] % width == 0 and g.c[1] % width == 0:
            return width
    return 0


class Subsample(NamedTuple):
    """A transpose's columns as the pixels of an ``H x W`` source plane read at ``(y * sh, x * sw)``
    for an output grid ``ow`` wide (a strided 1x1 convolution's input)."""

    ow: int
    sh: int
    sw: int
    h: int
    w: int

    def defines(self) -> dict[str, int]:
        return {"SUB_OW": self.ow, "SUB_SH": self.sh, "SUB_SW": self.sw, "SUB_ROW": self.h * self.w, "SUB_W": self.w}


def _transpose(rt: Runtime, src: DeviceArray, planes: int, rows: int, cols: int, rows_out: int,
               subsample: Subsample | None = None) -> tuple[Launch, DeviceArray]:
    """A launch that writes src's [planes][rows][cols] 16-bit elements as [planes][cols][rows_out],
    zeros past rows (with ``subsample``, the source's columns are those of its rows it picks)."""
    dst = DeviceArray(rt.alloc(2 * planes * rows_out * cols), (planes, cols, rows_out), src.dtype)
    args = (src.buffer, dst.buffer, *(np.int32(v) for v in (rows, cols, rows_out)))
    text = source("transpose16.cl", defines=subsample.defines() if subsample else None)
    if rows_out <= NARROW_ROWS:
        kernel = rt.kernel(text, "transpose16_narrow")
        return launch(rt, kernel, (cols, planes), (128, 1), *args), dst
    kernel = rt.kernel(text, "transpose16")
    gws = (-(-cols // 32) * 256, -(-rows_out // 64), planes)
    return launch(rt, kernel, gws, (256, 1, 1), *args), dst


class _Operands(NamedTuple):
    g: Gemm
    conv: ConvShape
    a: DeviceArray
    b: DeviceArray
    launches: list[Launch]


CHANNELS_LAST_MIN_MACS = 1 << 28
"""The fewest multiply-adds for which an ungrouped convolution on tensor cores reads channels-last
copies (``_channels_last``); a smaller one reads its NCHW input where it lies, saving the copy's
launch (NVIDIA's driver takes ~6 us to enqueue one, whatever the kernel). On the H100, float16 on
the device: ResNet-50 at batch 1 95 -> 58 launches, 1.18 -> 0.88 ms (batch 4 1.15 -> 1.08), VGG-19
unchanged; from 2^30 VGG-19's 3x3 layers at batch 1 read NCHW too, 0.71 -> 0.92 ms."""


def _reads_channels_last(rt: Runtime, dtype: DType, g: Gemm, conv: ConvShape, nhwc_input: bool) -> bool:
    """Whether the convolution reads channels-last operands (``_channels_last``): copies of large
    ones' NCHW input, or an NHWC input of whole 16-byte chunks of channels as it lies."""
    if conv.CG != conv.C or not uses_tensor_cores(rt, dtype):
        return False
    return conv.C % 8 == 0 if nhwc_input else g.m * g.n * g.k >= CHANNELS_LAST_MIN_MACS


def _channels_last(rt: Runtime, g: Gemm, conv: ConvShape, a: DeviceArray, b: DeviceArray,
                   filter_values: np.ndarray | None, nhwc_input: bool) -> _Operands:
    """An ungrouped convolution on tensor cores reads channels-last copies of its filter (OHWI) and
    input (NHWC), channels zero-padded to a multiple of 8, so that its implicit-GEMM operand moves 16
    bytes at a time like a plain GEMM's (k = (i * KW + j) * C + c). A constant filter is reordered
    once, here, on the host; a 1x1 filter of whole chunks of channels already is OHWI. An NHWC input
    (``nhwc_input``, channels a multiple of 8) is read where it lies. An unpadded strided 1x1
    convolution copies only the pixels it reads, and becomes one of stride 1 on them (ResNet-50's 256
    to 512 channel downsample on 56x56 maps, float16 batch 32: the copy 38 -> 27 us)."""
    padded, taps = -(-conv.C // 8) * 8, conv.KH * conv.KW
    launches: list[Launch] = []
    if filter_values is not None:
        ohwi = np.zeros((conv.O, taps, padded), a.dtype)
        ohwi[:, :, :conv.C] = filter_values.reshape(conv.O, conv.C, taps).transpose(0, 2, 1)
        a = DeviceArray(rt.upload(ohwi), ohwi.shape, a.dtype)
    elif taps > 1 or padded != conv.C:
        to_ohwi, a = _transpose(rt, a, conv.O, conv.C, taps, padded)
        launches.append(to_ohwi)
    g = g._replace(k=taps * padded, a=(conv.OG * taps * padded, taps * padded, 1))
    if nhwc_input:
        return _Operands(g, conv, a, b, launches)
    images = g.n // (conv.OH * conv.OW)
    if taps == 1 and (conv.SH, conv.SW) != (1, 1) and conv.PT == conv.PL == 0:
        subsample = Subsample(conv.OW, conv.SH, conv.SW, conv.H, conv.W)
        to_nhwc, b = _transpose(rt, b, images, conv.C, conv.OH * conv.OW, padded, subsample)
        conv = conv._replace(H=conv.OH, W=conv.OW, SH=1, SW=1)
    else:
        to_nhwc, b = _transpose(rt, b, images, conv.C, conv.H * conv.W, padded)
    return _Operands(g, conv._replace(C=padded, CG=padded), a, b, [*launches, to_nhwc])


def _workspace(rt: Runtime, queue: Any, partials: int, counters: int) -> Any:
    """A split-K GEMM's float32 partial sums, then ``counters`` int32 tile counters zeroed on ``queue``."""
    buffer = rt.alloc(4 * (partials + counters))
    if counters:
        cl.enqueue_fill_buffer(queue, buffer, np.int32(0), 4 * partials, 4 * counters)
    return buffer


class Choice(NamedTuple):
    """A GEMM's tile and split of K: ``splits`` work-groups per tile, each summing ``chunk`` k."""

    tile: Tile
    splits: int
    chunk: int


def gemm_launch(rt: Runtime, dtype: DType, g: Gemm, a: DeviceArray, b: DeviceArray, out: DeviceArray,
                act: Activation, bias: DeviceArray | None = None, residual: DeviceArray | None = None,
                conv: ConvShape | None = None, filter_values: np.ndarray | None = None,
                channels_last: bool = False) -> list[Launch]:
    """The launches of one GEMM (two with split-K on the CPU kernel: the partial products, then their
    sum and the epilogue; a convolution on tensor cores first transposes its input, and its filter unless
    ``filter_values`` holds the constant filter's values: see ``_channels_last``). ``channels_last``:
    the convolution's input, output and residual are NHWC."""
    launches: list[Launch] = []
    nhwc = conv is not None and _reads_channels_last(rt, dtype, g, conv, channels_last)
    if nhwc:
        assert conv is not None
        g, conv, a, b, launches = _channels_last(rt, g, conv, a, b, filter_values, channels_last)
    layout = Layout(nhwc, channels_last)
    product = functools.partial(_product, rt, dtype, g, a, b, out, act, bias, residual, conv, layout)
    epilogue = f"{act.expr}|bias {bias is not None}|residual {residual is not None}|{layout}"
    return [*launches, *product(_choice(rt, dtype, g, conv, epilogue, product), rt.queue)]


def _choice(rt: Runtime, dtype: DType, g: Gemm, conv: ConvShape | None, epilogue: str,
            product: Callable[[Choice, Any], list[Launch]]) -> Choice:
    """The tile and split of K: on tensor cores the tuner's (``tuning.py``: measured for this
    shape, now or before), else ``choose_tile``'s and ``split_k``'s."""
    tile = choose_tile(rt, dtype, g, conv)
    heuristic = Choice(tile, *split_k(rt, tile, g, conv is not None))
    if not tile.mma:
        return heuristic
    key = f"{_mma_source_digest()}|{dtype.name}|{tuple(g)}|{tuple(conv) if conv else None}|{epilogue}"
    candidates = [heuristic, *_mma_candidates(rt, g)]
    return tuner(rt).choose(key, candidates, _encode, product) or heuristic


def _encode(choice: Choice) -> list[Any]:
    return [list(choice.tile.sizes), choice.splits]


@functools.cache
def _mma_source_digest() -> str:
    return hashlib.sha256(source(*Tile(True, _MMA_TILES[0]).files).encode()).hexdigest()[:12]


def _mma_candidates(rt: Runtime, g: Gemm) -> list[Choice]:
    """What the tuner times on tensor cores: each of ``MMA_TUNE_TILES``, K whole where the tile
    gives every compute unit two work-groups, else split toward each of ``TUNE_WAVES``. So each tile
    is one program (split or not), as compiles bound the tuning's time (~0.4 s each on the H100)."""
    choices: list[Choice] = []
    for sizes in MMA_TUNE_TILES:
        tile = Tile(True, sizes)
        groups = _work_groups(tile, g)
        whole = groups >= 2 * rt.caps.compute_units or g.k < 2 * SPLIT_K_MIN
        for waves in (0,) if whole else TUNE_WAVES:
            splits = max(1, min(math.ceil(waves * rt.caps.compute_units / groups), g.k // SPLIT_K_MIN))
            choice = Choice(tile, *_chunked(g.k, splits))
            if choice not in choices:
                choices.append(choice)
    return choices


class Layout(NamedTuple):
    """A convolution's layouts: ``operands`` channels-last (the tensor-core kernel's filter and
    input, ``_channels_last``); ``tensors`` NHWC (its input, output and residual)."""

    operands: bool = False
    tensors: bool = False

    def defines(self) -> dict[str, str]:
        flags = (("NHWC", self.operands), ("IN_NHWC", self.tensors), ("OUT_NHWC", self.tensors))
        return {name: "" for name, on in flags if on}


def _product(rt: Runtime, dtype: DType, g: Gemm, a: DeviceArray, b: DeviceArray, out: DeviceArray,
             act: Activation, bias: DeviceArray | None, residual: DeviceArray | None, conv: ConvShape | None,
             layout: Layout, choice: Choice, queue: Any) -> list[Launch]:
    """The launches of the product itself on ``queue``."""
    tile, splits, chunk = choice
    defines: dict[str, object] = {"ACT(x)": act.expr, **tile.defines(), **layout.defines()}
    if tile.mma or tile.k_major:
        defines.update(_vector_defines(g, conv))
        width = 0 if layout.tensors else _vector_out(g, conv)
        if width:
            defines["VEC_OUT"] = width
    serial = splits > 1 and not tile.direct
    if splits > 1:
        defines["SPLITK"] = ""
    if serial:
        defines["SPLITK_SERIAL"] = ""
    if bias is not None:
        defines["HAS_BIAS"] = ""
    if residual is not None:
        defines["HAS_RES"] = ""
    if conv is not None:
        defines.update({"CONV": "", **conv._asdict()})
    text = source(*tile.files, defines=defines)
    options = rt.float_options(dtype)
    bm, bn = tile.block
    lx, ly, _ = tile.local
    gws = (-(-g.n // bn) * lx, -(-g.m // bm) * ly, g.batch * splits)
    if tile.direct:
        gws = (g.n, -(-g.m // bm), g.batch * splits)
    groups = _work_groups(tile, g)
    workspace = None
    if serial:  # tile-major partials (gemm_index.h), then a counter per tile
        workspace = _workspace(rt, queue, groups * splits * bm * bn, groups)
    elif splits > 1:
        workspace = _workspace(rt, queue, splits * g.batch * g.m * g.n, 0)
    args = [a.buffer, b.buffer, None if bias is None else bias.buffer, None if residual is None else residual.buffer,
            out.buffer, workspace, *(np.int32(v) for v in (g.m, g.n, g.k, *g.a, *g.b, *g.c, *g.bias, splits, chunk)),
            *(np.float32(p) for p in act.params)]
    kernel = rt.kernel(text, tile.kernel, options)
    launches = [launch(rt, kernel, gws, tile.local, *args, queue=queue)]
    if splits > 1 and not serial:
        reduce = rt.kernel(text, "splitk_reduce", options)
        lws = (256, 1) if rt.caps.is_gpu else None
        launches.append(launch(rt, reduce, (g.m * g.n, g.batch), lws, *args, queue=queue))
    return launches
