"""OpenCL kernels of nearest_interp_v2 and bilinear_interp_v2 on 4-D NCHW tensors (``resize.cl``).

The plan is made once at prepare, by the numpy kernel's own ``resize_plan`` and ``resize_taps``:
per spatial axis the source index of each output (nearest) or its two taps and their weights
(bilinear), an axis left as it is getting the identity. The tables go to the device at bind time
and the kernel only gathers and blends. Anything else falls back to numpy: another layout or
rank, antialias, exclude_outside, tf_crop_and_resize, or sizes and scales only known at run time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.resize import ResizeAxis, resize_plan
from ..numpy.resize import resize_taps, run_time_sizes, tap_options
from ..registry import KernelSpec, register_kernel
from .base import Binder, DeviceArray, Launch, Unsupported, launch_1d, source
from .runtime import Runtime

__all__: list[str] = []

FLOATS = (DType.float32, DType.float16)
SIZE_SLOTS = ("OutSize", "SizeTensor", "Scale")


def _constants(spec: KernelSpec) -> dict[str, list[np.ndarray]]:
    """The size and scale inputs' values by slot; Unsupported when one is only known at run time."""
    values: dict[str, list[np.ndarray]] = {}
    for slot in SIZE_SLOTS:
        for i in range(len(spec.inputs.get(slot, ()))):
            value = spec.constant(slot, i)
            if value is None:
                raise Unsupported(f"{spec.op_type} with its {slot} known only at run time")
            values.setdefault(slot, []).append(value)
    return values


def _plan(spec: KernelSpec) -> list[ResizeAxis]:
    """The op's resize plan for its input shape, declining what the kernel does not cover."""
    attrs, shape = spec.attrs, spec.input("X").shape
    if len(shape) != 4 or attrs["data_layout"] != "NCHW" or min(shape) < 0:
        raise Unsupported(f"{spec.op_type} of a {attrs['data_layout']} input of shape {list(shape)}")
    if attrs["antialias"] or attrs["exclude_outside"]:
        raise Unsupported(f"{spec.op_type} with antialias or exclude_outside")
    values = _constants(spec)
    scale = values["Scale"][0] if "Scale" in values else None
    try:
        plan = resize_plan(spec.op_type, attrs, shape, run_time_sizes(spec, values), scale)
    except ValueError as e:
        raise Unsupported(f"{spec.op_type}: {e}") from None
    if any(item.mode == "tf_crop_and_resize" for item in plan):
        raise Unsupported(f"{spec.op_type} by tf_crop_and_resize")
    resized = [item.axis for item in plan if not item.identity]
    if not set(resized) <= {2, 3}:
        raise Unsupported(f"{spec.op_type} resizing axes {resized} (the kernel resizes H and W)")
    return plan


def _axis_tables(spec: KernelSpec, plan: Sequence[ResizeAxis], axis: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(int32 source indices, float32 weights or None) of ``axis``, (out, taps) flattened."""
    options = tap_options(spec)
    item = next((item for item in plan if item.axis == axis and not item.identity), None)
    if item is not None:
        index, weights, _ = resize_taps(item, *options)
    else:
        size = spec.input("X").shape[axis]
        index = np.arange(size)[:, None]
        weights = None if options[0] == "nearest" else np.ones((size, 1))
    if weights is not None and index.shape[1] == 1:  # an identity axis of bilinear: one tap of weight 1
        index, weights = np.repeat(index, 2, axis=1), np.hstack([weights, np.zeros_like(weights)])
    return (np.ascontiguousarray(index, np.int32).reshape(-1),
            None if weights is None else np.ascontiguousarray(weights, np.float32).reshape(-1))


def _interp(spec: KernelSpec) -> Binder:
    plan = _plan(spec)
    (iy, wy), (ix, wx) = _axis_tables(spec, plan, 2), _axis_tables(spec, plan, 3)
    _, _, h_in, w_in = spec.input("X").shape
    h_out, w_out = len(iy) // (1 if wy is None else 2), len(ix) // (1 if wx is None else 2)
    defines = {"NEAREST": ""} if wy is None else {}

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        kernel = rt.kernel(source("resize.cl", defines=defines), "interp", rt.float_options(spec.dtype))
        out = outs[0]
        tables = [None if t is None else rt.upload(t) for t in (iy, ix, wy, wx)]
        return [launch_1d(rt, kernel, out.size, ins[0].buffer, out.buffer, *tables, np.int32(h_in), np.int32(w_in),
                          np.int32(h_out), np.int32(w_out), np.int32(out.size))]

    return bind


def _register() -> None:
    for op_type in ("nearest_interp_v2", "bilinear_interp_v2"):
        register_kernel(op_type, "opencl", FLOATS)(_interp)


_register()
