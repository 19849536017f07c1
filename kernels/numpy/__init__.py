"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import attention, indexing, loss, math, nn, norm, quantize, tensor

__all__ = ["attention", "indexing", "loss", "math", "nn", "norm", "quantize", "tensor"]
