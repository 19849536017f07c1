"""Schemas of the built-in ops, one module per family; importing this registers them all."""

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
