"""Op schemas: the one definition of every op type — slots, attrs, and shape/dtype inference.

The verifier, the builder, passes, frontends and kernels all read the same table. Users add
custom ops with ``register_op``. Lookup is by exact op type; a miss lists near names.

Writing a schema::

    register_op(OpSchema(
        "relu", inputs=[Slot("X")], outputs=[Slot("Out")],
        infer=same_as("X"), inplace={"X": "Out"},
    ))

Inference functions take an ``InferContext`` and call ``ctx.set_output``. Shapes use -1 for a
dim unknown before run time; inference must carry -1 through rather than guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, NoReturn

import numpy as np
from attrs import field, frozen

from .attrs import AttrType, normalize
from .dtypes import DType
from .errors import HalfwayError, IRError, SchemaError

__all__ = [
    "RANDOM_OPS", "Slot", "AttrSpec", "OpSchema", "TensorInfo", "InferContext", "InferError", "REQUIRED",
    "register_op", "get_schema", "has_schema", "registered_ops", "schema_default",
    "declared_attr_type", "same_as", "compatible_attr_types", "InferFn",
]

RANDOM_OPS = frozenset({"uniform_random", "gaussian_random", "truncated_gaussian_random", "randint", "randperm",
                        "bernoulli", "multinomial", "sampling_id", "dropout"})
"""Op types whose outputs may differ from run to run, never computed ahead of a run (dropout:
in training mode; identity removal handles inference dropout)."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Default of an attr the op must carry."""


@frozen
class Slot:
    """An input or output slot. ``duplicable``: holds any number of vars (concat's X).
    ``dispensable``: may be absent or empty (conv2d's Bias)."""

    name: str
    duplicable: bool = False
    dispensable: bool = False


@frozen
class AttrSpec:
    name: str
    type: AttrType
    default: Any = REQUIRED
    choices: tuple[Any, ...] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


class TensorInfo(NamedTuple):
    """What inference knows of a tensor: its dims (-1 = unknown) and element type."""

    shape: tuple[int, ...]
    dtype: DType


class InferError(HalfwayError):
    """Shape or dtype inference rejected an op's inputs or attrs."""


InferFn = Callable[["InferContext"], None]


def _slots(slots: Iterable[Slot]) -> tuple[Slot, ...]:
    return tuple(slots)


def _attr_specs(specs: Iterable[AttrSpec]) -> tuple[AttrSpec, ...]:
    return tuple(specs)


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


