"""The state of one ONNX graph import: the program being built, known constants, and the
helpers op converters use to read nodes and append halfway ops.

Values are of two kinds. *Constants* (initializers, ``Constant`` outputs, anything folded from
them) live in ``consts`` as numpy arrays; one becomes a parameter (a persistable var with its
value in the scope) only when an emitted op reads it. *Runtime* values are vars of the block,
with shapes and dtypes inferred by halfway's op schemas as ops are appended.

ONNX names are kept as var names; a name the program already uses (or ``feed``/``fetch``)
gets a fresh one, and ``names`` maps the ONNX name to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
from onnx import NodeProto, helper

from ...ir.block import Block
from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.infer import infer_new_op
from ...ir.limits import check_tensor_size
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.schema import TensorInfo
from ...ir.scope import Scope
from .tensors import tensor_array

__all__ = ["ConversionError", "UnsupportedOpError", "GraphContext", "node_label", "RESERVED_NAMES"]

RESERVED_NAMES = frozenset({"feed", "fetch"})
"""Names of Paddle's feed/fetch holder vars, never given to a value."""


class ConversionError(HalfwayError):
    """An ONNX model that cannot be imported: a malformed graph, an unfoldable dynamic shape,
    an attr value halfway does not support. The message names the file and the node."""


class UnsupportedOpError(ConversionError):
    """The model uses ops halfway has no converter for; the message lists every one of them."""


def node_label(node: NodeProto) -> str:
    """``node 'conv1' (Conv)`` — how errors name a node (its first output when it has no name)."""
    name = node.name or (f"<unnamed, output {node.output[0]!r}>" if node.output else "<unnamed>")
    return f"node {name!r} ({node.op_type})"


