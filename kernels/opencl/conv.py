"""OpenCL kernels of the convolutions: conv2d / depthwise_conv2d / fused_conv2d / fused_conv2d_pool;
NCHW, and NHWC for ungrouped ones; conv3d and conv3d_transpose, NCDHW, direct kernels (``volume.cl``).

Convolutions (``conv_geometry`` as the numpy kernels):

1. **depthwise** (one input channel per group): a direct kernel, one output per work-item.
2. **1x1** (unpadded, stride 1, ungrouped) without tensor cores, or on tensor cores on maps of
   at least ``PER_IMAGE_PIXELS``: a batched GEMM ``W[O, C] @ X[n][C, H*W]`` on the input as it is.
3. everything else: an implicit GEMM over ``[O/g, C/g*kh*kw] x [C/g*kh*kw, N*OH*OW]`` per group,
   the input gathered tap by tap into local memory (no im2col buffer). On tensor cores an
   ungrouped one reads channels-last copies of its input and filter (``gemm._channels_last``),
   1x1 ones on small maps included: there one GEMM over all images' pixels beats one per image
   of few columns (ResNet-50 float16 on the H100: batch 32 9.73 -> 8.89 ms, batch 1 1.74 ->
   1.58), while on 28x28 maps and larger the copy costs about as much as the GEMM itself (64 to
   256 channels on 56x56 maps, batch 32: 14 + 59 against 67 us).

All three end in the fused epilogue ``act(acc + Bias[o] + ResidualData)``. An NHWC convolution (what
the ``channels_last`` pass makes) is the implicit GEMM over its tensors where they lie: on tensor
cores, with channels a multiple of 8, its input is already the channels-last operand, so it
needs no copy, and its output is what the next one reads. A ``fused_conv2d_pool`` of such a
convolution and a 2x2 max pool is one GEMM whose columns walk each window's 4 pixels, its epilogue
storing their maximum; the full-size output is never written (VGG-19's 5 pools).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.window import window_geometry
from ..conv_pool import conv_and_pool
from ..numpy.conv import ConvGeometry, conv_geometry, slot_positions, volume_geometry
from ..registry import KernelSpec, register_kernel
from .activations import Activation, fused_activation
from .base import Binder, DeviceArray, Launch, Unsupported, launch_1d, source
from .gemm import ConvShape, Gemm, gemm_launch, uses_tensor_cores
from .pool import pool2d, volume_defines
from .runtime import Runtime

__all__: list[str] = []

FLOATS = (DType.float32, DType.float16)
IDENTITY = Activation("(x)")


def _optional(ins: Sequence[DeviceArray], where: dict[str, int], slot: str) -> DeviceArray | None:
    return ins[where[slot]] if slot in where else None


# -- convolution ----------------------------------------------------------------------------------
def _conv_shape(g: ConvGeometry) -> ConvShape:
    (pt, _), (pl, _) = g.pads
    return ConvShape(g.c, g.h, g.w, g.o, g.o // g.groups, g.c // g.groups, g.out[0], g.out[1], *g.kernel,
                     *g.strides, *g.dilations, pt, pl)


def _is_pointwise(g: ConvGeometry) -> bool:
    return g.kernel == (1, 1) and g.strides == (1, 1) and g.groups == 1 and not any(p for pr in g.pads for p in pr)


PER_IMAGE_PIXELS = 784
"""On tensor cores, 1x1 convolutions of maps of at least this many pixels run as a GEMM per image
over the NCHW input as it is, rather than one GEMM over a channels-last copy (module docstring)."""


def _per_image(rt: Runtime, dtype: DType, g: ConvGeometry) -> bool:
    return _is_pointwise(g) and (not uses_tensor_cores(rt, dtype) or g.h * g.w >= PER_IMAGE_PIXELS)


def _conv_launch(rt: Runtime, dtype: DType, g: ConvGeometry, x: DeviceArray, w: DeviceArray, out: DeviceArray,
                 act: Activation, bias: DeviceArray | None, res: DeviceArray | None,
                 filter_values: np.ndarray | None = None, pool: bool = False) -> list[Launch]:
    """The launches of a convolution; ``pool``: of its 2x2 max pool (``_pools_in_epilogue``)."""
    shape = _conv_shape(g)._replace(POOL=int(pool))
    if g.channel_last:  # an implicit GEMM over the NHWC tensors where they lie
        og, k = shape.OG, shape.CG * shape.KH * shape.KW
        pixels = g.n * (g.out[0] // 2) * (g.out[1] // 2) * 4 if pool else g.n * g.out[0] * g.out[1]
        gemm = Gemm(og, pixels, k, g.groups, (og * k, k, 1), (0, 0, 0), (0, 0, 0))
        return gemm_launch(rt, dtype, gemm, w, x, out, act, bias, res, conv=shape, filter_values=filter_values,
                           channels_last=True)
    if g.groups == g.c and g.groups > 1:
        defines = {"ACT(x)": act.expr, "MULT": g.o // g.c, **shape._asdict()}
        defines.update({name: "" for name, arr in (("HAS_BIAS", bias), ("HAS_RES", res)) if arr is not None})
        kernel = rt.kernel(source("depthwise.cl", defines=defines), "depthwise", rt.float_options(dtype))
        return [launch_1d(rt, kernel, out.size, x.buffer, w.buffer, None if bias is None else bias.buffer,
                          None if res is None else res.buffer, out.buffer, np.int32(out.size),
                          *(np.float32(p) for p in act.params))]
    hw, ohw = g.h * g.w, g.out[0] * g.out[1]
    if _per_image(rt, dtype, g):
        gemm = Gemm(g.o, hw, g.c, g.n, (0, g.c, 1), (g.c * hw, hw, 1), (g.o * hw, hw, 1), (0, 1, 0))
        return gemm_launch(rt, dtype, gemm, w, x, out, act, bias, res)
    og, k = shape.OG, shape.CG * shape.KH * shape.KW
    gemm = Gemm(og, g.n * ohw, k, g.groups, (og * k, k, 1), (0, 0, 0), (0, 0, 0))
    return gemm_launch(rt, dtype, gemm, w, x, out, act, bias, res, conv=shape, filter_values=filter_values)


def _activation(spec: KernelSpec) -> Activation:
    attrs = spec.attrs
    if spec.op_type in ("fused_conv2d", "fused_conv2d_pool"):
        return fused_activation(attrs["fuse_activation"], attrs["fuse_alpha"], attrs["fuse_beta"])
    return IDENTITY


def _conv(spec: KernelSpec) -> Binder:
    g = conv_geometry(spec)
    if g.channel_last and g.groups > 1:
        raise Unsupported(f"{spec.op_type} in NHWC with groups")
    act = _activation(spec)
    where = slot_positions(spec)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return _conv_launch(rt, spec.dtype, g, ins[0], ins[1], outs[0], act, _optional(ins, where, "Bias"),
                            _optional(ins, where, "ResidualData"), spec.constant("Filter"))

    return bind


def _pools_in_epilogue(rt: Runtime, dtype: DType, g: ConvGeometry, spec: KernelSpec) -> bool:
    """Whether a ``fused_conv2d_pool`` is one launch: a 2x2 max pool of an ungrouped NHWC
    convolution on tensor cores, stored by the GEMM's epilogue (``POOL``, gemm_index.h)."""
    return (uses_tensor_cores(rt, dtype) and g.channel_last and g.groups == 1
            and spec.attrs["pool_type"] == "max" and list(spec.attrs["pool_size"]) == [2, 2])


