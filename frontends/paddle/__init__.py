"""The Paddle 3 PIR importer: ``load(path)`` -> ``(program, feed_names, fetch_names, scope)``."""

from halfway.frontends.paddle.context import PirConversionError, UnsupportedPirOpError
from halfway.frontends.paddle.importer import load, pir_files
from halfway.frontends.paddle.ops import supported_ops

__all__ = ["load", "pir_files", "supported_ops", "PirConversionError", "UnsupportedPirOpError"]
