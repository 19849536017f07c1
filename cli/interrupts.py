"""Ctrl-C while the ``halfway`` command starts: from the entry point's first line until the
command runs, SIGINT writes one line and ends the process with exit code 130 at once, instead of
raising KeyboardInterrupt in the middle of an import (which C extensions may turn into an
ImportError with a traceback: numpy's does). Once the command runs, Ctrl-C is a
KeyboardInterrupt again, which the command line reports the same way after its own cleanup.

Only the standard library's ``os``, ``signal`` and ``sys`` are imported here.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

from .exits import EXIT_INTERRUPTED

__all__ = ["INTERRUPTED", "end_at_once_while_starting", "raise_from_now_on"]

INTERRUPTED = "halfway: error: interrupted"


def _end(signum: int, frame: FrameType | None) -> None:
    os.write(2, f"{INTERRUPTED}\n".encode())
    os._exit(EXIT_INTERRUPTED)


def end_at_once_while_starting() -> None:
    """SIGINT ends the process with one line and exit code 130 (unless SIGINT is ignored, as
    in a process started in the background)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _end)


def raise_from_now_on() -> None:
    """SIGINT raises KeyboardInterrupt again (where ``end_at_once_while_starting`` changed it)."""
    if signal.getsignal(signal.SIGINT) is _end:
        signal.signal(signal.SIGINT, signal.default_int_handler)
