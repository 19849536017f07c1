"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import attention, indexing, math, nn, norm, tensor

__all__ = ["attention", "indexing", "math", "nn", "norm", "tensor"]
