"""Schemas of the built-in ops, one module per family; importing this registers them all."""

from halfway.ir.ops import math, nn, tensor

__all__ = ["math", "nn", "tensor"]
