"""numpy kernel of swiglu (``halfway.ir.ops.gated``): silu(X) in one pass through the compiled
loop of ``jit.compiled_unary`` where numba is there (the silu family row's numpy math where it is
not, or the arrays do not suit the loop), then times Y in place. float16 runs widened to float32
(the registry's default)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.families import UNARY
from ..registry import Kernel, KernelSpec, register_kernel
from .jit import compiled_unary

__all__ = ["swiglu"]


@functools.cache
def _silu() -> Callable[[np.ndarray, np.ndarray], bool] | None:
    """silu's compiled loop, looked up once: finding it renders the row's expression, which cost
    a decode step's dozen swiglus more than their arithmetic."""
    return compiled_unary("silu", {})


def swiglu(out: np.ndarray, gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``out`` = silu(gate) * up (``out`` may be ``gate``); fc's gated epilogue computes it too."""
    loop = _silu()
    if loop is None or not loop(out, gate):
        UNARY["silu"].numpy(gate, out=out)
    return np.multiply(out, up, out=out)


@register_kernel("swiglu", dtypes=(DType.float32, DType.float16, DType.float64))
def _swiglu(spec: KernelSpec) -> Kernel:
    inplace = spec.inplace
    return lambda x, y: swiglu(x if inplace else np.empty_like(x), x, y)
