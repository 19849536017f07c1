"""``fused_conv2d_pool`` as the two ops it fuses: a backend without a fused kernel for a
configuration runs its own ``fused_conv2d`` and ``pool2d`` kernels on these specs, the
convolution's full-size output between them."""

from __future__ import annotations

import attrs

from ..ir.ops.window import window_geometry
from ..ir.schema import TensorInfo, get_schema, schema_default
from .registry import KernelSpec

__all__ = ["conv_and_pool"]

_POOL_ONLY = ("pool_type", "pool_size")


def conv_and_pool(spec: KernelSpec) -> tuple[KernelSpec, KernelSpec]:
    """(the ``fused_conv2d``, the ``pool2d``) that ``spec``, a ``fused_conv2d_pool``, computes."""
    out = spec.output("Output")
    conv_out = TensorInfo(_conv_shape(spec), out.dtype)
    conv_attrs = {name: value for name, value in spec.attrs.items() if name not in _POOL_ONLY}
    conv = attrs.evolve(spec, op_type="fused_conv2d", attrs=conv_attrs, outputs={"Output": (conv_out,)}, inplace=False)
    size = list(spec.attrs["pool_size"])
    pool_attrs = {a.name: schema_default("pool2d", a.name) for a in get_schema("pool2d").attrs if not a.required}
    pool_attrs.update(pooling_type=spec.attrs["pool_type"], ksize=size, strides=size, paddings=[0, 0],
                      padding_algorithm="EXPLICIT", data_format=spec.attrs["data_format"])
    pool = KernelSpec("pool2d", spec.dtype, pool_attrs, {"X": (conv_out,)}, {"Out": (out,)})
    return conv, pool


def _conv_shape(spec: KernelSpec) -> tuple[int, ...]:
    """The convolution's output shape, before the pool."""
    a = spec.attrs
    x, w, out = spec.input("Input").shape, spec.input("Filter").shape, spec.output("Output").shape
    channel_last = a["data_format"] == "NHWC"
    h, wd = (x[1], x[2]) if channel_last else (x[2], x[3])
    full = window_geometry((h, wd), (w[2], w[3]), a["strides"], a["dilations"], a["paddings"],
                           a["padding_algorithm"]).out
    return (out[0], *full, out[3]) if channel_last else (out[0], out[1], *full)
