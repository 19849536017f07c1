"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from halfway.ir.ops import image, indexing, math, nn, norm, resize, tensor

__all__ = ["image", "indexing", "math", "nn", "norm", "resize", "tensor"]
