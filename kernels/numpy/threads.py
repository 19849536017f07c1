"""The numpy backend's own worker threads, for the compiled loops (``jit``) that release the GIL:
an activation, an epilogue or a depthwise convolution is cut into parts that run at once, one on
the calling thread and the others on a shared pool.

numpy's BLAS already runs its GEMMs on every core, and an ONNX Runtime session runs every op on
its intra-op threads; the memory-bound loops between GEMMs ran on one core. They now take as
many threads as the BLAS (``thread_count``). OpenBLAS's idle threads spin for a while after each
GEMM, which would take the cores these parts need: ``halfway.openblas`` shortens that spin before
numpy loads.

A part is at least ``MIN_PART`` elements: below that the hand-off (tens of microseconds) costs
more than it saves, and the loop runs whole on the calling thread. Several callers (runs of one
prepared program on several threads) share the pool; its workers run parts only, and the parts a
part makes run on its own thread, so no worker waits for another and callers cannot deadlock.

Parts that call BLAS themselves (attention's small per-head products) run inside
``single_threaded_blas``: OpenBLAS's own threads, called from two threads at once, took 50 times
as long; on one thread each, side by side, the products of BERT's 12 heads took 0.36 ms where
OpenBLAS's two threads took 0.64. It needs threadpoolctl (the ``jit`` extra) to find OpenBLAS;
without it such parts run on the calling thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["MIN_PART", "MULTIPLY_ADDS_PER_ELEMENT", "thread_count", "spans", "run_parts", "single_threaded_blas"]

MIN_PART = 1 << 17
"""The fewest elements worth handing to another thread."""

MULTIPLY_ADDS_PER_ELEMENT = 32
"""How many of a BLAS product's multiply-adds cost about as much as one element of a compiled
loop: the scale on which products (attention's, a convolution's chunks) are cut (``spans``)."""

_VARIABLES = ("HALFWAY_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


@functools.cache
def thread_count() -> int:
    """Threads for the loops: ``HALFWAY_NUM_THREADS``, else the BLAS's (``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS``), else the cores this process may use."""
    for name in _VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max(thread_count() - 1, 1), thread_name_prefix="halfway-numpy")


def spans(count: int, elements_each: int = 1, align: int = 1) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges that cut ``count`` items (of ``elements_each`` elements) into at
    most ``thread_count()`` parts of at least ``MIN_PART`` elements, starts on multiples of
    ``align``; one range where the work is too small to share."""
    parts = max(1, min(thread_count(), count * elements_each // MIN_PART, count // align))
    step = max(-(-count // parts // align) * align, 1)
    return [(start, min(start + step, count)) for start in range(0, count, step)] or [(0, count)]


_inside = threading.local()
"""``_inside.part``: this thread runs a part (parts it makes run here, in turn)."""


def run_parts(parts: Sequence[Callable[[], object]]) -> None:
    """Run ``parts``: the first here, the others on the pool, returning when all are done (the
    first error raised, after every part has ended). Inside a part (attention's softmax inside a
    head's part), they run here in turn: a worker that waited for the pool could wait for
    itself."""
    if len(parts) == 1 or getattr(_inside, "part", False):
        for part in parts:
            part()
        return
    futures: list[Future[object]] = [_pool().submit(_as_part, part) for part in parts[1:]]
    try:
        _as_part(parts[0])
    finally:
        for future in futures:
            future.exception()
    for future in futures:
        future.result()


def _as_part(part: Callable[[], object]) -> None:
    _inside.part = True
    try:
        part()
    finally:
        _inside.part = False


@functools.cache
def _openblas() -> Any | None:
    """threadpoolctl's controller of the OpenBLAS numpy loaded, or None (no threadpoolctl, or a BLAS
    that is not OpenBLAS)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    found = ThreadpoolController().select(internal_api="openblas").lib_controllers
    return found[0] if found else None


_blas_lock = threading.Lock()
_blas_users = 0
_blas_threads = 0


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[bool]:
    """OpenBLAS on one thread inside the block, its thread count restored when the last of the
    callers inside leaves; yields whether it is (False: OpenBLAS or threadpoolctl not found, and
    nothing changed)."""
    global _blas_users, _blas_threads
    blas = _openblas()
    if blas is None:
        yield False
        return
    with _blas_lock:
        if _blas_users == 0:
            _blas_threads = blas.num_threads
            blas.set_num_threads(1)
        _blas_users += 1
    try:
        yield True
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                blas.set_num_threads(_blas_threads)
