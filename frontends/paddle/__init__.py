"""The Paddle 3 PIR importer: ``load(path)`` -> ``(program, feed_names, fetch_names, scope)``."""

from .context import PirConversionError, UnsupportedPirOpError
from .importer import load, pir_files
from .ops import supported_ops

__all__ = ["load", "pir_files", "supported_ops", "PirConversionError", "UnsupportedPirOpError"]
