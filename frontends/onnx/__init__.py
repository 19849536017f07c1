"""The ONNX importer: ``load(path_or_model)`` -> ``(program, feed_names, fetch_names, scope)``."""

from .context import ConversionError, UnsupportedOpError
from .importer import MIN_OPSET, load, read_model
from .registry import supported_ops

__all__ = ["load", "read_model", "supported_ops", "ConversionError", "UnsupportedOpError", "MIN_OPSET"]
