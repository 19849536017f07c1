"""OpenCL kernels of the matrix products: matmul_v2 (batch dims that broadcast as strides of 0 or a
whole matrix), mul and fc (its bias, residual and activation in the GEMM's epilogue), each one ``gemm``
launch; a gated (swiglu) fc writes its product to a buffer of its own, whose halves a second
launch (``elementwise.cl``'s gated_halves) gates into the output."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.matmul import GATED
from ..numpy.conv import slot_positions
from ..registry import KernelSpec, register_kernel
from .activations import Activation, fused_activation
from .base import Binder, DeviceArray, Launch, Unsupported, element_options, launch_1d, source
from .elementwise import GATED_OPS
from .gemm import Gemm, gemm_launch
from .runtime import Runtime

__all__: list[str] = []

FLOATS = (DType.float32, DType.float16)
_IDENTITY = Activation("(x)")


def _optional(ins: Sequence[DeviceArray], where: dict[str, int], slot: str) -> DeviceArray | None:
    return ins[where[slot]] if slot in where else None


def _batch_stride(batch: tuple[int, ...], out_batch: tuple[int, ...], matrix: int) -> int:
    if math.prod(batch) == 1:
        return 0
    if tuple([1] * (len(out_batch) - len(batch)) + list(batch)) == out_batch:
        return matrix
    raise Unsupported(f"matmul_v2 batch dims {list(batch)} broadcast against {list(out_batch)}")


def _matmul_v2(spec: KernelSpec) -> Binder:
    x, y = spec.input("X").shape, spec.input("Y").shape
    tx = spec.attrs["trans_x"] and len(x) > 1
    ty = spec.attrs["trans_y"] and len(y) > 1
    xs = (1, *x) if len(x) == 1 else x
    ys = (*y, 1) if len(y) == 1 else y
    m, k = (xs[-1], xs[-2]) if tx else (xs[-2], xs[-1])
    n = ys[-2] if ty else ys[-1]
    out_batch = tuple(np.broadcast_shapes(xs[:-2], ys[:-2]))
    a = (_batch_stride(xs[:-2], out_batch, m * k), 1 if tx else k, m if tx else 1)
    b = (_batch_stride(ys[:-2], out_batch, k * n), 1 if ty else n, k if ty else 1)
    return _gemm_binder(spec, _rows_of_batch(Gemm(m, n, k, math.prod(out_batch), a, b, (m * n, n, 1))), _IDENTITY)


def _rows_of_batch(g: Gemm) -> Gemm:
    """A batch of row-major A by one B as one GEMM of ``batch * m`` rows (a decoder's [B, 1, hidden]
    activations by its weights: B rows of one GEMV, reading the weights once)."""
    if g.batch == 1 or g.b[0] != 0 or g.a != (g.m * g.k, g.k, 1):
        return g
    return Gemm(g.batch * g.m, g.n, g.k, 1, (0, g.k, 1), g.b, (0, g.n, 1))


def _rows(shape: Sequence[int], cols: int) -> tuple[int, int]:
    return math.prod(shape[:cols]), math.prod(shape[cols:])


def _mul(spec: KernelSpec) -> Binder:
    m, k = _rows(spec.input("X").shape, spec.attrs["x_num_col_dims"])
    _, n = _rows(spec.input("Y").shape, spec.attrs["y_num_col_dims"])
    return _gemm_binder(spec, Gemm(m, n, k, 1, (0, k, 1), (0, n, 1), (0, n, 1)), _IDENTITY)


def _fc(spec: KernelSpec) -> Binder:
    m, k = _rows(spec.input("Input").shape, spec.attrs["in_num_col_dims"])
    row = spec.input("W").shape[1]
    gated = spec.attrs["activation_type"] == GATED
    n = row if gated else spec.output("Out").shape[-1]
    gemm = Gemm(m, n, k, 1, (0, k, 1), (0, row, 1), (0, n, 1), (0, 0, 1))
    if gated:
        return _gated_binder(spec, gemm)
    return _gemm_binder(spec, gemm, fused_activation(spec.attrs["activation_type"]))


def _gated_binder(spec: KernelSpec, gemm: Gemm) -> Binder:
    """The product and its bias into a [m, 2 N] buffer, then silu(gate) * up of its halves into Out."""
    where = slot_positions(spec)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        storage = rt.storage(spec.dtype)
        product = DeviceArray(rt.alloc(gemm.m * gemm.n * storage.itemsize), (gemm.m, gemm.n), storage)
        launches = gemm_launch(rt, spec.dtype, gemm, ins[0], ins[1], product, _IDENTITY, _optional(ins, where, "Bias"))
        text = source("elementwise.cl", defines={"OP(a, b)": GATED_OPS[GATED]})
        kernel = rt.kernel(text, "gated_halves", element_options(rt, spec.dtype))
        out = outs[0]
        return [*launches, launch_1d(rt, kernel, out.size, product.buffer, out.buffer, np.int32(gemm.n // 2),
                                     np.int32(out.size))]

    return bind


def _gemm_binder(spec: KernelSpec, gemm: Gemm, act: Activation) -> Binder:
    where = slot_positions(spec)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return gemm_launch(rt, spec.dtype, gemm, ins[0], ins[1], outs[0], act, _optional(ins, where, "Bias"),
                           _optional(ins, where, "ResidualData"))

    return bind


def _register() -> None:
    for op_type, factory in (("matmul_v2", _matmul_v2), ("mul", _mul), ("fc", _fc)):
        register_kernel(op_type, "opencl", FLOATS)(factory)


_register()
