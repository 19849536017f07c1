"""OpenCL kernels of the row normalisations (``norm.cl``): layer_norm over the dims from
``begin_norm_axis`` (with its float32 Mean and Variance outputs when read), skip_layer_norm (the
same over X + Y, with the sum written when read) and rms_norm. One
work-group normalises one row, its work-items striding the row and summing in local memory;
statistics and arithmetic are float32 in every float16 mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ..registry import KernelSpec, register_kernel
from .base import Binder, DeviceArray, Launch, Unsupported, launch, param_defines, source, work_group
from .runtime import Runtime

__all__: list[str] = []

FLOATS = (DType.float32, DType.float16)


def _row_norm(spec: KernelSpec) -> Binder:
    shape = spec.input("X").shape
    begin = spec.attrs["begin_norm_axis"] % max(len(shape), 1)
    rows, length = math.prod(shape[:begin]), math.prod(shape[begin:])
    affine = [slot for slot in ("Scale", "Bias") if spec.has_input(slot)]
    stats = [slot for slot in ("Mean", "Variance") if spec.outputs.get(slot)]
    if any(spec.output(slot).dtype is not DType.float32 for slot in stats):
        raise Unsupported(f"{spec.op_type} statistics in {spec.output(stats[0]).dtype.name}")
    param = spec.input(affine[0]).dtype if affine else DType.float32
    skip = spec.op_type == "skip_layer_norm"
    if skip and spec.input("Y").shape != shape:
        raise Unsupported(f"skip_layer_norm of X {list(shape)} and Y {list(spec.input('Y').shape)}")
    flags = {"RMS": spec.op_type == "rms_norm", "HAS_STATS": bool(stats), "SKIP": skip,
             "HAS_SUM": bool(spec.outputs.get("Sum")), **{f"HAS_{slot.upper()}": True for slot in affine}}
    eps = np.float32(spec.attrs["epsilon"])

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        wg = work_group(rt, length)
        defines = {"WG": wg, **param_defines(rt, param), **{k: "" for k, on in flags.items() if on}}
        kernel = rt.kernel(source("norm.cl", defines=defines), "row_norm", rt.float_options(spec.dtype))
        rest = iter(ins[1:])
        residual = next(rest).buffer if skip else None
        params = dict(zip(affine, (a.buffer for a in rest)))
        out = {slot: None if o is None else o.buffer for (slot, _), o in zip(spec.output_keys, outs)}
        return [launch(rt, kernel, (rows * wg,), (wg,), ins[0].buffer, residual, params.get("Scale"),
                       params.get("Bias"), outs[0].buffer, out.get("Sum"), out.get("Mean"), out.get("Variance"),
                       np.int32(length), eps)]

    return bind


def _register() -> None:
    for op_type in ("layer_norm", "skip_layer_norm", "rms_norm"):
        register_kernel(op_type, "opencl", FLOATS)(_row_norm)


_register()
