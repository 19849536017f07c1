"""The ``halfway`` command's exit codes. This module imports nothing, so the entry point
(``halfway.cli.entry``) reads them before anything loads."""

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_DIFFERENT", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_DIFFERENT = 3
EXIT_INTERRUPTED = 130
"""An interrupted command (128 + SIGINT, as shells report it)."""
EXIT_BROKEN_PIPE = 141
