"""An OpenCL kernel's parameters as the built program describes them (``clGetKernelArgInfo``;
the program is built with ``-cl-kernel-arg-info``), and the check that a value bound to each is
of its type: a buffer for a ``__global`` or ``__constant`` pointer to the buffer's element type
(or a vector of it), a numpy scalar of exactly the parameter's C type otherwise. A scalar of
another type is not converted by OpenCL: its bytes are read as the parameter's type (an int 1
read as a float is 1.4e-45).

Parameters of a type the program names by a typedef, and ``void`` pointers, are not checked; nor
is anything on a driver that keeps no argument info.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .runtime import cl

__all__ = ["KernelParam", "ARG_INFO_OPTION", "kernel_params", "param_problem"]

ARG_INFO_OPTION = "-cl-kernel-arg-info"
"""The build option that keeps the kernels' argument info."""

_C_NAMES: dict[str, type[np.generic]] = {"char": np.int8, "uchar": np.uint8, "unsigned char": np.uint8, "short": np.int16, "ushort": np.uint16,
            "unsigned short": np.uint16, "int": np.int32, "uint": np.uint32, "unsigned int": np.uint32,
            "long": np.int64, "ulong": np.uint64, "unsigned long": np.uint64, "half": np.float16,
            "float": np.float32, "double": np.float64}
"""OpenCL C scalar type names -> the numpy type of the same bits."""
_VECTOR_WIDTHS = ("2", "3", "4", "8", "16")


class KernelParam(NamedTuple):
    """One parameter of a kernel: its name, its C type's name and whether it is a pointer to
    global or constant memory."""

    name: str
    type_name: str
    buffer: bool

    def describe(self) -> str:
        return f"{'__global ' if self.buffer else ''}{self.type_name} {self.name}"


def kernel_params(kernel: Any) -> list[KernelParam] | None:
    """The parameters of ``kernel``; None when the driver keeps no argument info."""
    memory = (cl.kernel_arg_address_qualifier.GLOBAL, cl.kernel_arg_address_qualifier.CONSTANT)
    params = []
    try:
        for index in range(kernel.num_args):
            type_name = kernel.get_arg_info(index, cl.kernel_arg_info.TYPE_NAME).strip()
            qualifier = kernel.get_arg_info(index, cl.kernel_arg_info.ADDRESS_QUALIFIER)
            name = kernel.get_arg_info(index, cl.kernel_arg_info.NAME)
            params.append(KernelParam(name, type_name, qualifier in memory))
    except (cl.Error, cl.RuntimeError, cl.LogicError):
        return None
    return params


def param_problem(param: KernelParam, value: Any, element: np.dtype | None) -> str | None:
    """Why ``value`` does not fit ``param`` (None when it does). ``element`` is the element type
    of a buffer value (None for a scalar); a buffer of None (an output nobody reads) fits any
    pointer."""
    if element is not None or value is None:
        if not param.buffer:
            return f"a buffer bound to the {param.type_name} parameter {param.name!r}"
        pointee = _scalar_type(param.type_name.rstrip("*").strip())
        if element is not None and element.kind == "b":
            element = np.dtype(np.uint8)  # a bool is a uchar of 0 or 1
        if element is None or pointee is None or np.dtype(pointee) == element:
            return None
        return f"a buffer of {element} bound to the parameter {param.describe()!r}"
    if param.buffer:
        return f"a {type(value).__name__} scalar bound to the pointer parameter {param.describe()!r}"
    wanted = _C_NAMES.get(param.type_name)
    if wanted is None or np.dtype(type(value)) == np.dtype(wanted):
        return None
    return (f"a {np.dtype(type(value))} scalar bound to the {param.type_name} parameter {param.name!r}, which would "
            f"read its bytes as a {param.type_name}; give it as np.{np.dtype(wanted).name}")


def _scalar_type(name: str) -> type[np.generic] | None:
    """The numpy type of a scalar or vector C type name (``float4``: float32); None if unknown."""
    name = name.removeprefix("const ").removesuffix(" const")
    for width in _VECTOR_WIDTHS:
        if name.endswith(width) and name[:-len(width)] in _C_NAMES:
            return _C_NAMES[name[:-len(width)]]
    return _C_NAMES.get(name)
