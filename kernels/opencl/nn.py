"""OpenCL kernels of the nn ops: conv2d / depthwise_conv2d / fused_conv2d / fused_conv2d_pool, pool2d,
batch_norm, lrn, softmax, matmul_v2, mul and fc; NCHW, and NHWC for ungrouped convolutions and pools.

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
from ...ir.ops.nn import window_geometry
from ..conv_pool import conv_and_pool
from ..numpy.conv import ConvGeometry, conv_geometry, slot_positions
from ..registry import KernelSpec, register_kernel
from .activations import Activation, fused_activation
from .base import INPLACE_OPS, Binder, DeviceArray, Launch, Unsupported, copy_launch, launch_1d, param_defines, source
from .gemm import ConvShape, Gemm, gemm_launch, uses_tensor_cores
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
    conv, pool = _conv(conv_spec), _pool2d(pool_spec)
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


# -- pool2d ---------------------------------------------------------------------------------------
def _pool2d(spec: KernelSpec) -> Binder:
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


# -- batch_norm -----------------------------------------------------------------------------------
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


# -- softmax --------------------------------------------------------------------------------------
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


# -- lrn ------------------------------------------------------------------------------------------
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


# -- matrix products ------------------------------------------------------------------------------
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
    gemm = Gemm(m, n, k, math.prod(out_batch), a, b, (m * n, n, 1))
    return _gemm_binder(spec, gemm, IDENTITY)


def _rows(shape: Sequence[int], cols: int) -> tuple[int, int]:
    return math.prod(shape[:cols]), math.prod(shape[cols:])


def _mul(spec: KernelSpec) -> Binder:
    m, k = _rows(spec.input("X").shape, spec.attrs["x_num_col_dims"])
    _, n = _rows(spec.input("Y").shape, spec.attrs["y_num_col_dims"])
    return _gemm_binder(spec, Gemm(m, n, k, 1, (0, k, 1), (0, n, 1), (0, n, 1)), IDENTITY)


def _fc(spec: KernelSpec) -> Binder:
    m, k = _rows(spec.input("Input").shape, spec.attrs["in_num_col_dims"])
    n = spec.output("Out").shape[-1]
    row = spec.input("W").shape[1]
    gemm = Gemm(m, n, k, 1, (0, k, 1), (0, row, 1), (0, n, 1), (0, 0, 1))
    return _gemm_binder(spec, gemm, fused_activation(spec.attrs["activation_type"]))


def _gemm_binder(spec: KernelSpec, gemm: Gemm, act: Activation) -> Binder:
    where = slot_positions(spec)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return gemm_launch(rt, spec.dtype, gemm, ins[0], ins[1], outs[0], act, _optional(ins, where, "Bias"))

    return bind


def _register() -> None:
    for op_type in ("conv2d", "depthwise_conv2d", "fused_conv2d"):
        register_kernel(op_type, "opencl", FLOATS)(_conv)
    register_kernel("fused_conv2d_pool", "opencl", FLOATS)(_conv_pool)
    for op_type, factory in (("pool2d", _pool2d), ("batch_norm", _batch_norm), ("softmax", _softmax), ("lrn", _lrn),
                             ("matmul_v2", _matmul_v2), ("mul", _mul), ("fc", _fc)):
        register_kernel(op_type, "opencl", FLOATS)(factory)
    INPLACE_OPS.add("batch_norm")


_register()
