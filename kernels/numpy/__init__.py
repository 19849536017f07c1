"""numpy kernels, one module per op family (as ``halfway.ir.ops``)."""

from . import (
    attention,
    conv,
    detection,
    gated,
    image,
    indexing,
    loss,
    math,
    matmul,
    ngram,
    norm,
    pool,
    quantize,
    resize,
    signal,
    tensor,
)

__all__ = ["attention", "conv", "detection", "gated", "image", "indexing", "loss", "math", "matmul", "ngram", "norm",
           "pool", "quantize", "resize", "signal", "tensor"]
