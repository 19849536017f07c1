"""OpenCL kernels of the reduce ops (``reduce.cl``) on floats: sum, mean, max, min and prod over
``dim`` (or every dim with ``reduce_all``), float32 accumulation; ``keep_dim`` changes only the
output's shape. Each output element walks its reduced elements, so any set of dims reduces in one
launch without a transposed copy. The reduction is the family row's (``halfway.ir.ops.families``):
its start, its combining expression and its finish, rendered (``render``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.families import REDUCE
from ...ir.ops.family import Reduction
from ..registry import KernelSpec, register_kernel
from .base import Binder, DeviceArray, Launch, Unsupported, contiguous_strides, launch_1d, meta, source
from .render import float_literal, opencl_expr
from .runtime import Runtime

__all__ = ["REDUCTIONS"]

FLOATS = (DType.float32, DType.float16)


def _defines(row: Reduction) -> tuple[str, str, str]:
    names = {"x": "acc", "y": "v", "n": "n"}
    finish = "(acc)" if row.finish is None else opencl_expr(row.finish, names, float_literal)
    return float_literal(row.init), f"((acc) = {opencl_expr(row.combine, names, float_literal)})", finish


REDUCTIONS: dict[str, tuple[str, str, str]] = {name: _defines(row) for name, row in REDUCE.items()}
"""Op type -> (INIT, ADD(acc, v), FINISH(acc, n)) in OpenCL C."""


def _reduce(spec: KernelSpec) -> Binder:
    x = spec.input("X")
    if spec.output("Out").dtype is not x.dtype:
        raise Unsupported(f"{spec.op_type} to {spec.output('Out').dtype.name}")
    if spec.inputs.get("DimTensor"):
        raise Unsupported(f"{spec.op_type} over dims computed at run time")
    shape, dims = x.shape, spec.attrs["dim"]
    axes = set(range(len(shape))) if spec.attrs["reduce_all"] or not dims else {d % len(shape) for d in dims}
    strides = contiguous_strides(shape)
    kept = [a for a in range(len(shape)) if a not in axes]
    reduced = sorted(axes)
    info = [len(kept), *(shape[a] for a in kept), *(strides[a] for a in kept),
            len(reduced), *(shape[a] for a in reduced), *(strides[a] for a in reduced)]
    count = math.prod(shape[a] for a in reduced)
    init, add, finish = REDUCTIONS[spec.op_type]
    defines = {"INIT": init, "ADD(acc, v)": add, "FINISH(acc, n)": finish}

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("reduce.cl", defines=defines), "reduce", rt.float_options(spec.dtype))
        out = outs[0]
        return [launch_1d(rt, kernel, out.size, ins[0].buffer, out.buffer, meta(rt, info), np.int32(count),
                          np.int32(out.size))]

    return bind


def _register() -> None:
    for op_type in REDUCTIONS:
        register_kernel(op_type, "opencl", FLOATS)(_reduce)


_register()
