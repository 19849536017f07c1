"""Parameter values in float16: converted chunk by chunk on a pool of threads, counting on the way
what float16 cannot hold.

numpy converts float32 to float16 one element at a time in C (about 4 ns an element on an x86
core: its casts use no F16C), so VGG-19's 144 M weights take 0.6 s on one core. Here the same
rounding (to nearest, ties to even; bit-exact with numpy's cast, NaNs stay NaN) is done on whole
chunks with numpy's vectorised integer and float operations:

* normal range: keep the top 10 of the 23 mantissa bits, adding ``0xFFF`` plus the lowest kept
  bit (ties to even) before the shift, and move the exponent bias from 127 to 15; values that
  round past 65504 become infinity;
* below 2**-14 (float16 subnormals): ``|x| + 0.5`` in float32 rounds ``|x|`` to a multiple of
  2**-24, the subnormal step, and its low mantissa bits are the float16 bits;
* the sign bit moves from bit 31 to bit 15.

That is 1.3-1.5x faster on one core, and numpy releases the GIL in each operation, so chunks dealt
round-robin to one thread per core (at most ``_MAX_THREADS``) add up; small arrays are packed
into chunks together. While a chunk is in cache, its float16 bits are counted: values that
became infinite, zero or subnormal (``Losses``), per array.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from attrs import frozen

__all__ = ["Losses", "to_float16"]

CHUNK = 1 << 18
"""Elements per chunk: enough work per numpy call to hide its overhead, small enough for L2/L3."""

_MAX_THREADS = 8
"""More threads than this gain nothing: the conversion then waits on memory."""

_U32 = np.uint32
_ROUND = _U32((0xFFF - (112 << 23)) % 2**32)  # rounding bias minus the exponent rebias (127 - 15) << 23
_SMALLEST_NORMAL = _U32(113 << 23)  # bits of 2**-14: below it float16 is subnormal or zero
_ROUNDS_TO_INF = _U32(0x477FF000)  # bits of 65520: from it on float16 rounds to infinity
_INF = _U32(0x7F800000)
_HALF = _U32(0x3F000000)  # bits of 0.5
_F16_INF, _F16_NAN, _F16_SMALLEST_NORMAL = _U32(0x7C00), _U32(0x7E00), _U32(0x0400)


@frozen
class Losses:
    """What converting an array to float16 lost: finite values beyond float16's range (now
    infinite), nonzero values now zero, values now subnormal (fewer than 11 significant bits)."""

    to_infinity: int = 0
    to_zero: int = 0
    to_subnormal: int = 0

    def __add__(self, other: Losses) -> Losses:
        return Losses(self.to_infinity + other.to_infinity, self.to_zero + other.to_zero,
                      self.to_subnormal + other.to_subnormal)


class _Scratch:
    """One thread's chunk-sized work buffers."""

    def __init__(self) -> None:
        self.magnitude, self.half, self.temp = (np.empty(CHUNK, _U32) for _ in range(3))
        self.mask = np.empty(CHUNK, np.bool_)
        self.packed, self.packed_half = np.empty(CHUNK, np.float32), np.empty(CHUNK, np.float16)

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.magnitude[:n], self.half[:n], self.temp[:n], self.mask[:n]


def _convert_chunk(x: np.ndarray, out: np.ndarray, scratch: _Scratch, starts: Sequence[int]) -> list[Losses]:
    """float32 ``x`` into the float16 ``out`` (both 1-D, contiguous; see the module docstring);
    the losses of each segment of ``x`` beginning at ``starts`` (the first at 0)."""
    bits = x.view(_U32)
    magnitude, half, temp, mask = scratch.take(x.size)
    np.bitwise_and(bits, _U32(0x7FFFFFFF), out=magnitude)
    np.right_shift(magnitude, _U32(13), out=half)
    np.bitwise_and(half, _U32(1), out=half)
    np.add(half, magnitude, out=half)
    np.add(half, _ROUND, out=half)
    np.right_shift(half, _U32(13), out=half)
    np.minimum(half, _F16_INF, out=half)
    np.add(magnitude.view(np.float32), np.float32(0.5), out=temp.view(np.float32))
    np.subtract(temp, _HALF, out=temp)
    np.less(magnitude, _SMALLEST_NORMAL, out=mask)
    np.copyto(half, temp, where=mask)
    top = magnitude.max()
    if top > _INF:
        np.copyto(half, _F16_NAN, where=np.greater(magnitude, _INF, out=mask))
    losses = _losses(magnitude, half, mask, top, starts)
    np.right_shift(bits, _U32(16), out=temp)
    np.bitwise_and(temp, _U32(0x8000), out=temp)
    np.bitwise_or(half, temp, out=half)
    np.copyto(out.view(np.uint16), half, casting="unsafe")
    return losses


