"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from halfway.ir.ops import attention, indexing, loss, math, nn, norm, quantize, tensor

__all__ = ["attention", "indexing", "loss", "math", "nn", "norm", "quantize", "tensor"]