class GraphContext:
    """What converters see while one graph is imported."""

    def __init__(self, source: str, opset: int, max_bytes: int) -> None:
        self.source = source
        self.opset = opset
        self.max_bytes = max_bytes
        self.program = Program()
        self.block: Block = self.program.global_block()
        self.scope = Scope()
        self.consts: dict[str, np.ndarray] = {}
        self.names: dict[str, str] = {}
        self.used: set[str] = set()
        self.node: NodeProto | None = None
        self._shapes: dict[str, str] = {}
        self.known_dims: dict[str, tuple[int, ...]] = {}
        """Dims ONNX's own shape inference knows for values (-1 = unknown), which refine
        halfway's where a run-time shape hides a static dim (a hidden size behind a Reshape)."""
        self.convert_node: Callable[[NodeProto], None] | None = None
        """Imports one node as the importer does (folding or converting it): what a converter of
        a node holding a subgraph (Scan) calls for the subgraph's nodes."""

    # -- errors ----------------------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        """Raise a ConversionError naming the file and the node being converted."""
        where = node_label(self.node) if self.node is not None else "graph"
        raise ConversionError(f"{self.source}: {where}: {message}")

    # -- reading nodes ---------------------------------------------------------------------------
    def attrs(self, node: NodeProto) -> dict[str, Any]:
        """The node's attrs as Python values (strings decoded, tensors as numpy arrays)."""
        values = {}
        for attr in node.attribute:
            value = helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = value.decode()
            elif attr.type == attr.TENSOR:
                value = tensor_array(value, f"attr {attr.name!r}")
            values[attr.name] = value
        return values

    def has(self, name: str) -> bool:
        """Whether ``name`` names a value (the empty name is ONNX's absent optional input)."""
        return bool(name) and (name in self.consts or name in self.names)

    def is_used(self, node: NodeProto, index: int) -> bool:
        """Whether output ``index`` of ``node`` is read by a node or is a graph output."""
        return index < len(node.output) and node.output[index] in self.used

    def is_const(self, name: str) -> bool:
        return bool(name) and name in self.consts

    def const(self, name: str, what: str) -> np.ndarray:
        """The constant value of input ``name``; a ConversionError if it is computed at run time."""
        if name in self.consts:
            return self.consts[name]
        return self.fail(f"{what} ({name!r}) must be a constant, or computable from initializers and "
                         f"static shapes, but it depends on run-time values; dynamic {what} is not supported")

    def optional_const(self, node: NodeProto, index: int, what: str) -> np.ndarray | None:
        """The constant value of input ``index`` of ``node``, None when the input is absent."""
        if index >= len(node.input) or not node.input[index]:
            return None
        return self.const(node.input[index], what)

    def info(self, name: str) -> TensorInfo:
        """Shape (-1 = unknown) and dtype of a value, constant or not."""
        if name in self.consts:
            value = self.consts[name]
            return TensorInfo(value.shape, DType.from_any(value.dtype))
        var = self.block.var(self.names[name])
        return TensorInfo(var.shape or (), var.tensor_dtype)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.info(name).shape

    def static_shape(self, name: str, what: str) -> tuple[int, ...]:
        shape = self.shape(name)
        if any(d < 0 for d in shape):
            self.fail(f"{what} needs the static shape of {name!r}, which is {list(shape)} (-1 = unknown); "
                      f"give the model's inputs fixed shapes (input_shapes=...)")
        return shape

    def runtime_shape(self, name: str) -> str:
        """An int64 vector value holding the shape of ``name`` as it is at run time (a constant
        when every dim is known): the ``shape`` op, whose int32 is cast to ONNX's int64."""
        shape = self.shape(name)
        if all(d >= 0 for d in shape):
            return self.add_const(f"{name}.shape", np.array(shape, dtype=np.int64))
        if name not in self._shapes:
            dims, out = self.temp(f"{name}.shape32"), self.temp(f"{name}.shape")
            self.emit("shape", {"Input": name}, {"Out": dims})
            self.emit("cast", {"X": dims}, {"Out": out}, {"in_dtype": int(DType.int32), "out_dtype": int(DType.int64)})
            self._shapes[name] = out
        return self._shapes[name]

    def dims_value(self, dims: Sequence[int | tuple[str, int]], hint: str) -> str:
        """A 1-D int64 value of ``dims``: an int is itself, ``(name, axis)`` the run-time size of
        dim ``axis`` of value ``name``. Known runs are constants; the rest slices of
        ``runtime_shape``, joined by a concat (all of which fold when the program is prepared
        for given feed shapes)."""
        pieces: list[str] = []
        known: list[int] = []
        for dim in dims:
            if isinstance(dim, int):
                known.append(dim)
                continue
            if known:
                pieces.append(self.add_const(self.temp(hint), np.array(known, dtype=np.int64)))
                known = []
            piece = self.temp(hint)
            self.emit("slice", {"Input": self.runtime_shape(dim[0])}, {"Out": piece},
                      {"axes": [0], "starts": [dim[1]], "ends": [dim[1] + 1]})
            pieces.append(piece)
        if known or not pieces:
            pieces.append(self.add_const(self.temp(hint), np.array(known, dtype=np.int64)))
        if len(pieces) == 1:
            return pieces[0]
        out = self.temp(hint)
        self.emit("concat", {"X": pieces}, {"Out": out}, {"axis": 0})
        return out

    def dims_of(self, name: str) -> list[int | tuple[str, int]]:
        """The dims of value ``name`` for ``dims_value``: the known ones as ints, the others as
        ``(name, axis)``."""
        return [d if d >= 0 else (name, i) for i, d in enumerate(self.shape(name))]

    def reshape_to(self, value: str, dims: Sequence[int | tuple[str, int]], out: str) -> None:
        """Emit ``out`` = ``value`` reshaped to ``dims`` (as ``dims_value`` reads them): by attr
        when at most one dim is unknown (it becomes -1), else by a run-time shape tensor."""
        if sum(not isinstance(d, int) for d in dims) <= 1:
            self.emit("reshape2", {"X": value}, {"Out": out}, {"shape": [d if isinstance(d, int) else -1 for d in dims]})
        else:
            self.emit("reshape2", {"X": value, "Shape": self.dims_value(dims, f"{out}.shape")}, {"Out": out})

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        """``axis`` in [0, rank), counting negative values from the end; ConversionError when it
        is outside [-rank, rank)."""
        if not -rank <= axis < rank:
            self.fail(f"{what} {axis} is out of range for rank {rank} (expected {-rank} to {rank - 1})")
        return axis % rank

    def check_size(self, shape: Sequence[int], dtype: np.dtype | type) -> None:
        """A ConversionError naming the node when a tensor of ``shape`` would exceed the limit."""
        try:
            check_tensor_size(shape, dtype, "an output", self.max_bytes)
        except HalfwayError as e:
            self.fail(str(e))

    # -- building --------------------------------------------------------------------------------
    def var(self, name: str) -> str:
        """The var holding value ``name``, making a parameter of a constant on first use."""
        if name in self.names:
            return self.names[name]
        if name not in self.consts:
            return self.fail(f"input {name!r} is not computed before this node")
        value = self.consts[name]
        var_name = self.fresh(name)
        self.block.create_var(var_name, dtype=DType.from_any(value.dtype), shape=value.shape, persistable=True)
        self.scope.set(var_name, np.asarray(value, order="C"))
        self.names[name] = var_name
        return var_name

    def add_const(self, hint: str, value: np.ndarray) -> str:
        """A new constant holding ``value`` (computed by a converter); returns its name."""
        name = hint if not (self.has(hint) or self.block.has_var(hint)) else self.temp(hint)
        self.consts[name] = value
        return name

    def fresh(self, hint: str) -> str:
        """``hint`` when no var or value has that name yet, else a unique name built from it."""
        taken = hint in RESERVED_NAMES or self.block.has_var(hint) or hint in self.names.values()
        return self.program.unique_name(hint) if taken or not hint else hint

    def declare_input(self, name: str, shape: Sequence[int], dtype: DType) -> str:
        var_name = self.fresh(name)
        self.block.create_var(var_name, dtype=dtype, shape=shape, need_check_feed=True)
        self.names[name] = var_name
        return var_name

    def emit(self, op_type: str, inputs: Mapping[str, str | Sequence[str]],
             outputs: Mapping[str, str | Sequence[str]], attrs: Mapping[str, Any] | None = None, *,
             inplace: Mapping[str, str] | None = None) -> Operator:
        """Append ``op_type`` reading the values ``inputs`` (ONNX names; constants become
        parameters) and writing ``outputs`` (ONNX names of new values), with ``attrs`` over the
        schema's defaults. Output shapes and dtypes come from the schema's inference.
        ``inplace`` maps further output slots to vars the op updates in place (batch_norm's
        MeanOut is its Mean)."""
        in_names = {slot: [self.var(n) for n in _listed(names)] for slot, names in inputs.items() if _listed(names)}
        try:
            op, ctx = infer_new_op(self.block, self.scope, op_type, in_names, attrs or {})
        except HalfwayError as e:
            self.fail(f"as {op_type}: {e}")
        for slot, names in outputs.items():
            made = []
            for i, name in enumerate(_listed(names)):
                info = ctx.outputs[slot][i]
                self.check_size(info.shape, info.dtype.numpy if info.dtype is not None else np.float32)
                var_name = self.fresh(name)
                self.block.create_var(var_name, dtype=info.dtype, shape=self._refined(name, info.shape))
                self.names[name] = var_name
                made.append(var_name)
            op.set_output(slot, made)
        for slot, var_name in (inplace or {}).items():
            op.set_output(slot, [var_name])
        self.block.insert_op(len(self.block.ops), op)
        return op

    def _refined(self, name: str, shape: Sequence[int]) -> tuple[int, ...]:
        """``shape`` with its unknown dims taken from ``known_dims`` where that has the same rank."""
        known = self.known_dims.get(name)
        if known is None or len(known) != len(shape):
            return tuple(shape)
        return tuple(k if d < 0 else d for d, k in zip(shape, known))

    def temp(self, hint: str) -> str:
        """A fresh ONNX-side name for an intermediate value of a multi-op conversion."""
        while True:
            name = self.program.unique_name(f"{hint}.tmp")
            if not self.has(name):
                return name


def _listed(names: str | Sequence[str]) -> list[str]:
    return [names] if isinstance(names, str) else [n for n in names if n]

