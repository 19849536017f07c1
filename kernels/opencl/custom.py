"""Custom OpenCL kernels: an op's OpenCL kernel from OpenCL C source, without writing a binder.

    opencl_kernel("quick_gelu", QUICK_GELU_CL, "quick_gelu",
                  args=[Input("X"), Output("Out"), Size("X")],
                  global_size=lambda spec: [numel(spec.input("X"))])

registers a factory for the op's float32 and float16 kernels on the ``"opencl"`` backend. At
prepare it resolves the arguments and work sizes from the op's shapes and attrs and computes the
constants; at bind it compiles the source (once per text, build options and device: the
runtime's program cache), uploads the constants and pre-binds one launch, as a built-in kernel's
binder does (``halfway.kernels.opencl.base``).

The source is compiled after the common header (``cl/common.h``) with the build options of the
op's dtype, so one text serves every mode when it is written in the header's names: ``T`` the
buffer element type, ``REAL`` the arithmetic type, ``LOAD(p, i)`` / ``STORE(p, i, v)`` one
element as REAL. The modes (``Mode``, what ``source`` receives when it is a function):

* ``"float32"``: float32 tensors, and float16 ones under ``precision="high"``; T and REAL float;
* ``"storage"``: float16 in ``half`` buffers, float arithmetic through ``vload_half`` /
  ``vstore_half_rte`` (any device);
* ``"native"``: ``half`` buffers and ``half`` arithmetic (``precision="low"`` on a device with
  ``cl_khr_fp16``; the header enables the extension);
* ``"integer"``: an integer or bool dtype (T and REAL its C type).

The global size is rounded up to a multiple of the local size, so a kernel checks its bounds.
Constants are prepared once per prepare from the op's parameters (``KernelSpec.constant``):
packed or transposed weights, say. A constant is a numeric array; a floating one is stored as
the op's element type T (read it with ``LOAD``), others as they are. A constant function
returning None (its parameter is not known at prepare) declines the kernel: the op runs on
numpy, or a strict place refuses it.

What a kernel binds is checked (``CustomKernelError`` naming the op and the kernel): every
argument against the kernel's parameter types (``halfway.kernels.opencl.kernel_args``), work
sizes that launch something where an output the kernel writes holds elements, no more than
``MAX_WORK_ITEMS`` work-items and work-groups within the device's limits; an exception raised by
one of the user's functions (source, work sizes, constants, defines) names that function.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Union

import numpy as np
from attrs import field, frozen

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.schema import TensorInfo, get_schema, has_schema
from ..registry import KernelSpec, register_kernel
from .base import C_TYPES, Binder, DeviceArray, Launch, Unsupported, element_options, launch, with_header
from .kernel_args import ARG_INFO_OPTION, kernel_params, param_problem
from .runtime import Float16Mode, Runtime, cl

__all__ = ["opencl_kernel", "CustomKernel", "CustomKernelError", "Input", "Output", "Attr", "Size", "Constant", "Arg",
           "Mode", "element_mode", "numel"]

Mode = Literal["float32", "storage", "native", "integer"]
WorkSize = Union[Sequence[int], Callable[[KernelSpec], Sequence[int]]]
SourceFn = Callable[[KernelSpec, Mode], str]
Defines = Union[Mapping[str, Any], Callable[[KernelSpec], Mapping[str, Any]]]
ConstantFn = Callable[[KernelSpec], Union[np.ndarray, None]]

MAX_WORK_ITEMS = 2**31 - 1
"""The most work-items one launch holds: the global ids a kernel's int indices reach."""
_NUMERIC = "biuf"


class CustomKernelError(HalfwayError):
    """A custom OpenCL kernel that cannot run: its source failed to build (the message holds the
    build log), or its arguments or work sizes do not fit the op or the device."""


@frozen
class Input:
    """The buffer of the op's input ``slot`` (its ``index``-th var)."""

    slot: str
    index: int = 0


@frozen
class Output:
    """The buffer of the op's output ``slot`` (NULL when nobody reads that output)."""

    slot: str
    index: int = 0


@frozen
class Attr:
    """The op's attr ``name`` as a scalar of ``dtype`` (``np.float32`` for a C ``float``,
    ``np.int32`` for an ``int``)."""

    name: str
    dtype: type[np.generic] = np.float32


