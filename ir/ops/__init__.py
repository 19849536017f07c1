"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from . import attention, gated, image, indexing, loss, math, nn, norm, quantize, resize, tensor

__all__ = ["attention", "gated", "image", "indexing", "loss", "math", "nn", "norm", "quantize", "resize", "tensor"]
