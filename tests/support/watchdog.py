"""Bounding a test's call in time: ``watchdog`` interrupts the block (a blocking open or read
included) once its time has passed; ``in_child`` runs a call in a forked child, which a hang in C
code or a crash cannot take the test process down with.

    with watchdog(10):
        read_rows(path, ["x"])
    kind, detail = in_child(load, model, seconds=60)   # ("ok" | "error" | "hang" | "crash", ...)
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Expired", "watchdog", "in_child"]


class Expired(BaseException):
    """The watchdog's interrupt: no Exception, so that no handler of the code under test swallows it."""


def _expire(signum: int, frame: object) -> None:
    raise Expired("the call did not end in time")


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Raise Expired in the block once ``seconds`` have passed."""
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def in_child(fn: Callable[..., Any], *args: Any, seconds: float) -> tuple[str, str]:
    """``fn(*args)`` in a forked child: ("ok", ""), ("error", "TypeName: message") for an
    exception, ("hang", ...) past ``seconds``, or ("crash", ...) for a child that died."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            try:
                fn(*args)
                answer = "ok\n"
            except BaseException as e:
                answer = "error\n" + "".join(traceback.format_exception_only(type(e), e)).strip()
            with os.fdopen(write, "w") as f:
                f.write(answer[:4000])  # within a pipe's buffer: the child ends without a reader
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + seconds
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
            return "hang", f"no result in {seconds} s"
        time.sleep(0.02)
    with os.fdopen(read) as f:
        kind, _, detail = f.read().partition("\n")
    return (kind, detail) if kind else ("crash", "the child died without an answer")