@frozen
class Size:
    """An ``int``: the element count of the input (or else output) ``slot``, or its size along
    ``axis`` (negative counts from the end)."""

    slot: str
    axis: int | None = None
    index: int = 0


@frozen
class Constant:
    """The buffer of constant ``name`` (see ``opencl_kernel``'s ``constants``)."""

    name: str


Arg = Union[Input, Output, Attr, Size, Constant, np.generic]
"""A kernel argument; a numpy scalar (``np.float32(1.702)``) is passed as it is."""


def numel(info: TensorInfo) -> int:
    """The element count of a tensor."""
    return math.prod(info.shape)


def element_mode(rt: Runtime, dtype: DType) -> Mode:
    """How tensors of ``dtype`` are held and computed on ``rt``'s device (see the module docstring)."""
    if dtype in C_TYPES:
        return "integer"
    if rt.storage(dtype) == np.float32:
        return "float32"
    return "native" if rt.mode is Float16Mode.NATIVE else "storage"


@frozen
class CustomKernel:
    """A custom OpenCL kernel of ``op_type``: the factory ``opencl_kernel`` registers (called with
    a ``KernelSpec`` at prepare, it returns the binder)."""

    op_type: str
    source: str | SourceFn
    name: str
    args: tuple[Arg, ...]
    global_size: WorkSize
    local_size: WorkSize | None = None
    constants: Mapping[str, ConstantFn] = field(factory=dict)
    defines: Defines | None = None

    def __call__(self, spec: KernelSpec) -> Binder:
        where = f"op {spec.op_type}: OpenCL kernel {self.name!r}"
        gws = _work_size(self.global_size, spec, "global_size", where)
        lws = None if self.local_size is None else _work_size(self.local_size, spec, "local_size", where)
        if lws is not None and (len(lws) != len(gws) or 0 in lws):
            raise CustomKernelError(f"{where}: local_size {list(lws)} must be as many positive sizes as "
                                    f"global_size {list(gws)}")
        values = [_resolve(arg, spec, where) for arg in self.args]
        _check_covers(gws, lws, spec, values, where)
        host = self._constants(spec, where)
        defines = _defines(self.defines, spec, where)

        def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
            kernel = self._kernel(rt, spec, defines, where)
            _check_fits(rt, kernel, lws, len(values), self.args, where)
            if 0 in gws:
                return []
            stored = {name: _stored(value, rt, spec.dtype) for name, value in host.items()}
            bound = [_device_arg(v, ins, outs, stored) for v in values]
            _check_types(kernel, self.args, bound, where)
            buffers = {name: rt.upload(value) for name, value in stored.items()}
            args = [buffers[v.name] if isinstance(v, Constant) else arg for v, (arg, _) in zip(values, bound)]
            try:
                return [launch(rt, kernel, gws, lws, *args)]
            except cl.Error as e:
                raise CustomKernelError(f"{where}: setting its arguments {_describe(self.args)} failed: {e}") from e

        return bind

    def _constants(self, spec: KernelSpec, where: str) -> dict[str, np.ndarray]:
        values = {}
        for name, make in self.constants.items():
            value = _call(make, f"constant {name!r}", where, spec)
            if value is None:
                raise Unsupported(f"{where}: constant {name!r} needs a parameter whose value is known at prepare")
            if not isinstance(value, np.ndarray) or value.dtype.kind not in _NUMERIC:
                kind = f"an array of {value.dtype}" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"
                raise CustomKernelError(f"{where}: constant {name!r} is {kind}; a constant is a numpy array of "
                                        f"numbers or bools, uploaded as its bytes")
            values[name] = np.ascontiguousarray(value)
        return values

    def _kernel(self, rt: Runtime, spec: KernelSpec, defines: Mapping[str, Any] | None, where: str) -> Any:
        mode = element_mode(rt, spec.dtype)
        text = _call(self.source, "source", where, spec, mode) if callable(self.source) else self.source
        if not isinstance(text, str):
            raise CustomKernelError(f"{where}: its source function {_name(self.source)} returned a "
                                    f"{type(text).__name__}, not the kernel's OpenCL C text")
        full, options = with_header(text, defines), (*element_options(rt, spec.dtype), ARG_INFO_OPTION)
        try:
            program = rt.program(full, options)
        except HalfwayError as e:
            raise CustomKernelError(f"{where} failed to build for {spec.dtype.name} ({mode} mode): {e}") from e
        names = program.get_info(cl.program_info.KERNEL_NAMES).split(";")
        if self.name not in names:
            raise CustomKernelError(f"{where}: the source defines no kernel of that name; it defines "
                                    f"{', '.join(sorted(n for n in names if n))}")
        return rt.kernel(full, self.name, options)


