"""OpenCL kernels of the elementwise ops: binary ops with Paddle's broadcasting (``OP(a, b)`` from
the family rows; add, sub and mul on int32 and int64 too; and swiglu's ``silu(a) * b``),
activations and the other X -> Out ops
(``activations.UNARY_OPS``), add_n (``sum``) and casts between floats, integers and bool.
Comparisons and logical ops (``CMP(a, b)`` from the family rows; the one-operand rows read
``CMP(a, a)``) take operands of any of those dtypes and write bool as uchar.

Same-shape operands take the flat kernel (four elements per work-item, ``vload4`` or
``vload_half4``); broadcasting ones the indexed kernel, whose per-dim strides (0 where an operand
is broadcast) are computed here once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.ops.expr import Y
from ...ir.ops.families import BINARY, COMPARE, UNARY
from ...ir.ops.family import FLOATS
from ...ir.ops.math import numpy_operand_shapes
from ..registry import KernelSpec, register_kernel
from .activations import UNARY_OPS, unary_activation
from .base import (
    C_TYPES,
    INPLACE_OPS,
    Binder,
    DeviceArray,
    Launch,
    Unsupported,
    broadcast_strides,
    copy_launch,
    element_options,
    launch_1d,
    meta,
    source,
)
from .render import c_literal, opencl_expr
from .runtime import Runtime

__all__ = ["BINARY_OPS", "COMPARE_OPS", "GATED_OPS", "INT_BINARY", "CAST_DTYPES"]

_OPERANDS = {"x": "a", "y": "b"}

BINARY_OPS: dict[str, str] = {name: opencl_expr(row.expr, _OPERANDS) for name, row in BINARY.items()}
"""Op type -> OP(a, b) in OpenCL C, the rows' expressions rendered (``render``)."""

COMPARE_OPS: dict[str, str] = {name: opencl_expr(row.expr, _OPERANDS, c_literal) for name, row in COMPARE.items()}
"""Op type -> CMP(a, b) (one-operand rows: of a alone)."""

GATED_OPS: dict[str, str] = {"swiglu": opencl_expr(UNARY["silu"].expr * Y, _OPERANDS)}
"""Op type -> OP(a, b) of the binary ops that are no family row (``halfway.ir.ops.gated``):
swiglu is silu(a) * b."""

INT_BINARY = ("elementwise_add", "elementwise_sub", "elementwise_mul")
"""The binary ops whose OpenCL expression is exact on integers too (int32, int64), besides the rows of
integers only (the bitwise ops)."""
INTEGERS = (DType.int32, DType.int64)
CAST_DTYPES = (*FLOATS, *C_TYPES)
"""What cast and the comparisons read and write: floats, integers and bool."""


