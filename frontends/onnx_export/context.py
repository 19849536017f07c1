"""What an exporter writes with: the ONNX nodes and constants of one graph in the making, the
program's vars (shapes, dtypes, parameter values) and the options (opset, contrib ops).

ONNX values keep the names of the vars they hold; names the exporters make up (``temp``) are
unique against every var of the program and every name made before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.scope import Scope
from ...ir.variable import Variable

__all__ = ["ExportError", "UnsupportedExportError", "ExportContext", "CONTRIB_DOMAIN", "onnx_type"]

CONTRIB_DOMAIN = "com.microsoft"
"""ONNX Runtime's contrib ops' domain."""


class ExportError(HalfwayError):
    """A program that cannot be written as ONNX; the message names the op and var."""


class UnsupportedExportError(ExportError):
    """Ops with no ONNX form; ``op_types`` lists all of them."""

    def __init__(self, message: str, op_types: Sequence[str]) -> None:
        super().__init__(message)
        self.op_types = list(op_types)


def onnx_type(dtype: DType) -> int:
    """The ONNX element type (``TensorProto.FLOAT``, ...) of a halfway dtype."""
    return helper.np_dtype_to_tensor_dtype(dtype.numpy)


class ExportContext:
    """The graph being written for ``program``'s global block."""

    def __init__(self, program: Program, scope: Scope, opset: int, contrib: bool) -> None:
        self.block = program.global_block()
        self.scope = scope
        self.opset = opset
        self.contrib = contrib
        self.nodes: list[NodeProto] = []
        self.initializers: dict[str, TensorProto] = {}
        self.op: Operator | None = None
        self._taken = {name for block in program.blocks for name in block.vars}

    # -- errors --------------------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        """Raise ExportError naming the op being written."""
        where = f"op #{self.op.index} {self.op.describe()}: " if self.op is not None else ""
        raise ExportError(f"{where}{message}")

    # -- the program's vars --------------------------------------------------------------------
    def var(self, name: str) -> Variable:
        return self.block.find_var(name)

    def shape(self, name: str) -> tuple[int, ...]:
        """The var's dims, -1 where unknown."""
        return self.var(name).tensor_shape

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def dtype(self, name: str) -> DType:
        return self.var(name).tensor_dtype

    def value(self, name: str) -> np.ndarray | None:
        """A parameter's value (a persistable var the scope holds), else None."""
        var = self.var(name)
        return self.scope.find(name) if var.persistable else None

    # -- writing -------------------------------------------------------------------------------
    def temp(self, base: str) -> str:
        """A fresh value name starting with ``base``."""
        name, i = base, 0
        while name in self._taken:
            i += 1
            name = f"{base}_{i}"
        self._taken.add(name)
        return name

    def node(self, op_type: str, inputs: Iterable[str], outputs: Sequence[str] | None = None, *,
             domain: str = "", **attrs: Any) -> str:
        """Append a node; its outputs default to one fresh name. Returns the first output."""
        if outputs is None:
            outputs = [self.temp(f"{self._base()}.{op_type}")]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=self.temp(
            f"{self._base()}/{op_type}"), domain=domain or None, **attrs))
        return outputs[0]

    def _base(self) -> str:
        return self.op.output_names()[0] if self.op is not None and self.op.output_names() else "const"

    def const(self, value: Any, dtype: Any = None, base: str = "const") -> str:
        """An initializer holding ``value`` (as ``dtype`` when given)."""
        array = np.asarray(value, dtype=dtype)
        name = self.temp(f"{self._base()}.{base}")
        self.initializers[name] = numpy_helper.from_array(array, name)
        return name

    def ints(self, values: Iterable[int]) -> str:
        """A 1-D int64 initializer (shapes, axes, pads)."""
        return self.const([int(v) for v in values], np.int64, "ints")

    def scalar(self, value: float, like: str) -> str:
        """A 0-D initializer of the dtype of var ``like``."""
        return self.const(value, self.dtype(like).numpy, "scalar")

    def cast(self, name: str, dtype: DType, out: str | None = None) -> str:
        """``name`` as ``dtype``: itself when it is one already (and no ``out`` is asked for)."""
        if out is None and self.dtype(name) is dtype:
            return name
        return self.node("Cast", [name], [out] if out else None, to=onnx_type(dtype))

    def int64(self, name: str) -> str:
        """A shape or index tensor as ONNX wants it: int64."""
        return self.cast(name, DType.int64)