def opencl_kernel(op_type: str, source: str | SourceFn, name: str, *, args: Iterable[Arg], global_size: WorkSize,
                  local_size: WorkSize | None = None, constants: Mapping[str, ConstantFn] | None = None,
                  defines: Defines | None = None, dtypes: Iterable[Any] = (DType.float32, DType.float16),
                  override: bool = False) -> CustomKernel:
    """Register an OpenCL kernel written in OpenCL C for ``op_type``'s ``dtypes``.

    Args:
        op_type: the op (its schema registered first, so that slots and attrs are checked now).
        source: the kernel's OpenCL C, or a function of (spec, mode) rendering it per dtype and
            mode (see the module docstring); the common header comes before it.
        name: the ``__kernel`` function to launch.
        args: its arguments in order: ``Input``/``Output`` buffers, ``Attr`` and ``Size`` scalars,
            ``Constant`` buffers, numpy scalars.
        global_size: 1 to 3 work sizes, or a function of the spec giving them (a size of 0 runs
            nothing).
        local_size: the work-group sizes (same count), or a function giving them; None lets
            the driver choose.
        constants: name -> function of the spec computing the constant's host array once at
            prepare (from ``spec.constant(slot)``: the op's parameters).
        defines: ``#define``s before the header, or a function of the spec giving them.
        dtypes: the op dtypes to register the kernel for.
        override: replace a kernel registered for the same (op, "opencl", dtype).

    Returns:
        The registered factory.

    Raises:
        CustomKernelError: an argument names a slot, attr or constant the op does not have.
        SchemaError: a kernel is registered already and ``override`` is False.
    """
    kernel = CustomKernel(op_type, source, name, tuple(args), global_size, local_size, dict(constants or {}), defines)
    _check_callables(kernel)
    _check_names(kernel)
    register_kernel(op_type, "opencl", dtypes, override=override)(kernel)
    return kernel


def _check_callables(kernel: CustomKernel) -> None:
    """CustomKernelError for a source that is neither text nor a function, defines that are
    neither a mapping nor a function, or a constant that is no function."""
    where = f"op {kernel.op_type}: OpenCL kernel {kernel.name!r}"
    if not isinstance(kernel.source, str) and not callable(kernel.source):
        raise CustomKernelError(f"{where}: source must be OpenCL C text or a function of (spec, mode) returning "
                                f"it, got a {type(kernel.source).__name__}")
    if kernel.defines is not None and not callable(kernel.defines) and not isinstance(kernel.defines, Mapping):
        raise CustomKernelError(f"{where}: defines must be a mapping or a function giving one, got "
                                f"{type(kernel.defines).__name__}")
    for name, make in kernel.constants.items():
        if not callable(make):
            raise CustomKernelError(f"{where}: constant {name!r} must be a function of the spec, got "
                                    f"{type(make).__name__}")


def _check_names(kernel: CustomKernel) -> None:
    where = f"op {kernel.op_type}: OpenCL kernel {kernel.name!r}"
    for arg in kernel.args:
        if isinstance(arg, Constant) and arg.name not in kernel.constants:
            raise CustomKernelError(f"{where}: argument {arg} names no constant; constants: "
                                    f"{', '.join(kernel.constants) or 'none'}")
        if not isinstance(arg, (Input, Output, Attr, Size, Constant, np.generic)):
            raise CustomKernelError(f"{where}: argument {arg!r} is none of Input, Output, Attr, Size, Constant "
                                    f"or a numpy scalar")
        if isinstance(arg, Attr) and not _numeric_type(arg.dtype):
            raise CustomKernelError(f"{where}: argument {arg} has dtype {arg.dtype!r}; give a numpy number type "
                                    f"(np.float32 for a float parameter, np.int32 for an int)")
    if not has_schema(kernel.op_type):
        return
    schema = get_schema(kernel.op_type)
    slots = {Input: [s.name for s in schema.inputs], Output: [s.name for s in schema.outputs],
             Size: [s.name for s in (*schema.inputs, *schema.outputs)], Attr: [a.name for a in schema.attrs]}
    for arg in kernel.args:
        known = slots.get(type(arg))
        named = arg.name if isinstance(arg, Attr) else getattr(arg, "slot", None)
        if known is not None and named not in known:
            raise CustomKernelError(f"{where}: argument {arg} names no {type(arg).__name__.lower()} slot or attr "
                                    f"of {kernel.op_type}; it has {', '.join(known) or 'none'}")