def _quads(n: int) -> int:
    return -(-n // 4)


def _operands(spec: KernelSpec) -> tuple[bool, list[int]]:
    """Whether X, Y and Out have one shape, and the broadcast meta of X and Y under Paddle's axis."""
    x, y, out = spec.input("X").shape, spec.input("Y").shape, spec.output("Out").shape
    xs, ys = numpy_operand_shapes(x, y, spec.attrs.get("axis", -1))
    return tuple(xs) == tuple(ys) == tuple(out), broadcast_strides([xs, ys], out)


def _bcast_launch(rt: Runtime, kernel: object, ins: Sequence[DeviceArray], out: DeviceArray,
                  info: list[int]) -> Launch:
    return launch_1d(rt, kernel, out.size, ins[0].buffer, ins[1].buffer, out.buffer, meta(rt, info),
                     np.int32(out.size))


def _binary(op: str) -> Binder:
    def make(spec: KernelSpec) -> Binder:
        flat, info = _operands(spec)

        def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
            o = outs[0]
            text = source("elementwise.cl", defines={"OP(a, b)": op})
            options = element_options(rt, spec.dtype)
            if flat:
                kernel = rt.kernel(text, "binary_flat", options)
                return [launch_1d(rt, kernel, _quads(o.size), ins[0].buffer, ins[1].buffer, o.buffer,
                                  np.int32(o.size))]
            return [_bcast_launch(rt, rt.kernel(text, "binary_bcast", options), ins, o, info)]

        return bind

    return make


def _compare(op: str) -> Binder:
    def make(spec: KernelSpec) -> Binder:
        if not spec.has_input("Y"):  # logical_not, isnan, ...: CMP(a, a) of X alone
            return lambda rt, ins, outs: [_compare_unary(rt, spec.dtype, op, ins[0], outs[0])]
        _, info = _operands(spec)

        def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
            text = source("elementwise.cl", defines={"CMP(a, b)": op})
            kernel = rt.kernel(text, "compare_bcast", element_options(rt, spec.dtype))
            return [_bcast_launch(rt, kernel, ins, outs[0], info)]

        return bind

    return make


def _compare_unary(rt: Runtime, dtype: DType, op: str, x: DeviceArray, out: DeviceArray) -> Launch:
    kernel = rt.kernel(source("elementwise.cl", defines={"CMP(a, b)": op}), "compare_unary", element_options(rt, dtype))
    return launch_1d(rt, kernel, out.size, x.buffer, out.buffer, np.int32(out.size))


def unary_launch(rt: Runtime, dtype: DType, expr: str, params: Sequence[float], x: DeviceArray,
                 out: DeviceArray) -> Launch:
    kernel = rt.kernel(source("elementwise.cl", defines={"ACT(x)": expr}), "unary", rt.float_options(dtype))
    return launch_1d(rt, kernel, _quads(out.size), x.buffer, out.buffer, np.int32(out.size),
                     *(np.float32(p) for p in params))


_SCALAR_TENSORS = ("ScaleTensor", "BiasTensor", "Min", "Max", "FactorTensor", "Seed")


def _unary(spec: KernelSpec) -> Binder:
    given = [slot for slot in _SCALAR_TENSORS if spec.has_input(slot)]
    if given:
        raise Unsupported(f"{spec.op_type} reads {given[0]} at run time")
    if spec.op_type == "dropout" and "Mask" in spec.outputs:
        raise Unsupported("dropout with a Mask output")
    act = unary_activation(spec.op_type, spec.attrs)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        return [unary_launch(rt, spec.dtype, act.expr, act.params, ins[0], outs[0])]

    return bind


def _sum(spec: KernelSpec) -> Binder:
    """add_n: out = x0 + x1, then out += x2, ... (one shape, no broadcasting)."""
    shape = spec.output("Out").shape
    out = (spec.output("Out"),)
    pair = KernelSpec("elementwise_add", spec.dtype, {"axis": -1}, {"X": out, "Y": out}, {"Out": out})
    add = _binary(BINARY_OPS["elementwise_add"])(pair)

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        if len(ins) == 1:
            return [copy_launch(rt, ins[0], outs[0])]
        launches = add(rt, ins[:2], outs)
        for x in ins[2:]:
            launches += add(rt, [outs[0], x], outs)
        return launches

    if any(info.shape != shape for info in spec.inputs["X"]):
        raise Unsupported("sum of inputs of different shapes")
    return bind


def _cast(spec: KernelSpec) -> Binder:
    src, dst = spec.input("X").dtype, spec.output("Out").dtype
    if dst not in CAST_DTYPES or src not in CAST_DTYPES:
        raise Unsupported(f"cast from {src.name} to {dst.name}")

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        x, out = ins[0], outs[0]
        if x.dtype == out.dtype:
            return [copy_launch(rt, x, out)]
        if src in FLOATS and dst in FLOATS:
            name = "to_half" if out.dtype == np.float16 else "to_float"
            kernel = rt.kernel(source("elementwise.cl"), name, rt.float_options(DType.float32))
            return [launch_1d(rt, kernel, _quads(out.size), x.buffer, out.buffer, np.int32(out.size))]
        defines = {**_cast_load(rt, src), **_cast_store(rt, dst)}
        kernel = rt.kernel(source("elementwise.cl", defines=defines), "cast")
        return [launch_1d(rt, kernel, out.size, x.buffer, out.buffer, np.int32(out.size))]

    return bind


def _cast_load(rt: Runtime, dtype: DType) -> dict[str, str]:
    """SRC and CAST_LOAD(p, i): the source element as float (floats) or as its own type."""
    if rt.storage(dtype) == np.float16:
        return {"SRC": "half", "CAST_LOAD(p, i)": "vload_half((i), (p))"}
    return {"SRC": C_TYPES.get(dtype, "float"), "CAST_LOAD(p, i)": "((p)[i])"}


def _cast_store(rt: Runtime, dtype: DType) -> dict[str, str]:
    """DST and CAST_STORE(p, i, v): C's conversion (truncation toward zero to integers), bool as v != 0."""
    if rt.storage(dtype) == np.float16:
        return {"DST": "half", "CAST_STORE(p, i, v)": "vstore_half_rte((float)(v), (i), (p))"}
    if dtype is DType.bool:
        return {"DST": "uchar", "CAST_STORE(p, i, v)": "((p)[i] = (v) != 0)"}
    c_type = C_TYPES.get(dtype, "float")
    return {"DST": c_type, "CAST_STORE(p, i, v)": f"((p)[i] = ({c_type})(v))"}


def _register() -> None:
    dtypes: tuple[DType, ...]
    for op_type, op in BINARY_OPS.items():
        row = BINARY[op_type]
        dtypes = FLOATS + INTEGERS if op_type in INT_BINARY or DType.float32 not in row.dtypes else FLOATS
        register_kernel(op_type, "opencl", [d for d in dtypes if d in row.dtypes])(_binary(op))
    for op_type, op in GATED_OPS.items():
        register_kernel(op_type, "opencl", FLOATS)(_binary(op))
    for op_type in UNARY_OPS:
        if op_type not in UNARY or DType.float32 in UNARY[op_type].dtypes:  # bitwise_not runs on numpy
            register_kernel(op_type, "opencl", FLOATS)(_unary)
    for op_type, row in COMPARE.items():
        dtypes = CAST_DTYPES if row.arity == 2 or op_type == "logical_not" else FLOATS
        register_kernel(op_type, "opencl", dtypes)(_compare(COMPARE_OPS[op_type]))
    register_kernel("sum", "opencl", FLOATS)(_sum)
    register_kernel("cast", "opencl", CAST_DTYPES)(_cast)
    INPLACE_OPS.update(BINARY_OPS, GATED_OPS, UNARY_OPS)


_register()
