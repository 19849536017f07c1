"""Compiled single-pass loops for the numpy backend's memory-bound epilogues, its depthwise
convolutions and 3x3 pooling (``jit_windows``) and its activations, through numba when it is
installed (``pip install 'halfway[jit]'``); without it the kernels keep their numpy
passes.

numpy spends one pass over memory per operation: a conv epilogue ``act(conv + bias + residual)``
costs three (four with a crop), each a read and a write of the whole output. The loops here do it
in one pass that reads each input once (4-5x faster on ResNet-50's outputs, two cores). Large
ones are cut into parts that run on the numpy backend's threads (``threads``: by images, else by
channels or rows), not on numba's, whose workers would be a second pool competing with
OpenBLAS's.

The activations are the unary family rows', their expressions rendered for the loops
(``jit_source``, ``jit_act``): every row with at most three float attrs, each compiled into a
loop the first time the loop meets it. The epilogues' results are numpy's bit for bit where the
row's math is arithmetic: the same float32 operations in the same order (``(source + bias) +
residual``, then the activation; no fast-math reassociation), NaN kept.
``JIT`` is False where numba is missing or ``HALFWAY_JIT=0`` turns the loops off. numba
compiles a loop the first time it runs with new argument types and keeps it in its cache; where
the cache is empty, the first load says so in one line on stderr (a logging warning), as the
first run then takes minutes (``halfway warmup`` compiles ahead).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...ir.ops.families import UNARY
from ...ir.ops.numpy_render import one_pass
from .jit_source import activation_key, activation_source, marker, vectorises
from .threads import MULTIPLY_ADDS_PER_ELEMENT, run_parts, spans, thread_count

__all__ = ["JIT", "cache_dir", "cache_location", "cache_is_warm", "spin_loops", "pointwise_machine", "CompiledActivation", "compiled_activation", "compiled_epilogue", "compiled_depthwise",
           "dense_filter", "compiled_dense", "packed_weight", "compiled_product", "compiled_pool", "compiled_unary", "compiled_layer_norm", "compiled_rms_norm",
           "compiled_softmax"]

log = logging.getLogger("halfway.kernels")

class _Loops(NamedTuple):
    spin: Any
    channels_mid: Any
    channels_last: Any
    depthwise: Any
    depthwise_small: Any
    layout: Any
    fill: Any
    dense: Any
    pack: Any
    product: Any
    pool3x3: Any
    elementwise: Any
    layer_norm: Any
    rms_norm: Any
    softmax: Any


class CompiledActivation(NamedTuple):
    """An activation as the compiled loops take it: its marker (``jit_source.marker``: a dtype of one
    field named for the row and its choices, ``jit_source.activation_key``) and the attrs it
    computes with as float32 a0..a2."""

    act: np.dtype
    a0: np.float32
    a1: np.float32
    a2: np.float32


JIT = os.environ.get("HALFWAY_JIT", "1") != "0" and importlib.util.find_spec("numba") is not None
"""Whether the compiled loops are used; numba itself is imported (and the loops loaded from its
cache, or compiled) at the first epilogue that runs them, not with halfway."""


@functools.cache
def _loops() -> _Loops | None:
    """The compiled loops, or None where numba does not import (a release too old for this
    numpy, say): the epilogues then run as numpy passes. numba caches them in ``cache_dir()``
    unless ``NUMBA_CACHE_DIR`` says where."""
    try:
        from numba.core import config

        if not os.environ.get("NUMBA_CACHE_DIR"):
            config.CACHE_DIR = os.fspath(cache_dir())
        if not cache_is_warm(Path(config.CACHE_DIR)):
            log.warning("halfway: compiling the CPU loops with numba, once (minutes on a small machine); cached in "
                        "%s; `halfway warmup` builds the cache ahead", config.CACHE_DIR)
        from . import jit_act, jit_direct, jit_epilogue, jit_gemm, jit_rows, jit_spin, jit_windows
    except ImportError as e:
        log.warning("numba does not import (%s); epilogues run as numpy passes", e)
        return None
    return _Loops(jit_spin, jit_epilogue.channels_mid, jit_epilogue.channels_last, jit_windows.depthwise,
                  jit_windows.depthwise_small, jit_direct.layout, jit_direct.fill, jit_direct.dense, jit_gemm.pack, jit_gemm.product, jit_windows.pool3x3, jit_act.elementwise, jit_rows.layer_norm, jit_rows.rms_norm,
                  jit_rows.softmax)


def spin_loops() -> Any | None:
    """``jit_spin``'s waits for the thread team, or None where the compiled loops are off or
    numba does not import."""
    loops = _loops() if JIT else None
    return None if loops is None else loops.spin


def pointwise_machine() -> Any | None:
    """``jit_pointwise`` (the register machine that runs chains of pointwise ops), or None where
    the compiled loops are off or numba does not import."""
    if not JIT or _loops() is None:
        return None
    from . import jit_pointwise

    return jit_pointwise


def cache_is_warm(folder: Path) -> bool:
    """Whether numba's cache ``folder`` holds compiled loops (an index file, ``*.nbi``)."""
    return folder.is_dir() and next(folder.rglob("*.nbi"), None) is not None