def _losses(magnitude: np.ndarray, half: np.ndarray, mask: np.ndarray, top: np.uint32,
            starts: Sequence[int]) -> list[Losses]:
    """Counted per segment from the magnitudes of the float32 values and of their float16 copies."""
    none = np.zeros(len(starts), np.int64)
    to_infinity = none
    if top >= _ROUNDS_TO_INF:
        beyond = _count(np.greater_equal(magnitude, _ROUNDS_TO_INF, out=mask), starts)
        to_infinity = beyond - _count(np.greater_equal(magnitude, _INF, out=mask), starts)
    small = _count(np.less(half, _F16_SMALLEST_NORMAL, out=mask), starts)
    zero = _count(np.equal(half, 0, out=mask), starts) if small.any() else none
    exact_zero = _count(np.equal(magnitude, 0, out=mask), starts) if zero.any() else none
    return [Losses(*map(int, counts)) for counts in zip(to_infinity, zero - exact_zero, small - zero)]


def _count(mask: np.ndarray, starts: Sequence[int]) -> np.ndarray:
    """How many elements of each segment of ``mask`` are set."""
    if len(starts) == 1:
        return np.array([np.count_nonzero(mask)])
    return np.diff(np.searchsorted(np.flatnonzero(mask), [*starts, mask.size]))


def _threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, _MAX_THREADS))


def _packs(sizes: Sequence[int]) -> list[list[int]]:
    """The arrays of at most ``CHUNK`` elements, in groups of at most ``CHUNK`` elements."""
    packs: list[list[int]] = []
    filled = CHUNK
    for i, size in enumerate(sizes):
        if 0 < size <= CHUNK:
            if filled + size > CHUNK:
                packs.append([])
                filled = 0
            packs[-1].append(i)
            filled += size
    return packs


def to_float16(values: Sequence[np.ndarray]) -> list[tuple[np.ndarray, Losses]]:
    """Each of the float32 ``values`` as a new float16 array, with what it lost.

    Arrays larger than a chunk are converted chunk by chunk in place; smaller ones are packed
    together into chunks, so that every numpy call does a chunk's worth of work.
    """
    sources = [np.ascontiguousarray(v, np.float32).reshape(-1) for v in values]
    outs = [np.empty(v.shape, np.float16) for v in values]
    flat_outs = [out.reshape(-1) for out in outs]
    Task = Callable[[_Scratch], list[tuple[int, Losses]]]

    def part(i: int, chunk: slice) -> Task:
        return lambda scratch: [(i, _convert_chunk(sources[i][chunk], flat_outs[i][chunk], scratch, [0])[0])]

    def pack(members: list[int]) -> Task:
        ends = np.cumsum([sources[i].size for i in members]).tolist()
        starts = [0] + ends[:-1]

        def convert(scratch: _Scratch) -> list[tuple[int, Losses]]:
            packed, half = scratch.packed[:ends[-1]], scratch.packed_half[:ends[-1]]
            np.concatenate([sources[i] for i in members], out=packed)
            losses = _convert_chunk(packed, half, scratch, starts)
            for i, start, end in zip(members, starts, ends):
                flat_outs[i][:] = half[start:end]
            return list(zip(members, losses))

        return convert

    tasks = [pack(members) for members in _packs([s.size for s in sources])]
    tasks += [part(i, slice(lo, lo + CHUNK)) for i, src in enumerate(sources) if src.size > CHUNK
              for lo in range(0, src.size, CHUNK)]
    threads = max(1, min(_threads(), len(tasks)))

    def run(share: list[Task]) -> list[tuple[int, Losses]]:
        scratch = _Scratch()
        with np.errstate(invalid="ignore"):  # signalling NaNs in |x| + 0.5
            return [pair for task in share for pair in task(scratch)]

    if threads == 1:
        done = run(tasks)
    else:
        with ThreadPoolExecutor(threads) as pool:
            done = [pair for part in pool.map(run, [tasks[k::threads] for k in range(threads)]) for pair in part]
    losses = [Losses() for _ in values]
    for i, counted in done:
        losses[i] += counted
    return list(zip(outs, losses))