def _numeric_type(dtype: object) -> bool:
    try:
        return np.dtype(dtype).kind in _NUMERIC  # type: ignore[call-overload]
    except TypeError:
        return False


def _work_size(size: WorkSize, spec: KernelSpec, what: str, where: str) -> tuple[int, ...]:
    values = _call(size, what, where, spec) if callable(size) else size
    try:
        sizes = tuple(operator.index(v) for v in values)
    except TypeError:
        sizes = ()
    if not 1 <= len(sizes) <= 3 or min(sizes) < 0:
        raise CustomKernelError(f"{where}: {what} must be 1 to 3 non-negative integers, got {values!r}")
    return sizes


def _defines(defines: Defines | None, spec: KernelSpec, where: str) -> Mapping[str, Any] | None:
    """The ``#define``s, checked: names that are C identifiers, values of one line."""
    values = _call(defines, "defines", where, spec) if callable(defines) else defines
    if values is None:
        return None
    if not isinstance(values, Mapping):
        raise CustomKernelError(f"{where}: its defines function {_name(defines)} returned a {type(values).__name__}, "
                                f"not a mapping of names to values")
    for name, value in values.items():
        if not isinstance(name, str) or not name.isidentifier() or "\n" in str(value):
            raise CustomKernelError(f"{where}: define {name!r} = {value!r} is not a C identifier and a one-line value")
    return values


