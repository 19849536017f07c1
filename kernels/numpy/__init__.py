"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import indexing, loss, math, nn, norm, quantize, tensor

__all__ = ["indexing", "loss", "math", "nn", "norm", "quantize", "tensor"]