def cache_location() -> Path:
    """The folder numba caches the loops in: ``NUMBA_CACHE_DIR``, else ``cache_dir()``."""
    return Path(os.environ.get("NUMBA_CACHE_DIR") or cache_dir())


def cache_dir() -> Path:
    """Where numba keeps the compiled loops: ``$XDG_CACHE_HOME/halfway/numba/<digest>`` (by
    default under ``~/.cache``), the digest that of the loops' sources (``_sources_digest``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "halfway" / "numba" / _sources_digest()


@functools.cache
def _sources_digest() -> str:
    """A digest of every ``jit_*.py`` module and of the activations' source (``jit_source``, from
    the family rows): numba checks a cached loop against its own file only, not the files of the
    functions it inlines, so a loop of ``jit_windows`` cached before a row's math changed would
    compute the old math."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("jit_*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(activation_source().encode())
    return digest.hexdigest()[:16]


def compiled_activation(op_type: str, attrs: Mapping[str, Any]) -> CompiledActivation | None:
    """Activation ``op_type`` ("" for none) with ``attrs`` for the compiled loops, or None where
    numba is missing or the row has no function there (``jit_source.activation_key``)."""
    rendered = activation_key(op_type, attrs) if JIT else None
    if rendered is None:
        return None
    values = [np.float32(attrs[name]) for name in rendered.params]
    a0, a1, a2 = values + [np.float32(0.0)] * (3 - len(values))
    return CompiledActivation(marker(rendered.key), a0, a1, a2)


def compiled_epilogue(act: CompiledActivation, channels_last: bool, out: np.ndarray, source: np.ndarray | None,
                      bias: np.ndarray | None, residual: np.ndarray | None) -> bool:
    """``out = act(source + bias[C] + residual)`` in one compiled pass (``source`` None: ``out``'s
    own values), where the arrays suit the loops: float32; channels on axis 1 of 4-D arrays, or
    (``channels_last``) the last axis of contiguous ones. Returns False, having done nothing,
    where they do not."""
    arrays = [a for a in (out, source, bias, residual) if a is not None]
    if any(a.dtype != np.float32 for a in arrays) or (residual is not None and residual.shape != out.shape):
        return False
    loops = _loops()
    if loops is None:
        return False
    flat_bias = None if bias is None else bias.reshape(-1)
    if not channels_last:
        if out.ndim != 4:
            return False
        if all(a.flags.c_contiguous for a in arrays):  # each channel's plane as one row: the loops' rows are long
            n, c, h, w = out.shape
            out, source, residual = (None if a is None else a.reshape(n, c, 1, h * w) for a in (out, source, residual))
        run_parts([functools.partial(loops.channels_mid, out[i], _part(source, i), _part(flat_bias, i[1:]),
                                     _part(residual, i), *act) for i in _nchw_parts(out.shape)])
        return True
    if not all(a.flags.c_contiguous for a in arrays):
        return False
    width = out.shape[-1]
    out, source, residual = (None if a is None else a.reshape(-1, width) for a in (out, source, residual))
    assert out is not None
    run_parts([functools.partial(loops.channels_last, out[a:b], _part(source, (slice(a, b),)), flat_bias,
                                 _part(residual, (slice(a, b),)), *act) for a, b in spans(len(out), width)])
    return True


