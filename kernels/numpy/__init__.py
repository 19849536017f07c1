"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import math, nn, tensor

__all__ = ["math", "nn", "tensor"]
