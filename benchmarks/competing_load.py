"""A competing CPU load for the benchmarks' ``--under-load N``: N processes that keep a core busy
each (a loop of Python arithmetic) while both runtimes are timed, as other work on a shared
server would. A runtime whose threads wait for each other (a part handed to a thread that gets
its core late) falls behind one that hands work to whichever thread is free.

    with competing_load(1):
        ...time both runtimes...
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["add_load_option", "competing_load"]


def _spin(parent: int) -> None:
    """Busy until the benchmark that started it is gone (however it ended)."""
    x = 0
    while os.getppid() == parent:
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


@contextlib.contextmanager
def competing_load(processes: int) -> Iterator[None]:
    """``processes`` busy processes inside the block, stopped (and waited for) when it ends."""
    spawn = multiprocessing.get_context("spawn")
    started = [spawn.Process(target=_spin, args=(os.getpid(),), daemon=True) for _ in range(processes)]
    for process in started:
        process.start()
    try:
        yield
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.join()


def add_load_option(parser: Any) -> None:
    """``--under-load N`` on a benchmark's argument parser."""
    parser.add_argument("--under-load", type=int, default=0, metavar="N",
                        help="time both runtimes beside N busy processes (a competing CPU load; default none)")
