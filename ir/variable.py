"""Variables: named values of a block (tensors, parameters, the feed/fetch lists)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .attrs import AttrType
from .dtypes import DType, VarKind
from .errors import IRError

if TYPE_CHECKING:
    from .block import Block
    from .operator import Operator

__all__ = ["Variable", "Use", "DIM_NAMES"]

DIM_NAMES = "dim_names"
"""The var attr naming a feed's or a fetch's run-time dims, "" for the others: an ONNX graph
input's or output's dim_params. Dims of one name are one size (the ONNX model's contract), which
passes may rely on (a feed's). A STRING holding the names as a JSON list, as a Paddle VarDesc
attr holds no list of strings (so the names survive a save as .pdmodel)."""

Use = tuple["Operator", str, int]
"""Where a var appears in an op: (op, slot name, position in the slot)."""


class Variable:
    """A var of a block. Its use-def lives in the block: ``uses()`` and ``producers()`` ask it.

    ``shape`` uses -1 for a dim not known before run time. ``dtype`` and ``shape`` are ``None``
    for kinds that hold no tensor (the feed and fetch lists). ``attrs`` holds VarDesc attrs as
    (name, AttrType, value) triples. ``type_extra`` keeps the serialized VarType of kinds the
    IR does not model (readers, tuples, ...) so they survive a round trip. ``explicit`` names
    the optional wire fields that were present when loaded, so save writes them again.
    """

    __slots__ = ("block", "_name", "kind", "dtype", "shape", "lod_level", "persistable",
                 "need_check_feed", "is_parameter", "stop_gradient", "attrs", "type_extra", "explicit")

    def __init__(self, name: str, *, kind: VarKind = VarKind.DENSE_TENSOR, dtype: Any = DType.float32,
                 shape: Any = (), lod_level: int = 0, persistable: bool = False,
                 need_check_feed: bool = False, is_parameter: bool = False,
                 stop_gradient: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise IRError(f"a var name must be a non-empty string, got {name!r}")
        self.block: Block | None = None
        self._name = name
        self.kind = VarKind(kind)
        self.dtype: DType | None = DType.from_any(dtype) if self.kind.has_tensor and dtype is not None else None
        self.shape: tuple[int, ...] | None = _shape(name, shape) if self.kind.has_tensor else None
        self.lod_level = lod_level
        self.persistable = persistable
        self.need_check_feed = need_check_feed
        self.is_parameter = is_parameter
        self.stop_gradient = stop_gradient
        self.attrs: list[tuple[str, Any, Any]] = []
        self.type_extra: bytes | None = None
        self.explicit: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self._name

    def copy(self) -> Variable:
        """A detached copy: the same name, type, flags and attrs."""
        twin = Variable.__new__(Variable)
        for slot in Variable.__slots__:
            setattr(twin, slot, getattr(self, slot))
        twin.block = None
        twin.attrs = list(self.attrs)
        return twin

    def set_shape(self, shape: Any) -> None:
        self.shape = _shape(self._name, shape)

    def uses(self) -> tuple[Use, ...]:
        """The (op, slot, index) places that read this var, in program order."""
        return self._attached().uses(self._name)

    def producers(self) -> tuple[Use, ...]:
        """The (op, slot, index) places that write this var, in program order."""
        return self._attached().producers(self._name)

    def producer(self) -> Operator | None:
        """The single op writing this var, None if none; IRError if several do."""
        ops = {id(op): op for op, _, _ in self.producers()}
        if len(ops) > 1:
            kinds = ", ".join(op.type for op in ops.values())
            raise IRError(f"var {self._name!r} has several writers ({kinds}); use producers()")
        return next(iter(ops.values()), None)

    def _attached(self) -> Block:
        if self.block is None:
            raise IRError(f"var {self._name!r} is not in a block")
        return self.block

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        """``shape``, for a var that must hold a tensor (an IRError names one that does not)."""
        if self.shape is None:
            raise IRError(f"var {self._name!r} ({self.kind.name}) holds no tensor: it has no shape")
        return self.shape

    @property
    def tensor_dtype(self) -> DType:
        """``dtype``, for a var that must hold a tensor (an IRError names one that does not)."""
        if self.dtype is None:
            raise IRError(f"var {self._name!r} ({self.kind.name}) holds no tensor: it has no dtype")
        return self.dtype

    def dim_names(self) -> list[str]:
        """The names of the dims (``DIM_NAMES``), "" where none is recorded (all "" when the
        record is not a list of names of the var's rank)."""
        rank = len(self.shape or ())
        found = next((value for key, _, value in self.attrs if key == DIM_NAMES), None)
        try:
            names = json.loads(found) if isinstance(found, str) else None
        except ValueError:
            names = None
        if isinstance(names, list) and len(names) == rank and all(isinstance(n, str) for n in names):
            return names
        return [""] * rank

    def set_dim_names(self, names: Sequence[str]) -> None:
        """Record ``names`` (one per dim, "" for an unnamed one) as the dims' names."""
        if len(names) != len(self.shape or ()):
            raise IRError(f"var {self._name!r}: {len(names)} dim names for a rank-{len(self.shape or ())} shape")
        self.attrs = [a for a in self.attrs if a[0] != DIM_NAMES] + [(DIM_NAMES, AttrType.STRING, json.dumps(list(names)))]

    @property
    def numel(self) -> int | None:
        """Number of elements, or None if the shape has an unknown dim."""
        if self.shape is None or any(d < 0 for d in self.shape):
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        if not self.kind.has_tensor:
            return f"Variable({self._name!r}, {self.kind.name})"
        dtype = self.dtype.name if self.dtype is not None else "?"
        flag = ", persistable" if self.persistable else ""
        return f"Variable({self._name!r}, {dtype}{list(self.shape or ())}{flag})"


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise IRError(f"var {name!r}: shape must be a sequence of ints, got {shape!r}") from None
    if any(d < -1 for d in dims):
        raise IRError(f"var {name!r}: dims must be >= -1 (-1 = unknown), got {list(dims)}")
    return dims
