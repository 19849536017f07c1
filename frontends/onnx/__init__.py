"""The ONNX importer: ``load(path_or_model)`` -> ``(program, feed_names, fetch_names, scope)``."""

from halfway.frontends.onnx.context import ConversionError, UnsupportedOpError
from halfway.frontends.onnx.importer import MIN_OPSET, load, read_model
from halfway.frontends.onnx.registry import supported_ops

__all__ = ["load", "read_model", "supported_ops", "ConversionError", "UnsupportedOpError", "MIN_OPSET"]
