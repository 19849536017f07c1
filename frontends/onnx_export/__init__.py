"""The ONNX exporter: ``save_onnx(path, feed_names, fetch_names, program, scope)`` writes a
program as an ONNX model; ``to_onnx`` returns the ModelProto."""

from .context import ExportError, UnsupportedExportError
from .exporter import DEFAULT_OPSET, MIN_EXPORT_OPSET, save_onnx, to_onnx
from .registry import exportable_ops

__all__ = ["save_onnx", "to_onnx", "exportable_ops", "ExportError", "UnsupportedExportError", "DEFAULT_OPSET",
           "MIN_EXPORT_OPSET"]
