"""OpenCL kernels of the normalisations. The row normalisations (``norm.cl``): layer_norm over the
dims from ``begin_norm_axis`` (with its float32 Mean and Variance outputs when read),
skip_layer_norm (the same over X + Y, with the sum written when read), rms_norm and skip_rms_norm. One
work-group normalises one row, its work-items striding the row and summing in local memory;
statistics and arithmetic are float32 in every float16 mode. batch_norm, lrn and softmax
(``nn.cl``): one work-item per output element (per row for softmax).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ..registry import KernelSpec, register_kernel
from .base import (
    INPLACE_OPS,
    Binder,
    DeviceArray,
    Launch,
    Unsupported,
    copy_launch,
    launch,
    launch_1d,
    param_defines,
    source,
    work_group,
)
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
    skip = spec.op_type.startswith("skip_")
    if skip and spec.input("Y").shape != shape:
        raise Unsupported(f"{spec.op_type} of X {list(shape)} and Y {list(spec.input('Y').shape)}")
    flags = {"RMS": spec.op_type.endswith("rms_norm"), "HAS_STATS": bool(stats), "SKIP": skip,
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


def _batch_norm(spec: KernelSpec) -> Binder:
    x = spec.input("X").shape
    channel_last = spec.attrs["data_layout"] == "NHWC"
    channels = x[-1] if channel_last else x[1]
    inner = 1 if channel_last else math.prod(x[2:])
    eps = np.float32(spec.attrs["epsilon"])
    stats = spec.input("Mean").dtype
    wanted = [slot for slot, _ in spec.output_keys]

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        text = source("nn.cl", defines=param_defines(rt, stats))
        options = rt.float_options(spec.dtype)
        y = outs[wanted.index("Y")]
        launches = [launch_1d(rt, rt.kernel(text, "batch_norm", options), y.size, ins[0].buffer,
                              y.buffer, *(a.buffer for a in ins[1:5]), eps, np.int32(channels), np.int32(inner),
                              np.int32(y.size))]
        sources = {"MeanOut": ins[3], "VarianceOut": ins[4], "SavedMean": ins[3]}
        for slot, out in zip(wanted, outs):
            if out is None:
                continue
            if slot in sources:  # MeanOut is often Mean itself: then there is nothing to copy
                launches.append(copy_launch(rt, sources[slot], out))
            elif slot == "SavedVariance":
                launches.append(launch_1d(rt, rt.kernel(text, "inv_std", options), out.size, ins[4].buffer,
                                          out.buffer, eps, np.int32(out.size)))
        return launches

    return bind


def _softmax(spec: KernelSpec) -> Binder:
    shape = spec.input("X").shape or (1,)
    axis = spec.attrs["axis"] % len(shape)
    length, inner = shape[axis], math.prod(shape[axis + 1:])
    rows = math.prod(shape) // max(length, 1)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("nn.cl"), "softmax", rt.float_options(spec.dtype))
        return [launch_1d(rt, kernel, rows, ins[0].buffer, outs[0].buffer, np.int32(length), np.int32(inner),
                          np.int32(rows))]

    return bind


def _lrn(spec: KernelSpec) -> Binder:
    x = spec.input("X").shape
    axis = 3 if spec.attrs["data_format"] == "NHWC" else 1
    channels, inner = x[axis], math.prod(x[axis + 1:])
    attrs = spec.attrs
    defines = {"HAS_MID": ""} if spec.outputs.get("MidOut") else {}

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("nn.cl", defines=defines), "lrn", rt.float_options(spec.dtype))
        out, mid = outs[0], outs[1] if len(outs) > 1 else None
        return [launch_1d(rt, kernel, out.size, ins[0].buffer, out.buffer, None if mid is None else mid.buffer,
                          np.int32(channels), np.int32(inner), np.int32(attrs["n"]),
                          *(np.float32(attrs[a]) for a in ("k", "alpha", "beta")), np.int32(out.size))]

    return bind


def _register() -> None:
    for op_type in ("layer_norm", "skip_layer_norm", "rms_norm", "skip_rms_norm"):
        register_kernel(op_type, "opencl", FLOATS)(_row_norm)
    for op_type, factory in (("batch_norm", _batch_norm), ("softmax", _softmax), ("lrn", _lrn)):
        register_kernel(op_type, "opencl", FLOATS)(factory)
    INPLACE_OPS.add("batch_norm")


_register()
