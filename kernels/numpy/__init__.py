"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import image, indexing, math, nn, norm, pool, resize, tensor

__all__ = ["image", "indexing", "math", "nn", "norm", "pool", "resize", "tensor"]
