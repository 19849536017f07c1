"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from halfway.ir.ops import attention, indexing, math, nn, norm, tensor

__all__ = ["attention", "indexing", "math", "nn", "norm", "tensor"]