SMALL_MAP = 64
"""The largest output map (pixels) the depthwise conv computes with channels as vector lanes
(``jit_windows.depthwise_small``): 2x faster than plane by plane on 7x7 maps, 1.3x slower on 14x14."""


def _part(array: np.ndarray | None, index: tuple[slice, ...]) -> np.ndarray | None:
    return None if array is None else array[index]


def _nchw_parts(shape: tuple[int, ...], unit: int = 1, taps: int = 1) -> list[tuple[slice, slice]]:
    """How to cut an ``[N, C, H, W]`` loop for the threads (``threads.spans``): by images where
    there are several, else by blocks of ``unit`` channels; each part a C-contiguous block of a
    C-contiguous array, which the loops are compiled for. A window loop reads ``taps`` inputs
    per output: its work is counted in those (a 5x5 depthwise conv on MobileNetV3's [960, 7, 7]
    map takes 0.2 ms on one thread, though its output is below ``MIN_PART``)."""
    n, c, h, w = shape
    if n > 1:
        return [(slice(a, b), slice(None)) for a, b in spans(n, c * h * w * taps)]
    return [(slice(None), slice(a, b)) for a, b in spans(c, h * w * taps, unit)]


def compiled_depthwise(act: CompiledActivation, pads: tuple[int, int], strides: tuple[int, int],
                       dilations: tuple[int, int], out: np.ndarray, x: np.ndarray, w: np.ndarray,
                       bias: np.ndarray | None, residual: np.ndarray | None) -> bool:
    """``out = act(depthwise(x, w) + bias[O] + residual)`` in one compiled loop
    (``jit_windows``; ``depthwise_small`` for outputs of at most ``SMALL_MAP`` pixels), NCHW, any
    window; ``pads`` are the top and left ones (the output's size implies the others). Returns False, having done nothing, where the arrays do not suit it:
    float32 only, ``x`` and ``out`` C-contiguous, ``w`` ``[O, 1, KH, KW]``."""
    arrays = [a for a in (out, x, w, bias, residual) if a is not None]
    if (any(a.dtype != np.float32 for a in arrays) or not (x.flags.c_contiguous and out.flags.c_contiguous)
            or w.ndim != 4 or w.shape[1] != 1
            or (residual is not None and residual.shape != out.shape)):
        return False
    loops = _loops()
    if loops is None:
        return False
    flat_bias, w = None if bias is None else bias.reshape(-1), np.ascontiguousarray(w)
    mult = w.shape[0] // x.shape[1]
    small = mult == 1 and out.shape[2] * out.shape[3] <= SMALL_MAP
    loop = loops.depthwise_small if small else loops.depthwise

    def part(images: slice, outs: slice) -> Callable[[], object]:
        ins = outs if outs.stop is None else slice(outs.start // mult, outs.stop // mult)
        return functools.partial(loop, out[images, outs], x[images, ins], w[outs],
                                 _part(flat_bias, (outs,)), _part(residual, (images, outs)), *pads, *strides,
                                 *dilations, *act)

    run_parts([part(*i) for i in _nchw_parts(out.shape, mult, w.shape[2] * w.shape[3])])
    return True


def dense_filter(w: np.ndarray) -> np.ndarray:
    """``w[O, C, KH, KW]`` as ``compiled_dense`` takes it: ``[G, C * KH * KW, OUTS]`` float32, the
    filters of output channels ``g * OUTS:(g + 1) * OUTS`` side by side (``jit_tiles.OUTS``), the
    last group filled up with zero filters."""
    from .jit_tiles import OUTS

    o, c, kh, kw = w.shape
    groups = -(-o // OUTS)
    padded = np.zeros((groups * OUTS, c * kh * kw), np.float32)
    padded[:o] = w.reshape(o, -1)
    return np.ascontiguousarray(padded.reshape(groups, OUTS, -1).transpose(0, 2, 1))


def compiled_dense(act: CompiledActivation, kernel: tuple[int, int], pads: tuple[int, int], strides: tuple[int, int],
                   dilations: tuple[int, int], out: np.ndarray, x: np.ndarray, w: np.ndarray,
                   bias: np.ndarray | None, residual: np.ndarray | None) -> bool:
    """``out = act(conv(x, w) + bias[O] + residual)``, one group, NCHW, in compiled loops
    (``jit_direct``): the input copied into its stride phases by channels, then the output
    computed by rows (one image) or images; ``w`` is ``dense_filter``'s, ``pads`` the top and
    left ones. Returns False, having done nothing, where the arrays do not suit the loops:
    float32 only, ``x`` and ``out`` C-contiguous."""
    arrays = [a for a in (out, x, bias, residual) if a is not None]
    if (any(a.dtype != np.float32 for a in arrays) or not (x.flags.c_contiguous and out.flags.c_contiguous)
            or (residual is not None and residual.shape != out.shape)):
        return False
    loops = _loops()
    if loops is None:
        return False
    n, o, oh, ow = out.shape
    planes, wq, offs = _dense_planes(loops, x, (oh, ow), kernel, pads, strides, dilations)
    flat_bias = None if bias is None else bias.reshape(-1)
    groups = w.shape[0]
    macs = groups * w.shape[2] * ow * x.shape[1] * kernel[0] * kernel[1] // MULTIPLY_ADDS_PER_ELEMENT  # per row
    if n > 1:
        parts = [(slice(a, b), 0, oh, 0, groups) for a, b in spans(n, oh * macs)]
    elif oh * ow >= ROW_PARTS_PIXELS * thread_count():
        parts = [(slice(None), a, b, 0, groups) for a, b in spans(oh, macs)]
    else:
        parts = [(slice(None), 0, oh, a, b) for a, b in spans(groups, oh * macs // groups)]
    run_parts([functools.partial(loops.dense, out[images], planes[images], offs, wq, w, flat_bias,
                                 _part(residual, (images,)), *part, strides[0] * strides[1], *act)
               for images, *part in parts])
    return True


ROW_PARTS_PIXELS = 1024
"""The direct convolution of an image is cut among the threads by rows where its output has this
many pixels a thread, else by output channels: on 7x7 to 28x28 maps (512 -> 512 layers on 7x7: 1.33x
as fast as im2col with the cut) each thread then reads half of the filter, not all of it for half
of the few rows."""


def _dense_planes(loops: _Loops, x: np.ndarray, out: tuple[int, int], kernel: tuple[int, int], pads: tuple[int, int],
                  strides: tuple[int, int], dilations: tuple[int, int]) -> tuple[np.ndarray, int, np.ndarray]:
    """The planes ``jit_direct.dense`` reads ``x`` from (its stride phases, ``jit_direct.fill``,
    by channels on the threads), their width, and where each channel's taps start in an image's
    planes."""
    (oh, ow), (kh, kw), (sh, sw), (dh, dw) = out, kernel, strides, dilations
    n, c, h, w = x.shape
    wq, length, starts, firsts, offsets, counts, base = loops.layout(x, oh, ow, *pads, sh, sw, kh, kw, dh, dw)
    planes = np.zeros((n, c, length), np.float32)
    channels, each = planes.reshape(-1, 1, length), x.reshape(-1, 1, h, w)  # every image's channels in a row
    run_parts([functools.partial(loops.fill, channels[a:b], each[a:b], starts, firsts, offsets, counts, sw)
               for a, b in spans(len(each), h * w)])
    return planes, wq, (np.arange(c, dtype=np.int64)[:, None] * length + base).reshape(-1)


def packed_weight(b: np.ndarray) -> np.ndarray | None:
    """A linear layer's constant weight ``b[K, N]`` packed for ``compiled_product`` (``jit_gemm``),
    or None where the loops are off or ``b`` is not a float32 matrix."""
    loops = _loops() if JIT else None
    if loops is None or b.dtype != np.float32 or b.ndim != 2:
        return None
    return loops.pack(np.ascontiguousarray(b))


PANELS_A_PART = 4
"""A product by packed weights is cut among the threads by panels of columns where there are this
many a thread (each part reads its panels, and all of ``a``), else by blocks of rows: ConvNeXt's
MLP of 3,136 rows by 96 columns, three panels, ran 0.83x OpenBLAS's time cut 2:1 by panels."""


def compiled_product(a: np.ndarray, panels: np.ndarray, n: int) -> np.ndarray | None:
    """``a @ b`` for ``b[K, N]`` packed as ``panels`` (``packed_weight``), its panels cut among
    the threads; None, having done nothing, where ``a`` does not suit the loop (a C-contiguous
    float32 matrix of K columns)."""
    loops = _loops()
    if loops is None or a.dtype != np.float32 or a.ndim != 2 or not a.flags.c_contiguous or a.shape[1] != panels.shape[1]:
        return None
    from .jit_tiles import OUTS

    m = a.shape[0]
    out = np.empty((m, n), np.float32)
    count, width = panels.shape[0], panels.shape[2]
    if count >= PANELS_A_PART * thread_count():
        parts = [(0, m, q0, q1) for q0, q1 in spans(count, a.size * width // MULTIPLY_ADDS_PER_ELEMENT)]
    else:  # few panels: every part reads them all, for its rows
        rows = spans(m, a.shape[1] * count * width // MULTIPLY_ADDS_PER_ELEMENT, align=OUTS)
        parts = [(r0, r1, 0, count) for r0, r1 in rows]
    run_parts([functools.partial(loops.product, out, a, panels, *part) for part in parts])
    return out


def compiled_pool(kernel: tuple[int, int], pads: tuple[int, int], strides: tuple[int, int], scale: np.ndarray | None,
                  out: np.ndarray, x: np.ndarray) -> bool:
    """3x3 pooling of ``x`` into ``out`` in one compiled loop (``jit_windows``), NCHW: max, or
    with ``scale`` (the ``[OH, OW]`` reciprocal counts) average; ``pads`` are the top and left
    ones. Returns False, having done nothing, for other windows, where numba does not import, or
    where ``x`` is not C-contiguous float32."""
    if kernel != (3, 3) or x.dtype != np.float32 or not x.flags.c_contiguous:
        return False
    loops = _loops()
    if loops is None:
        return False
    run_parts([functools.partial(loops.pool3x3, out[i], x[i], *pads, *strides, scale)
               for i in _nchw_parts(out.shape, taps=9)])
    return True


def compiled_unary(op_type: str, attrs: Mapping[str, Any]) -> Callable[[np.ndarray, np.ndarray], bool] | None:
    """For a unary row with ``attrs`` whose loop beats numpy's passes, a ``run(out, x)``
    computing it in one compiled pass (``jit_act.elementwise``) that returns False, having done
    nothing, where the arrays do not suit the loop (float32, C-contiguous); None where numba is
    missing or numpy is as fast: the row's function has calls (exp, tanh...: no vector lanes) or
    numpy computes the row in one ufunc pass (relu, sqrt)."""
    row = UNARY.get(op_type)
    act = compiled_activation(op_type, attrs) if row is not None and not one_pass(row.expr) else None
    rendered = activation_key(op_type, attrs) if act is not None else None
    if act is None or rendered is None or not vectorises(rendered):
        return None

    def run(out: np.ndarray, x: np.ndarray) -> bool:
        if x.dtype != np.float32 or out.dtype != np.float32 or not (x.flags.c_contiguous and out.flags.c_contiguous):
            return False
        loops = _loops()
        if loops is None:
            return False
        flat, source = out.reshape(-1), None if x is out else x.reshape(-1)
        run_parts([functools.partial(loops.elementwise, flat[a:b], _part(source, (slice(a, b),)), *act)
                   for a, b in spans(flat.size, align=64)])
        return True

    return run


def _rows_of(arrays: list[np.ndarray | None], width: int) -> list[np.ndarray | None] | None:
    """Every array (None kept) as C-contiguous float32 rows of ``width``, or None where one is not."""
    present = [a for a in arrays if a is not None]
    if not JIT or width == 0 or any(a.dtype != np.float32 or not a.flags.c_contiguous or a.size % width
                                    for a in present):
        return None
    return [None if a is None else a.reshape(-1, width) for a in arrays]


def compiled_layer_norm(out: np.ndarray, x: np.ndarray, residual: np.ndarray | None, total: np.ndarray | None,
                        scale: np.ndarray | None, bias: np.ndarray | None, epsilon: float, width: int,
                        means: np.ndarray | None = None, variances: np.ndarray | None = None) -> bool:
    """``out = layer_norm(x + residual) * scale + bias`` over rows of ``width`` (the sum into
    ``total``, each row's statistics into ``means`` and ``variances``) in one compiled pass per
    row (``jit_rows``), the rows shared among the threads. Returns False, having done nothing,
    where numba is missing or the arrays are not C-contiguous float32, ``residual`` and ``total``
    of ``x``'s shape, ``scale`` and ``bias`` of ``width``, ``means`` and ``variances`` of a value
    per row."""
    rows = _rows_of([out, x, residual, total, scale, bias], width)
    loops = None if rows is None else _loops()
    stats = [a for a in (means, variances) if a is not None]
    if (loops is None or rows is None or any(a is not None and a.shape != x.shape for a in (residual, total))
            or any(a is not None and a.size != width for a in (scale, bias))
            or any(a.dtype != np.float32 or not a.flags.c_contiguous or a.size * width != x.size for a in stats)):
        return False
    out2, x2, residual2, total2, scale2, bias2 = rows
    assert out2 is not None and x2 is not None
    flat_scale, flat_bias, flat_means, flat_variances = (
        None if a is None else a.reshape(-1) for a in (scale2, bias2, means, variances))
    run_parts([functools.partial(loops.layer_norm, out2[a:b], x2[a:b], _part(residual2, (slice(a, b),)),
                                 _part(total2, (slice(a, b),)), flat_scale, flat_bias, epsilon,
                                 _part(flat_means, (slice(a, b),)), _part(flat_variances, (slice(a, b),)))
               for a, b in spans(len(x2), width)])
    return True


def compiled_rms_norm(out: np.ndarray, x: np.ndarray, scale: np.ndarray | None, epsilon: float, width: int) -> bool:
    """``out = x / sqrt(mean(x^2) + epsilon) * scale`` over rows of ``width`` in one compiled pass
    per row (``jit_rows``), the rows shared among the threads. Returns False, having done nothing,
    where numba is missing or the arrays are not C-contiguous float32 or ``scale`` not of
    ``width``."""
    rows = _rows_of([out, x, scale], width)
    loops = None if rows is None else _loops()
    if loops is None or rows is None or out.shape != x.shape or (scale is not None and scale.size != width):
        return False
    out2, x2, _ = rows
    assert out2 is not None and x2 is not None
    flat_scale = None if scale is None else scale.reshape(-1)
    run_parts([functools.partial(loops.rms_norm, out2[a:b], x2[a:b], flat_scale, epsilon)
               for a, b in spans(len(x2), width)])
    return True


def compiled_softmax(out: np.ndarray, x: np.ndarray) -> bool:
    """Softmax over the last axis of ``x`` into ``out`` (``x`` itself works in place) in one
    compiled pass per row (``jit_rows``), the rows shared among the threads. Returns False,
    having done nothing, where numba is missing or the arrays are not C-contiguous float32."""
    rows = _rows_of([out, x], x.shape[-1] if x.ndim else 0)
    loops = None if rows is None else _loops()
    if loops is None or rows is None or out.shape != x.shape:
        return False
    out2, x2 = rows
    assert out2 is not None
    source = None if x is out else x2
    run_parts([functools.partial(loops.softmax, out2[a:b], _part(source, (slice(a, b),)))
               for a, b in spans(len(out2), x.shape[-1])])
    return True
