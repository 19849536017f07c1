"""OpenCL kernels of the poolings. pool2d (``nn.cl``): max and avg, windowed, global or adaptive,
in NCHW or NHWC (an NHWC pixel's channels 4 at a time where they are a multiple of 4); lp and
dilated pools fall back to numpy. pool3d (``volume.cl``): max, avg and lp, windowed (dilated too)
or global, in NCDHW; NDHWC falls back to numpy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.window import window_geometry
from ..registry import KernelSpec, register_kernel
from .base import Binder, DeviceArray, Launch, Unsupported, launch_1d, source
from .runtime import Runtime

__all__ = ["pool2d", "pool3d", "volume_defines"]

FLOATS = (DType.float32, DType.float16)


def pool2d(spec: KernelSpec) -> Binder:
    attrs = spec.attrs
    if attrs["pooling_type"] == "lp" or any(d != 1 for d in attrs["dilations"]):
        raise Unsupported("lp and dilated pools have no OpenCL kernel")
    defines: dict[str, object] = {"POOL_MAX": ""} if attrs["pooling_type"] == "max" else {}
    lanes = 1
    if attrs["data_format"] == "NHWC":
        n, h, w, c = spec.input("X").shape
        oh, ow = spec.output("Out").shape[1:3]
        defines["CHANNELS_LAST"] = c
        lanes = 4 if c % 4 == 0 else 1  # an NHWC pixel's channels move 4 at a time
        defines["LANES"] = lanes
    else:
        n, c, h, w = spec.input("X").shape
        oh, ow = spec.output("Out").shape[2:]
    if attrs["global_pooling"] or attrs["adaptive"]:
        defines["ADAPTIVE"] = ""
        geometry = [0] * 6
    else:
        window = window_geometry((h, w), attrs["ksize"], attrs["strides"], (1, 1), attrs["paddings"],
                                 attrs["padding_algorithm"], attrs["ceil_mode"])
        geometry = [*attrs["ksize"], *attrs["strides"], window.pads[0][0], window.pads[1][0]]
        if attrs["exclusive"]:
            defines["EXCLUSIVE"] = ""

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("nn.cl", defines=defines), "pool2d", rt.float_options(spec.dtype))
        out = outs[0]
        items = out.size // lanes
        return [launch_1d(rt, kernel, items, ins[0].buffer, out.buffer,
                          *(np.int32(v) for v in (h, w, oh, ow, *geometry, items)))]

    return bind


register_kernel("pool2d", "opencl", FLOATS)(pool2d)


def volume_defines(sizes: Sequence[int], out: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int], pads: Sequence[tuple[int, int]]) -> dict[str, object]:
    """The geometry defines of ``volume.cl``'s kernels."""
    values = (sizes, out, kernel, strides, dilations, [before for before, _ in pads])
    names = (("D", "H", "W"), ("OD", "OH", "OW"), ("KD", "KH", "KW"), ("SD", "SH", "SW"), ("DD", "DH", "DW"),
             ("PD", "PH", "PW"))
    return {name: int(v) for group, vs in zip(names, values) for name, v in zip(group, vs)}


def pool3d(spec: KernelSpec) -> Binder:
    attrs = spec.attrs
    if attrs["data_format"] == "NDHWC":
        raise Unsupported("pool3d in NDHWC has no OpenCL kernel")
    sizes = spec.input("X").shape[2:]
    if attrs["global_pooling"]:
        geometry = volume_defines(sizes, (1, 1, 1), sizes, (1, 1, 1), (1, 1, 1), ((0, 0),) * 3)
    else:
        window = window_geometry(sizes, attrs["ksize"], attrs["strides"], attrs["dilations"] or (1, 1, 1),
                                 attrs["paddings"], attrs["padding_algorithm"], attrs["ceil_mode"])
        geometry = volume_defines(sizes, window.out, attrs["ksize"], attrs["strides"], window.dilations, window.pads)
    kind = attrs["pooling_type"]
    defines: dict[str, object] = {"POOL3D": "", **geometry}
    if kind == "max":
        defines["POOL_MAX"] = ""
    elif kind == "lp":
        defines["POOL_LP"] = repr(float(attrs["norm_type"]))
    elif attrs["exclusive"]:
        defines["EXCLUSIVE"] = ""

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("volume.cl", defines=defines), "pool3d", rt.float_options(spec.dtype))
        out = outs[0]
        return [launch_1d(rt, kernel, out.size, ins[0].buffer, out.buffer, np.int32(out.size))]

    return bind


register_kernel("pool3d", "opencl", FLOATS)(pool3d)