def _call(fn: Callable[..., Any], what: str, where: str, *args: Any) -> Any:
    """``fn(*args)``, a user's function: an exception other than a HalfwayError becomes a
    CustomKernelError naming the op, the kernel and the function."""
    try:
        return fn(*args)
    except HalfwayError:
        raise
    except Exception as e:
        raise CustomKernelError(f"{where}: its {what} function {_name(fn)} raised {type(e).__name__}: {e}") from e


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def _check_covers(gws: tuple[int, ...], lws: tuple[int, ...] | None, spec: KernelSpec, values: Sequence[Any],
                  where: str) -> None:
    """CustomKernelError for a global size that runs no work-item while an output the kernel
    writes holds elements (they would keep whatever the buffer held), or one of more work-items
    than a kernel's int indices reach."""
    rounded = gws if lws is None else tuple(-(-g // l) * l for g, l in zip(gws, lws))
    if math.prod(rounded) > MAX_WORK_ITEMS:
        raise CustomKernelError(f"{where}: global_size {list(rounded)} holds {math.prod(rounded):,} work-items; "
                                f"at most {MAX_WORK_ITEMS:,} are launched (the global ids int indices reach)")
    if 0 not in gws:
        return
    for value in values:
        if isinstance(value, _Buffer) and value.output:
            slot, index = spec.output_keys[value.position]
            if numel(spec.output(slot, index)) > 0:
                raise CustomKernelError(f"{where}: global_size {list(gws)} runs no work-item, but output {slot} holds "
                                        f"{numel(spec.output(slot, index))} elements that nothing would write")


class _Buffer(NamedTuple):
    """An Input or Output argument resolved for one op: its position among the op's tensors."""

    output: bool
    position: int


def _resolve(arg: Arg, spec: KernelSpec, where: str) -> Any:
    """What ``arg`` is for this op: a ``_Buffer``, a Constant, or a scalar."""
    if isinstance(arg, (Input, Output)):
        keys = spec.input_keys if isinstance(arg, Input) else spec.output_keys
        if (arg.slot, arg.index) not in keys:
            raise CustomKernelError(f"{where}: argument {arg} is missing: the op has "
                                    f"{', '.join(f'{s}[{i}]' for s, i in keys) or 'none'}")
        return _Buffer(isinstance(arg, Output), keys.index((arg.slot, arg.index)))
    if isinstance(arg, Attr):
        if arg.name not in spec.attrs:
            raise CustomKernelError(f"{where}: argument {arg} is missing: attrs are {', '.join(spec.attrs) or 'none'}")
        value = spec.attrs[arg.name]
        if not isinstance(value, (bool, int, float, np.number)):
            raise CustomKernelError(f"{where}: argument {arg} is {value!r}, not a scalar")
        return _scalar(value, np.dtype(arg.dtype), arg, where)
    if isinstance(arg, Size):
        infos = spec.inputs.get(arg.slot) or spec.outputs.get(arg.slot) or ()
        if arg.index >= len(infos):
            raise CustomKernelError(f"{where}: argument {arg} is missing: the op has no such input or output")
        shape = infos[arg.index].shape
        if arg.axis is not None and not -len(shape) <= arg.axis < len(shape):
            raise CustomKernelError(f"{where}: argument {arg} is out of range for shape {list(shape)}")
        return _scalar(math.prod(shape) if arg.axis is None else shape[arg.axis], np.dtype(np.int32), arg, where)
    return arg


def _scalar(value: bool | int | float | np.number, dtype: np.dtype, arg: Arg, where: str) -> np.generic:
    """``value`` as a ``dtype`` scalar; CustomKernelError where that would change it (a fraction
    or an out-of-range number as an integer)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise CustomKernelError(f"{where}: argument {arg} is {value!r}, which a {dtype} cannot hold")
        if not info.min <= int(value) <= info.max:
            raise CustomKernelError(f"{where}: argument {arg} is {value!r}, beyond the range of {dtype}")
    return dtype.type(value)


def _device_arg(value: Any, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None],
                stored: Mapping[str, np.ndarray]) -> tuple[Any, np.dtype | None]:
    """(what is passed, the element type of a buffer; None for a scalar or an absent output).
    A constant's buffer is not made yet: it is passed as its Constant."""
    if isinstance(value, _Buffer):
        array = (outs if value.output else ins)[value.position]
        return (None, None) if array is None else (array.buffer, array.dtype)
    if isinstance(value, Constant):
        return value, stored[value.name].dtype
    return value, None


def _check_types(kernel: Any, args: Sequence[Arg], bound: Sequence[tuple[Any, np.dtype | None]], where: str) -> None:
    """CustomKernelError for an argument of another type than the kernel's parameter."""
    params = kernel_params(kernel)
    for arg, param, (value, element) in zip(args, params or (), bound):
        problem = param_problem(param, value, element)
        if problem is not None:
            raise CustomKernelError(f"{where}: argument {arg!r} is {problem}")


def _stored(value: np.ndarray, rt: Runtime, dtype: DType) -> np.ndarray:
    """A floating constant in the element type T of a float op; others as they are."""
    if np.issubdtype(value.dtype, np.floating) and dtype in (DType.float32, DType.float16):
        return value.astype(rt.storage(dtype), copy=False)
    return value


def _check_fits(rt: Runtime, kernel: Any, lws: tuple[int, ...] | None, given: int, args: Sequence[Arg],
                where: str) -> None:
    if kernel.num_args != given:
        raise CustomKernelError(f"{where} takes {kernel.num_args} arguments but args gives {given}: "
                                f"{_describe(args)}")
    if lws is None:
        return
    if math.prod(lws) > rt.caps.max_work_group_size:
        raise CustomKernelError(f"{where}: local_size {list(lws)} holds {math.prod(lws)} work-items; "
                                f"{rt.caps.name} allows at most {rt.caps.max_work_group_size} per work-group")
    for dim, (size, most) in enumerate(zip(lws, rt.caps.max_work_item_sizes)):
        if size > most:
            raise CustomKernelError(f"{where}: local_size {list(lws)} is {size} along dim {dim}; {rt.caps.name} "
                                    f"allows at most {list(rt.caps.max_work_item_sizes)}")


def _describe(args: Sequence[Arg]) -> str:
    return "(" + ", ".join(repr(a) for a in args) + ")"
