"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import indexing, math, nn, norm, resize, tensor

__all__ = ["indexing", "math", "nn", "norm", "resize", "tensor"]
