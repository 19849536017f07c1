"""The ``halfway`` command's entry point (the console script and ``python -m halfway``).

It is imported before anything heavy (``import halfway`` loads nothing), and its first line
makes Ctrl-C end the start-up at once (``halfway.cli.interrupts``): while numpy, the IR and the
command are being imported, an interrupt is one line on stderr and exit code 130, no traceback.
"""

from __future__ import annotations

import sys

from .exits import EXIT_INTERRUPTED
from .interrupts import INTERRUPTED, end_at_once_while_starting

__all__ = ["main"]


def main() -> int:
    """Run the command line (``halfway.cli.main.main``)."""
    end_at_once_while_starting()
    try:
        from ..api.openblas import tune

        tune()  # before anything loads numpy, and with it OpenBLAS
        from .main import main as run

        return run()
    except KeyboardInterrupt:
        sys.stderr.write(f"{INTERRUPTED}\n")
        return EXIT_INTERRUPTED
