"""Kernel configurations chosen by measurement on the device, and remembered.

A kernel with several workable configurations (the tensor-core GEMM's tile and split of K) asks
``Tuner.choose`` for one by a key naming the problem. A choice measured before, in this process or
an earlier one, is returned at once; otherwise, while ``measuring`` is on (``OpenCLPlace(tune=True)``
turns it on as it prepares a program), every candidate is timed on the device and the fastest is
kept; otherwise the kernel takes its own heuristic choice (``None``). Choices live in a JSON file
per device, driver and kernel source under the user's cache folder (``HALFWAY_CACHE_DIR``
overrides it), written atomically; a file that cannot be read or written is passed over with a
warning, never an error.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import statistics
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ...ir.errors import HalfwayError
from .runtime import Runtime, cl

__all__ = ["Tuner", "tuner", "cache_folder", "TIMED_RUNS"]

C = TypeVar("C")
TIMED_RUNS = 5
"""Runs of each candidate after a first one; the median of their device times decides."""


def cache_folder() -> Path:
    """Where halfway keeps what it measured: ``HALFWAY_CACHE_DIR``, else the user's cache folder."""
    folder = os.environ.get("HALFWAY_CACHE_DIR")
    if folder:
        return Path(folder)
    try:
        import platformdirs
    except ImportError:  # pyopencl brings it; without, the usual place
        return Path.home() / ".cache" / "halfway"
    return Path(platformdirs.user_cache_dir("halfway"))


@functools.cache
def tuner(rt: Runtime) -> Tuner:
    """The tuner of ``rt``'s device (one per runtime)."""
    device = rt.device
    identity = f"{device.platform.name}|{device.name}|{device.driver_version}|{rt.precision}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Tuner(rt.context, cache_folder() / "opencl-tuning" / f"{digest}.json")


class Tuner:
    """One device's measured choices, kept in the JSON file at ``path``: one per device, driver and
    precision (``tuner``), so that a new driver measures afresh; keys name the kernel source."""

    def __init__(self, context: Any, path: Path) -> None:
        self._context = context
        self.path = path
        self._choices: dict[str, Any] | None = None
        self._queue: Any = None
        self.measuring = False

    @contextlib.contextmanager
    def measure(self, on: bool = True) -> Iterator[None]:
        """Measure missing choices inside the block (as well as outside it, if already on)."""
        before, self.measuring = self.measuring, self.measuring or on
        try:
            yield
        finally:
            self.measuring = before

    @property
    def queue(self) -> Any:
        """A profiling queue on the device, for timing candidates."""
        if self._queue is None:
            self._queue = cl.CommandQueue(self._context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        return self._queue

    def choose(self, key: str, candidates: Sequence[C], encode: Callable[[C], Any],
               launches: Callable[[C, Any], Sequence[Callable[[], Any]]]) -> C | None:
        """The candidate remembered for ``key``, else (while measuring) the one whose
        ``launches(candidate, queue)`` take least device time, else None. A candidate that fails to
        build or launch is passed over."""
        choices = self._load()
        if key in choices:
            known = next((c for c in candidates if encode(c) == choices[key]), None)
            if known is not None or not self.measuring:
                return known
        if not self.measuring:
            return None
        timed = []
        for candidate, built in self._build(candidates, launches):
            try:
                timed.append((self._time(built), candidate))
            except cl.Error:
                continue
        if not timed:
            return None
        best = min(timed, key=lambda pair: pair[0])[1]
        choices[key] = encode(best)
        self._save()
        return best

    def _build(self, candidates: Sequence[C], launches: Callable[[C, Any], Sequence[Callable[[], Any]]]
               ) -> list[tuple[C, Sequence[Callable[[], Any]]]]:
        """Each candidate with its launches, those that build; built in threads, as a driver
        compiles one program on one core (a convolution's 20-odd candidates: ~7 s one at a time
        on the H100's host)."""

        def build(candidate: C) -> tuple[C, Sequence[Callable[[], Any]]] | None:
            try:
                return candidate, launches(candidate, self.queue)
            except (HalfwayError, cl.Error):
                return None

        with ThreadPoolExecutor(max_workers=min(len(candidates), os.cpu_count() or 1)) as pool:
            return [pair for pair in pool.map(build, candidates) if pair is not None]

    def _time(self, launches: Sequence[Callable[[], Any]]) -> float:
        """Median device seconds of the launches, after a first run."""
        times = []
        for _ in range(TIMED_RUNS + 1):
            events = [enqueue() for enqueue in launches]
            self.queue.finish()
            times.append(sum(e.profile.end - e.profile.start for e in events) * 1e-9)
        return statistics.median(times[1:])

    def _load(self) -> dict[str, Any]:
        if self._choices is None:
            self._choices = {}
            if self.path.exists():
                try:
                    loaded = json.loads(self.path.read_text())
                    if not isinstance(loaded, dict):
                        raise ValueError("not a JSON object")
                    self._choices = loaded
                except (OSError, ValueError) as e:
                    warnings.warn(f"{self.path}: tuning cache not read ({e}); measuring afresh", stacklevel=3)
        return self._choices

    def _save(self) -> None:
        """Write the choices beside the file, then move them over it."""
        temp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(self._choices, f, indent=0, sort_keys=True)
            os.replace(temp, self.path)
        except OSError as e:
            if temp is not None and os.path.exists(temp):
                os.unlink(temp)
            warnings.warn(f"{self.path}: tuning cache not saved ({e})", stacklevel=3)
