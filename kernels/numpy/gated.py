"""numpy kernel of swiglu (``halfway.ir.ops.gated``): silu(X) in one pass through the compiled
loop of ``jit.compiled_unary`` where numba is there (the silu family row's numpy math where it is
not, or the arrays do not suit the loop), then times Y in place. float16 runs widened to float32
(the registry's default)."""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.families import UNARY
from ..registry import Kernel, KernelSpec, register_kernel
from .jit import compiled_unary

__all__: list[str] = []


@register_kernel("swiglu", dtypes=(DType.float32, DType.float16, DType.float64))
def _swiglu(spec: KernelSpec) -> Kernel:
    loop, inplace, silu = compiled_unary("silu", {}), spec.inplace, UNARY["silu"].numpy

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = x if inplace else np.empty_like(x)
        if loop is None or not loop(out, x):
            silu(x, out=out)
        return np.multiply(out, y, out=out)

    return run
