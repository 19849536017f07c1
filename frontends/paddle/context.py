"""The state of one PIR program import: the program being built, the constants, and the helpers
converters use to read PIR values and append legacy ops.

PIR values are numbered; a value becomes a var when an op writes it, named after the legacy op
and the value's id (``conv2d.36``); feeds keep their ``pd_op.data`` name, parameters theirs, and
fetched values the fetch name (``fetch_name_0``). ``pd_op.full`` / ``full_int_array`` results are
*constants* (numpy arrays): a converter folds them into attrs, and a constant read as a tensor
becomes a persistable var holding it. ``builtin.combine`` results are lists of value ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from ...ir import limits
from ...ir.block import Block
from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.infer import infer_new_op
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.scope import Scope
from .pir import MISSING, PirOp, PirType

__all__ = ["PirConversionError", "UnsupportedPirOpError", "PirContext"]


class PirConversionError(HalfwayError):
    """A PIR program that cannot be imported; the message names the file and the op."""


class UnsupportedPirOpError(PirConversionError):
    """The program uses ops halfway has no converter for; the message lists every one of them."""


class PirContext:
    """What converters see while one program is imported."""

    def __init__(self, source: str, types: Mapping[int, PirType], fetch_names: Mapping[int, str]) -> None:
        self.source = source
        self.program = Program()
        self.block: Block = self.program.global_block()
        self.scope = Scope()
        self.names: dict[int, str] = {}
        self.consts: dict[int, np.ndarray] = {}
        self.lists: dict[int, list[int]] = {}
        self.types = dict(types)
        """PIR's declared type of each value, which refines the dims halfway's inference leaves unknown."""
        self.fetch_names = dict(fetch_names)
        self.op: PirOp | None = None
        self.index = -1
        self._last_scratch = 0

    # -- errors ----------------------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        where = f"op #{self.index} {self.op.name}" if self.op is not None else "program"
        raise PirConversionError(f"{self.source}: {where}: {message}")

    def check_size(self, value: int, shape: Sequence[int], dtype: np.dtype) -> None:
        """A PirConversionError naming the op and ``value`` when a tensor of ``shape`` would be
        larger than the tensor size limit (``halfway.ir.limits``), before it is made."""
        try:
            limits.check_tensor_size(shape, dtype, f"value %{value}")
        except HalfwayError as e:
            self.fail(str(e))

    # -- reading ---------------------------------------------------------------------------------
    def given(self, value: int) -> bool:
        return value != MISSING

    def is_const(self, value: int) -> bool:
        return value in self.consts

    def const(self, value: int, what: str) -> np.ndarray:
        """The constant behind operand ``value``: a PirConversionError when it is computed."""
        if value in self.consts:
            return self.consts[value]
        return self.fail(f"{what} must be a constant (pd_op.full / full_int_array), but value %{value} is "
                         f"computed at run time")

    def ints(self, value: int, what: str) -> list[int]:
        return [int(v) for v in np.asarray(self.const(value, what)).reshape(-1)]

    def listed(self, value: int) -> list[int]:
        """The ids a ``builtin.combine`` result gathers (a plain value is a list of itself)."""
        return self.lists.get(value, [value])

    def var(self, value: int) -> str:
        """The var holding ``value``, making a persistable var of a constant on first use."""
        if value in self.names:
            return self.names[value]
        if value not in self.consts:
            return self.fail(f"operand %{value} is not computed before this op")
        array = np.ascontiguousarray(self.consts[value])
        name = self.program.unique_name("constant")
        self.block.create_var(name, dtype=DType.from_any(array.dtype), shape=array.shape, persistable=True)
        self.scope.set(name, array)
        self.names[value] = name
        return name

    # -- building --------------------------------------------------------------------------------
    def new_value(self) -> int:
        """A fresh value id (negative, never PIR's) for an intermediate a converter makes."""
        self._last_scratch -= 1
        return self._last_scratch

    def scratch(self, name: str) -> int:
        """A fresh value id for var ``name``, an intermediate a converter made."""
        value = self.new_value()
        self.names[value] = name
        return value

    def declare(self, value: int, name: str, var_type: PirType, **kwargs: Any) -> str:
        """A var named ``name`` of ``var_type`` for ``value`` (a feed or a parameter)."""
        self.block.create_var(name, dtype=var_type.dtype, shape=var_type.shape, **kwargs)
        self.names[value] = name
        return name

    def emit(self, op_type: str, inputs: Mapping[str, int | Sequence[int]],
             outputs: Mapping[str, int | None | Sequence[int]], attrs: Mapping[str, Any] | None = None, *,
             inplace: Mapping[str, int] | None = None) -> Operator:
        """Append ``op_type`` reading operands ``inputs`` (value ids; MISSING ones are left out) and
        writing ``outputs`` (value ids, or None for a scratch var). Output shapes and dtypes come from
        the schema's inference, unknown dims refined by PIR's declared type. ``inplace`` maps output
        slots to operands the op updates in place (batch_norm's MeanOut is its Mean)."""
        in_names = {slot: [self.var(v) for v in _ids(ids)] for slot, ids in inputs.items() if _ids(ids)}
        try:
            op, ctx = infer_new_op(self.block, self.scope, op_type, in_names, attrs or {})
        except HalfwayError as e:
            return self.fail(f"as {op_type}: {e}")
        for slot, values in outputs.items():
            made = []
            for info, value in zip(ctx.outputs[slot], [values] if values is None or isinstance(values, int)
                                   else values):
                name = self._out_name(op_type, value)
                self.block.create_var(name, dtype=info.dtype, shape=self._refined(value, info.shape))
                if value is not None:
                    self.names[value] = name
                made.append(name)
            op.set_output(slot, made)
        for slot, value in (inplace or {}).items():
            op.set_output(slot, [self.var(value)])
        self.block.insert_op(len(self.block.ops), op)
        return op

    def _out_name(self, op_type: str, value: int | None) -> str:
        if value is not None and value in self.fetch_names and not self.block.has_var(self.fetch_names[value]):
            return self.fetch_names[value]
        hint = f"{op_type}.{value}"
        if value is None or value < 0 or self.block.has_var(hint):
            return self.program.unique_name(op_type)
        return hint

    def _refined(self, value: int | None, shape: Sequence[int]) -> tuple[int, ...]:
        declared = self.types.get(value) if value is not None else None
        if declared is None or declared.dtype is None or len(declared.shape) != len(shape):
            return tuple(shape)
        return tuple(d if s < 0 else s for s, d in zip(shape, declared.shape))


def _ids(ids: int | Sequence[int]) -> list[int]:
    return [v for v in ([ids] if isinstance(ids, int) else ids) if v != MISSING]
