"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from . import attention, gated, image, indexing, loss, math, nn, norm, pool, quantize, resize, tensor

__all__ = ["attention", "gated", "image", "indexing", "loss", "math", "nn", "norm", "pool", "quantize", "resize", "tensor"]
