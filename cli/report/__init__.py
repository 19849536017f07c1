"""Terminal and JSON output of the command line: streams, progress, tables, pictures."""

from .console import Output
from .tables import error_text, human_bytes, milliseconds, percent, table

__all__ = ["Output", "table", "human_bytes", "milliseconds", "error_text", "percent"]
