"""The numpy backend's own worker threads, for the compiled loops (``jit``) that release the GIL
and the products it cuts (``products``): a loop is cut into parts that run at once, one on the
calling thread and the others on the team.

numpy's BLAS already runs its GEMMs on every core, and an ONNX Runtime session runs every op on
its intra-op threads; the memory-bound loops between GEMMs ran on one core. They now take as
many threads as the BLAS (``thread_count``). OpenBLAS's idle threads spin for a while after each
GEMM, which would take the cores these parts need: ``halfway.api.openblas`` shortens that spin before
numpy loads.

The team's workers poll for parts, yielding the core between polls, for a few milliseconds after
their last part, then sleep (``_Team``). Handing parts to threads that sleep cost 45 us on this
project's 2-core virtual machine (the wake-up of a sleeping core), more than many loops take;
polled, two parts of 4.5 us each take 16 us where they took 51, and MobileNetV3 runs 15% faster.
Each part goes to whichever thread is free first (``_Job``), the caller included: on a machine
whose other work keeps a worker off its core, the caller takes that worker's parts rather than
wait for it. Without numba the parts go to a thread pool. A part is at least ``MIN_PART`` elements: below
that the hand-off costs more than it saves, and the loop runs whole on the calling thread. One
caller at a time uses the team (runs of one prepared program on several threads run their parts
in turn, as do the parts a part makes), so no worker waits for another and callers cannot
deadlock.

Parts that call BLAS themselves (attention's small per-head products, the blocks of a cut
product) run inside ``single_threaded_blas``: OpenBLAS's own threads, called from two threads at
once, took 50 times as long; on one thread each, side by side, the products of BERT's 12 heads
took 0.36 ms where OpenBLAS's two threads took 0.64. It needs threadpoolctl (the ``jit`` extra)
to find OpenBLAS; without it such parts run on the calling thread.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["MIN_PART", "MULTIPLY_ADDS_PER_ELEMENT", "thread_count", "spans", "run_parts", "team_size",
           "single_threaded_blas"]

MIN_PART = 1 << 15
"""The fewest elements worth handing to another thread (about 10 us of a compiled loop)."""

MULTIPLY_ADDS_PER_ELEMENT = 32
"""How many of a BLAS product's multiply-adds cost about as much as one element of a compiled
loop: the scale on which products (attention's, a convolution's chunks) are cut (``spans``)."""

log = logging.getLogger("halfway.kernels")

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
    """Run ``parts``: the first here, the others on the team (or, without numba, the pool),
    returning when all are done (the first error raised, after every part has ended). Inside a
    part (attention's softmax inside a head's part), they run here in turn: a worker that waited
    for the others could wait for itself; so they do where another caller holds the team."""
    if len(parts) == 1 or getattr(_inside, "part", False):
        for part in parts:
            part()
        return
    team = _team()
    if team is not None:
        if not team.run(parts):
            _in_turn(parts)
        return
    futures: list[Future[object]] = [_pool().submit(_as_part, part) for part in parts[1:]]
    try:
        _as_part(parts[0])
    finally:
        for future in futures:
            future.exception()
    for future in futures:
        future.result()


def _in_turn(parts: Sequence[Callable[[], object]]) -> None:
    for part in parts:
        part()


POLLS = 1 << 15
"""How many times an idle worker polls for a part (``jit_spin.wait_change``, each poll a
``sched_yield``: about 5 ms in all on an idle core, longer where the core has other work) before
it sleeps: longer than the gaps between the products of an LLM's decode step (its attention, norms
and activations, up to a few milliseconds), so that each product finds the worker polling rather
than asleep."""

GRACE = 16
"""How many more times a worker yields once a part is published (a few microseconds), so that
the caller has let go of the GIL when the worker takes it."""


LATE_S = 1e-3
"""How late a polling worker may join a job (it joins in tens of microseconds) before the team
takes the machine to be crowded. A job that had to wake a sleeping worker is not judged: after an
idle spell (a prefill's last products, a pause between generations) the first wake of an idle
virtual core can take milliseconds on a machine that is not crowded at all."""

BACK_OFF_S = 0.25
"""How long a crowded team stays out of use: parts run on the caller, in turn, meanwhile. Each
hand-off between threads that share a core with other work waits for the GIL's holder to get the
core back (milliseconds), which on a crowded machine cost far more than the parts saved."""


class _Job:
    """One caller's parts, each taken by whichever thread is free first (the caller or a worker):
    a thread the machine's other work keeps off its core takes none, and leaves none waiting."""

    def __init__(self, parts: Sequence[Callable[[], object]]) -> None:
        import numpy as np

        self.parts = parts
        self._claims = itertools.count()  # next() is atomic under the GIL
        self.done = np.zeros(len(parts), np.int64)
        self.errors: list[BaseException | None] = [None] * len(parts)
        self.published = time.perf_counter()
        self.joined: float | None = None
        """When a worker first took a part (None: none did)."""

    def take(self, worker: bool = False) -> None:
        """Run parts until none is left to take."""
        while (i := next(self._claims)) < len(self.parts):
            if worker and self.joined is None:
                self.joined = time.perf_counter()
            try:
                self.parts[i]()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                self.errors[i] = e
            finally:
                self.done[i] = 1


class _Team:
    """``size`` worker threads that poll for parts (``jit_spin``), one caller at a time.

    The caller publishes a job (``_Job``) to worker ``k`` by setting ``published[k]`` to a new
    count, takes parts itself, then waits, polling too, until every part is done. A worker that
    found nothing for ``POLLS`` polls sleeps on a condition, which the caller notifies. Neither
    side waits for the GIL while the other holds it: the worker takes the GIL only ``GRACE``
    yields after a job is published, by when the caller is inside its own part (its loops and
    BLAS run without the GIL), and the caller takes it back only once each worker that took the
    job polls again (``jit_spin.wait_job``). On a busy machine a worker may get its core late: the caller (or
    another worker) has taken its parts by then, and it finds none left; a polling worker that
    joins a job more than ``LATE_S`` late keeps the team out of use for ``BACK_OFF_S``, and
    OpenBLAS on one thread (its threads, cut a product in equal shares, wait for the slowest as
    the team's did), until the first parts after that.
    """

    def __init__(self, size: int, spin: Any) -> None:
        import numpy as np

        self.size, self._spin = size, spin
        self._published, self._finished = np.zeros(size, np.int64), np.zeros(size, np.int64)
        self._taken = np.zeros(size, np.int64)
        self._jobs: list[_Job | None] = [None] * size
        self._sleeping = [False] * size
        self._wake = threading.Condition()
        self._caller = threading.Lock()
        self._crowded_until = 0.0
        self._quiet_blas: contextlib.ExitStack | None = None
        for k in range(size):
            threading.Thread(target=self._work, args=(k,), name=f"halfway-numpy-{k}", daemon=True).start()

    def run(self, parts: Sequence[Callable[[], object]]) -> bool:
        """``parts`` on this thread and the workers; False, having run nothing, where another
        caller holds the team."""
        if not self._caller.acquire(blocking=False):
            return False
        try:
            if self._crowded():
                return False
            job = _Job(parts)
            workers = range(min(self.size, len(parts) - 1))
            woken = any(self._sleeping[k] for k in workers)
            for k in workers:
                self._jobs[k] = job
                self._published[k] += 1
                if self._sleeping[k]:
                    with self._wake:
                        self._wake.notify_all()
            try:
                _as_part(job.take)
            finally:
                self._spin.wait_job(job.done, len(workers), self._published, self._taken, self._finished)
                for k in workers:
                    self._jobs[k] = None
            if not woken and _late(job):
                self._crowd()
            error = next((e for e in job.errors if e is not None), None)
            if error is not None:
                raise error
            return True
        finally:
            self._caller.release()

    def _crowd(self) -> None:
        """Keep the team, and OpenBLAS's threads, out of use for ``BACK_OFF_S``."""
        self._crowded_until = time.perf_counter() + BACK_OFF_S
        if self._quiet_blas is None:
            self._quiet_blas = contextlib.ExitStack()
            self._quiet_blas.enter_context(single_threaded_blas())

    def _crowded(self) -> bool:
        """Whether the team is out of use; at the end of that, OpenBLAS's threads come back."""
        if time.perf_counter() < self._crowded_until:
            return True
        if self._quiet_blas is not None:
            self._quiet_blas.close()
            self._quiet_blas = None
        return False

    def _work(self, k: int) -> None:
        _inside.part = True
        seen = 0
        while True:
            value = self._spin.wait_change(self._published, k, seen, POLLS, self._finished, seen, GRACE, self._taken)
            if value == seen:
                with self._wake:
                    self._sleeping[k] = True
                    while self._published[k] == seen:
                        self._wake.wait()
                    self._sleeping[k] = False
                value = int(self._published[k])
            seen = value
            job = self._jobs[k]
            if job is not None:  # None: the caller took every part and left before this worker woke
                job.take(worker=True)


def _late(job: _Job) -> bool:
    """Whether the workers joined ``job`` later than ``LATE_S`` after it was published (or, in a
    job that lasted longer, not at all): the machine's other work holds the cores."""
    joined = job.joined if job.joined is not None else time.perf_counter()
    return joined - job.published > LATE_S


_teams: dict[int, _Team | None] = {}


def team_size() -> int:
    """The team's workers (0: no team, parts run on the pool or in turn)."""
    team = _team()
    return 0 if team is None else team.size


def _team() -> _Team | None:
    """This process's team (made at first use), or None where numba's loops are off or there is
    one thread."""
    pid = os.getpid()
    if pid not in _teams:  # a child after fork gets its own: the parent's threads are not in it
        from .jit import spin_loops

        spin = spin_loops() if thread_count() > 1 else None
        _teams.clear()
        _teams[pid] = None if spin is None or not _compiles(spin) else _Team(thread_count() - 1, spin)
    return _teams[pid]


def _compiles(spin: Any) -> bool:
    """Whether the waits compile and run here (they call the C library's ``sched_yield``)."""
    import numpy as np

    try:
        counters = np.zeros(1, np.int64)
        spin.wait_job(np.ones(1, np.int64), 1, counters, counters + 1, counters)
        return bool(spin.wait_change(counters, 0, 0, 1, counters, 0, 0, counters) == 0)
    except Exception as e:  # noqa: BLE001 - numba's errors have no common type
        log.warning("the numpy backend's threads wait on a pool instead: %s", e)
        return False


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
