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
prepared program on several threads) share the pool; its workers run parts only, never wait for
other parts, so callers cannot deadlock.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["MIN_PART", "thread_count", "spans", "run_parts"]

MIN_PART = 1 << 15
"""The fewest elements worth handing to another thread."""

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


def run_parts(parts: Sequence[Callable[[], object]]) -> None:
    """Run ``parts``: the first here, the others on the pool, returning when all are done (the
    first error raised, after every part has ended)."""
    if len(parts) == 1:
        parts[0]()
        return
    futures: list[Future[object]] = [_pool().submit(part) for part in parts[1:]]
    try:
        parts[0]()
    finally:
        for future in futures:
            future.exception()
    for future in futures:
        future.result()