def _conv_pool(spec: KernelSpec) -> Binder:
    """A convolution and the pool of its output: one launch where ``_pools_in_epilogue``, else the
    convolution's launches into a buffer of its full-size output, then the pool's."""
    conv_spec, pool_spec = conv_and_pool(spec)
    g = conv_geometry(conv_spec)
    conv, pool = _conv(conv_spec), pool2d(pool_spec)
    act, where = _activation(spec), slot_positions(spec)
    full = conv_spec.output("Output").shape

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        if outs[0] is None:  # nothing reads the pooled output
            return []
        if _pools_in_epilogue(rt, spec.dtype, g, spec):
            return _conv_launch(rt, spec.dtype, g, ins[0], ins[1], outs[0], act, _optional(ins, where, "Bias"), None,
                                spec.constant("Filter"), pool=True)
        storage = rt.storage(spec.dtype)
        between = DeviceArray(rt.alloc(math.prod(full) * storage.itemsize), full, storage)
        return [*conv(rt, ins, [between]), *pool(rt, [between], outs)]

    return bind


# -- conv3d ---------------------------------------------------------------------------------------
def _conv3d(spec: KernelSpec) -> Binder:
    """A direct kernel (``volume.cl``), one output per work-item; NDHWC falls back to numpy."""
    g = volume_geometry(spec)
    if g.channel_last:
        raise Unsupported("conv3d in NDHWC has no OpenCL kernel")
    defines = {"CONV3D": "", "C": g.c, "O": g.o, "CG": g.c // g.groups, "OG": g.o // g.groups,
               **volume_defines(g.sizes, g.out, g.kernel, g.strides, g.dilations, g.pads)}

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("volume.cl", defines=defines), "conv3d", rt.float_options(spec.dtype))
        out = outs[0]
        return [launch_1d(rt, kernel, out.size, ins[0].buffer, ins[1].buffer, out.buffer, np.int32(out.size))]

    return bind


def _conv3d_transpose(spec: KernelSpec) -> Binder:
    """A direct kernel (``volume.cl``): each output sums the taps landing on it; NDHWC falls back to numpy."""
    attrs = spec.attrs
    if attrs["data_format"] == "NDHWC":
        raise Unsupported("conv3d_transpose in NDHWC has no OpenCL kernel")
    (_, c, *sizes), (_, og, *kernel) = spec.input("Input").shape, spec.input("Filter").shape
    window = window_geometry(sizes, kernel, attrs["strides"], attrs["dilations"], attrs["paddings"],
                             attrs["padding_algorithm"], transposed=True)
    out = spec.output("Output").shape
    defines: dict[str, object] = {
        "CONV3D_TRANSPOSE": "", "C": c, "O": out[1], "CG": c // attrs["groups"], "OG": og,
        **volume_defines(sizes, out[2:], kernel, attrs["strides"], window.dilations, window.pads)}
    bias_at = slot_positions(spec).get("Bias")
    if bias_at is not None:
        defines["HAS_BIAS"] = ""

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        program = rt.kernel(source("volume.cl", defines=defines), "conv3d_transpose", rt.float_options(spec.dtype))
        y = outs[0]
        bias = None if bias_at is None else ins[bias_at].buffer
        return [launch_1d(rt, program, y.size, ins[0].buffer, ins[1].buffer, bias, y.buffer, np.int32(y.size))]

    return bind


def _register() -> None:
    for op_type in ("conv2d", "depthwise_conv2d", "fused_conv2d"):
        register_kernel(op_type, "opencl", FLOATS)(_conv)
    register_kernel("fused_conv2d_pool", "opencl", FLOATS)(_conv_pool)
    register_kernel("conv3d", "opencl", FLOATS)(_conv3d)
    register_kernel("conv3d_transpose", "opencl", FLOATS)(_conv3d_transpose)


_register()
