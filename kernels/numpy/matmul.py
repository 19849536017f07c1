"""numpy kernels of the matrix products (``halfway.ir.ops.matmul``): matmul_v2, mul and fc, each one
BLAS matmul; fc applies its bias, residual and activation through the convolutions' epilogue
(``conv.make_epilogue``), in place, and its gated swiglu (``gated.swiglu``) over the product's halves."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.matmul import GATED
from ..registry import Kernel, KernelSpec, register_kernel
from . import products
from .conv import make_epilogue, slot_positions  # and registers the convolutions
from .gated import swiglu

__all__: list[str] = []


@register_kernel("matmul_v2", dtypes=(DType.float32, DType.float16, DType.float64, DType.int32, DType.int64))
def matmul_v2(spec: KernelSpec) -> Kernel:
    flip_x = spec.attrs["trans_x"] and len(spec.input("X").shape) > 1
    flip_y = spec.attrs["trans_y"] and len(spec.input("Y").shape) > 1
    weight = spec.constant("Y")
    packed = products.pack(weight) if weight is not None and not (flip_x or flip_y) else None

    def run(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not (flip_x or flip_y) and x.ndim >= 2 and y.ndim == 2 and x.dtype.kind == "f":  # a linear layer's
            return products.matmul(x.reshape(-1, x.shape[-1]), y, packed).reshape(*x.shape[:-1], y.shape[-1])
        return np.asarray(np.matmul(np.swapaxes(x, -1, -2) if flip_x else x,
                                    np.swapaxes(y, -1, -2) if flip_y else y))

    return run


def _rows(shape: Sequence[int], cols: int) -> tuple[int, int]:
    """A shape flattened to 2-D at ``cols``."""
    return math.prod(shape[:cols]), math.prod(shape[cols:])


@register_kernel("mul")
def mul(spec: KernelSpec) -> Kernel:
    x2 = _rows(spec.input("X").shape, spec.attrs["x_num_col_dims"])
    y2 = _rows(spec.input("Y").shape, spec.attrs["y_num_col_dims"])
    out_shape = spec.output("Out").shape
    weight = spec.constant("Y")
    packed = None if weight is None else products.pack(weight.reshape(y2))
    return lambda x, y: products.matmul(x.reshape(x2), y.reshape(y2), packed).reshape(out_shape)


@register_kernel("fc")
def fc(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    x2 = _rows(spec.input("Input").shape, attrs["in_num_col_dims"])
    out_shape = spec.output("Out").shape
    gated = attrs["activation_type"] == GATED
    width = out_shape[-1] * (2 if gated else 1)
    used = (slice(0, x2[1]), slice(0, width)) if attrs["padding_weights"] else (slice(None), slice(None))
    epilogue = make_epilogue((width,), "" if gated else attrs["activation_type"])
    where = slot_positions(spec)
    bias_at, residual_at = where.get("Bias"), where.get("ResidualData")
    weight = spec.constant("W")
    packed = None if weight is None else products.pack(weight[used])

    def run(*args: np.ndarray) -> np.ndarray:
        residual = None if residual_at is None else args[residual_at].reshape(x2[0], width)
        out = epilogue(products.matmul(args[0].reshape(x2), args[1][used], packed),
                       None if bias_at is None else args[bias_at], residual)
        if gated:
            half = width // 2
            out = swiglu(np.empty((x2[0], half), out.dtype), out[:, :half], out[:, half:])
        return out.reshape(out_shape)

    return run


@register_kernel("determinant", dtypes=(DType.float32, DType.float16, DType.float64))
def _determinant(spec: KernelSpec) -> Kernel:
    """numpy's LU determinant, in float64 for float32 (its float32 LU loses digits a 3x3 keeps)."""
    return lambda x: np.asarray(np.linalg.det(x.astype(np.float64)), dtype=x.dtype)
