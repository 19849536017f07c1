"""The ``halfway`` command's entry point (the console script and ``python -m halfway``).

It is imported before anything heavy (``import halfway`` loads nothing), so Ctrl-C at any moment of the start-up, while numpy, the IR and the
commands are being imported, ends the command like an interrupt while it runs: one line on
stderr and exit code 130, no traceback.
"""

from __future__ import annotations

import sys

from .exits import EXIT_INTERRUPTED

__all__ = ["main"]


def main() -> int:
    """Run the command line (``halfway.cli.main.main``), an interrupt while importing it included."""
    try:
        from ..api.openblas import tune

        tune()  # before anything loads numpy, and with it OpenBLAS
        from .main import main as run

        return run()
    except KeyboardInterrupt:
        sys.stderr.write("halfway: error: interrupted\n")
        return EXIT_INTERRUPTED
