"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from halfway.ir.ops import attention, gated, image, indexing, loss, math, nn, norm, quantize, resize, tensor

__all__ = ["attention", "gated", "image", "indexing", "loss", "math", "nn", "norm", "quantize", "resize", "tensor"]
