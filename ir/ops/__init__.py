"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from halfway.ir.ops import indexing, loss, math, nn, norm, quantize, tensor

__all__ = ["indexing", "loss", "math", "nn", "norm", "quantize", "tensor"]
