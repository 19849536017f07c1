"""Terminal and JSON output of the command line: streams, progress, tables, pictures."""

from halfway.report.console import Output
from halfway.report.tables import error_text, human_bytes, milliseconds, percent, table

__all__ = ["Output", "table", "human_bytes", "milliseconds", "error_text", "percent"]