@frozen
class OpSchema:
    """The definition of an op type.

    ``dtype_slots``: the input slots whose dtype is the op's dtype (its kernel's); defaults to the
    first input slot. ``keep_dtype_slots``: inputs that keep their own dtype under a float16
    kernel (batch_norm's statistics, index and shape tensors). ``inplace``: input slot -> output
    slot pairs a kernel may compute in place (writing the output into the input's memory when
    nothing reads the input afterwards). ``views``: output slot -> input slot pairs whose output
    may share the input's memory (reshapes, transposes, slices, split pieces, outputs that are
    an input itself): the memory plan keeps such an input's buffer alive while the view lives.
    """

    type: str
    inputs: tuple[Slot, ...] = field(converter=_slots, default=())
    outputs: tuple[Slot, ...] = field(converter=_slots, default=())
    attrs: tuple[AttrSpec, ...] = field(converter=_attr_specs, default=())
    infer: InferFn | None = None
    dtype_slots: tuple[str, ...] | None = field(default=None)
    keep_dtype_slots: tuple[str, ...] = field(converter=_names, default=())
    inplace: Mapping[str, str] = field(factory=dict)
    views: Mapping[str, str] = field(factory=dict)
    doc: str = ""

    def __attrs_post_init__(self) -> None:
        names = [s.name for s in self.inputs]
        for slot in (self.dtype_slots or ()) + self.keep_dtype_slots:
            if slot not in names:
                raise SchemaError(f"schema {self.type}: {slot!r} is not an input slot (has {names})")
        outs = [s.name for s in self.outputs]
        for source, target in [*self.inplace.items(), *((i, o) for o, i in self.views.items())]:
            if source not in names or target not in outs:
                raise SchemaError(f"schema {self.type}: {source!r} -> {target!r} must pair an input slot "
                                  f"(has {names}) with an output slot (has {outs})")

    @property
    def decisive_slots(self) -> tuple[str, ...]:
        """The slots whose dtype decides the op's dtype."""
        if self.dtype_slots is not None:
            return self.dtype_slots
        return (self.inputs[0].name,) if self.inputs else ()

    def input_slot(self, name: str) -> Slot | None:
        return next((s for s in self.inputs if s.name == name), None)

    def output_slot(self, name: str) -> Slot | None:
        return next((s for s in self.outputs if s.name == name), None)

    def attr_spec(self, name: str) -> AttrSpec | None:
        return next((a for a in self.attrs if a.name == name), None)

    def defaults(self) -> dict[str, Any]:
        return {a.name: a.default for a in self.attrs if not a.required}

    def resolve_attrs(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Declared attrs with ``given`` values over the defaults (SchemaError if one is missing)."""
        values = self.defaults()
        values.update({k: v for k, v in given.items() if self.attr_spec(k) is not None})
        missing = [a.name for a in self.attrs if a.required and a.name not in values]
        if missing:
            raise SchemaError(f"op {self.type} needs attr(s) {', '.join(missing)}")
        return values


_REGISTRY: dict[str, OpSchema] = {}


def register_op(schema: OpSchema, *, override: bool = False) -> OpSchema:
    """Add ``schema`` to the registry; a second schema for one type needs ``override=True``."""
    if schema.type in _REGISTRY and not override:
        raise SchemaError(f"op {schema.type!r} is already registered; pass override=True to replace it")
    for spec in schema.attrs:
        if not spec.required:
            normalize(spec.type, spec.default)
    _REGISTRY[schema.type] = schema
    return schema


def get_schema(op_type: str) -> OpSchema:
    try:
        return _REGISTRY[op_type]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(op_type, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise SchemaError(f"unknown op type {op_type!r}{hint} (register a schema with "
                          f"halfway.ir.schema.register_op; {len(_REGISTRY)} ops are registered)") from None


def has_schema(op_type: str) -> bool:
    return op_type in _REGISTRY


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)


def schema_default(op_type: str, name: str) -> Any:
    """The default of attr ``name`` of ``op_type`` (IRError if it has none)."""
    spec = get_schema(op_type).attr_spec(name) if has_schema(op_type) else None
    if spec is None or spec.required:
        raise IRError(f"op {op_type} has no attr {name!r} and its schema gives no default")
    return normalize(spec.type, spec.default)


def declared_attr_type(op_type: str, name: str) -> AttrType | None:
    spec = get_schema(op_type).attr_spec(name) if has_schema(op_type) else None
    return spec.type if spec is not None else None


_COMPATIBLE = [{AttrType.INT, AttrType.LONG}, {AttrType.FLOAT, AttrType.FLOAT64},
               {AttrType.INTS, AttrType.LONGS}, {AttrType.FLOATS, AttrType.FLOAT64S}]


def compatible_attr_types(declared: AttrType, actual: AttrType) -> bool:
    """Whether an attr stored as ``actual`` can stand for one declared ``declared``
    (Paddle writes some int attrs as LONG and some float attrs as FLOAT64)."""
    return declared == actual or any({declared, actual} <= group for group in _COMPATIBLE)


class InferContext:
    """What an inference function sees: input tensors by slot, attrs with defaults applied,
    and (where known) constant input values. It collects outputs by slot."""

    def __init__(self, schema: OpSchema, inputs: Mapping[str, list[TensorInfo]], attr_values: Mapping[str, Any],
                 values: Mapping[str, list[np.ndarray | None]] | None = None) -> None:
        self.schema = schema
        self._inputs = inputs
        self._attrs = schema.resolve_attrs(attr_values)
        self._values = values or {}
        self.outputs: dict[str, list[TensorInfo]] = {}
        for spec in schema.attrs:
            if spec.choices is not None and self.attr(spec.name) not in spec.choices:
                self.fail(f"attr {spec.name} = {self._attrs[spec.name]!r} is not one of "
                          f"{', '.join(map(repr, spec.choices))}")

    @property
    def op_type(self) -> str:
        return self.schema.type

    def has_input(self, slot: str) -> bool:
        return bool(self._inputs.get(slot))

    def input(self, slot: str, index: int = 0) -> TensorInfo:
        items = self._inputs.get(slot, [])
        if index >= len(items):
            self.fail(f"input slot {slot!r} needs at least {index + 1} var(s), has {len(items)}")
        return items[index]

    def inputs(self, slot: str) -> list[TensorInfo]:
        return list(self._inputs.get(slot, []))

    def input_value(self, slot: str, index: int = 0) -> np.ndarray | None:
        """The constant value of an input when known (a parameter or a folded constant)."""
        values = self._values.get(slot, [])
        return values[index] if index < len(values) else None

    def attr(self, name: str) -> Any:
        spec = self.schema.attr_spec(name)
        if spec is None or name not in self._attrs:
            self.fail(f"has no attr {name!r} in its schema")
        try:
            return normalize(spec.type, self._attrs[name])
        except IRError:
            self.fail(f"attr {name!r} = {self._attrs[name]!r} is not a valid {spec.type.name}")

    def set_output(self, slot: str, shape: Iterable[int], dtype: DType, index: int = 0) -> None:
        items = self.outputs.setdefault(slot, [])
        while len(items) <= index:
            items.append(None)  # type: ignore[arg-type]
        items[index] = TensorInfo(tuple(int(d) for d in shape), DType.from_any(dtype))

    def fail(self, message: str) -> NoReturn:
        raise InferError(f"{self.op_type}: {message}")

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)


def same_as(slot: str, *outputs: str) -> InferFn:
    """Inference for ops whose outputs (default: every output slot) mirror input ``slot``."""

    def infer(ctx: InferContext) -> None:
        x = ctx.input(slot)
        for out in outputs or [s.name for s in ctx.schema.outputs]:
            ctx.set_output(out, x.shape, x.dtype)

    return infer
