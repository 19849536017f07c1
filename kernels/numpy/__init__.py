"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from halfway.kernels.numpy import attention, image, indexing, loss, math, nn, norm, pool, quantize, resize, tensor

__all__ = ["attention", "image", "indexing", "loss", "math", "nn", "norm", "pool", "quantize", "resize", "tensor"]
