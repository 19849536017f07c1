"""Operators: an op type, named input/output slots holding var names, and typed attrs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .attrs import Attr, AttrType, infer_type, normalize
from .errors import IRError

if TYPE_CHECKING:
    from .block import Block
    from .variable import Variable

__all__ = ["Operator"]

Slots = dict[str, tuple[str, ...]]


class Operator:
    """An op. Slots map a slot name to var names (``{"Input": ("x",), "Filter": ("w",)}``).

    While the op is in a block, every slot edit goes through ``set_input``/``set_output`` so the
    block's use-def index stays current. Slots and attrs keep their order for byte-identical
    round trips. ``explicit`` names optional wire fields that were present when loaded.
    """

    __slots__ = ("block", "type", "_inputs", "_outputs", "_attrs", "is_target", "explicit")

    def __init__(self, type: str, inputs: Mapping[str, Any] | None = None,
                 outputs: Mapping[str, Any] | None = None, attrs: Mapping[str, Any] | None = None) -> None:
        if not isinstance(type, str) or not type:
            raise IRError(f"an op type must be a non-empty string, got {type!r}")
        self.block: Block | None = None
        self.type = type
        self._inputs: Slots = {slot: _names(type, slot, v) for slot, v in (inputs or {}).items()}
        self._outputs: Slots = {slot: _names(type, slot, v) for slot, v in (outputs or {}).items()}
        self._attrs: dict[str, Attr] = {}
        self.is_target = False
        self.explicit: frozenset[str] = frozenset()
        for name, value in (attrs or {}).items():
            self.set_attr(name, value)

    def copy(self) -> Operator:
        """A detached copy: the same type, slots, attrs and flags (slots and attrs hold immutable values)."""
        twin = Operator.__new__(Operator)
        twin.block = None
        twin.type = self.type
        twin._inputs, twin._outputs, twin._attrs = dict(self._inputs), dict(self._outputs), dict(self._attrs)
        twin.is_target, twin.explicit = self.is_target, self.explicit
        return twin

    # -- slots ---------------------------------------------------------------------------------
    @property
    def inputs(self) -> Mapping[str, tuple[str, ...]]:
        return dict(self._inputs)

    @property
    def outputs(self) -> Mapping[str, tuple[str, ...]]:
        return dict(self._outputs)

    def input(self, slot: str) -> tuple[str, ...]:
        """Var names in input ``slot`` (empty if the slot is absent)."""
        return self._inputs.get(slot, ())

    def output(self, slot: str) -> tuple[str, ...]:
        return self._outputs.get(slot, ())

    def input_names(self) -> list[str]:
        """All input var names, in slot order (a name appears once per place it is read)."""
        return [n for names in self._inputs.values() for n in names]

    def output_names(self) -> list[str]:
        return [n for names in self._outputs.values() for n in names]

    def input_var(self, slot: str, index: int = 0) -> Variable:
        """The var at ``slot[index]``, looked up through the block and its parents."""
        return self._var(self._inputs, "input", slot, index)

    def output_var(self, slot: str, index: int = 0) -> Variable:
        return self._var(self._outputs, "output", slot, index)

    def _var(self, slots: Slots, side: str, slot: str, index: int) -> Variable:
        names = slots.get(slot, ())
        if index >= len(names):
            raise IRError(f"op {self.type}: {side} slot {slot!r} has no entry #{index} (has {list(names)})")
        if self.block is None:
            raise IRError(f"op {self.type} is not in a block")
        return self.block.find_var(names[index])

    def set_input(self, slot: str, names: Iterable[str | Variable] | str | Variable) -> None:
        self._set(self._inputs, slot, _names(self.type, slot, names), is_output=False)

    def set_output(self, slot: str, names: Iterable[str | Variable] | str | Variable) -> None:
        self._set(self._outputs, slot, _names(self.type, slot, names), is_output=True)

    def _set(self, slots: Slots, slot: str, names: tuple[str, ...], *, is_output: bool) -> None:
        if self.block is not None:
            self.block._unindex(self, slots.get(slot, ()), slot, is_output)
        slots[slot] = names
        if self.block is not None:
            self.block._index(self, names, slot, is_output)

    def rename_input(self, old: str, new: str) -> int:
        """Replace every read of var ``old`` by ``new``; returns how many places changed."""
        return self._rename(self._inputs, old, new, is_output=False)

    def rename_output(self, old: str, new: str) -> int:
        return self._rename(self._outputs, old, new, is_output=True)

    def _rename(self, slots: Slots, old: str, new: str, *, is_output: bool) -> int:
        count = 0
        for slot, names in list(slots.items()):
            if old in names:
                count += names.count(old)
                self._set(slots, slot, tuple(new if n == old else n for n in names), is_output=is_output)
        return count

    # -- attrs ---------------------------------------------------------------------------------
    @property
    def attrs(self) -> Mapping[str, Any]:
        """Attr values by name (a copy; edit with ``set_attr``)."""
        return {name: attr.value for name, attr in self._attrs.items()}

    def typed_attrs(self) -> Mapping[str, Attr]:
        return dict(self._attrs)

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = ...) -> Any:
        """The value of attr ``name``: set value, else ``default``, else the schema default."""
        if name in self._attrs:
            return self._attrs[name].value
        if default is not ...:
            return default
        from .schema import schema_default

        return schema_default(self.type, name)

    def attr_type(self, name: str) -> AttrType:
        if name not in self._attrs:
            raise IRError(f"op {self.type} has no attr {name!r} (has {sorted(self._attrs)})")
        return self._attrs[name].type

    def set_attr(self, name: str, value: Any, attr_type: AttrType | None = None) -> None:
        """Set attr ``name``. Its type is, in order: ``attr_type``, the type it already has,
        the type the op's schema declares, or the type inferred from ``value``."""
        try:
            if attr_type is None:
                attr_type = self._attrs[name].type if name in self._attrs else self._declared_type(name, value)
            self._attrs[name] = Attr(AttrType(attr_type), normalize(AttrType(attr_type), value))
        except IRError as e:
            raise IRError(f"op {self.type}, attr {name!r}: {e}") from None

    def _declared_type(self, name: str, value: Any) -> AttrType:
        from .schema import declared_attr_type

        declared = declared_attr_type(self.type, name)
        return declared if declared is not None else infer_type(value)

    def remove_attr(self, name: str) -> None:
        self._attrs.pop(name, None)

    def _set_typed_attr(self, name: str, attr: Attr) -> None:
        """For the serde: store an already-normalised attr."""
        self._attrs[name] = attr

    def sub_blocks(self) -> tuple[int, ...]:
        """Indices of the blocks this op's BLOCK and BLOCKS attrs name, in attr order."""
        found: list[int] = []
        for attr in self._attrs.values():
            if attr.type is AttrType.BLOCK:
                found.append(attr.value)
            elif attr.type is AttrType.BLOCKS:
                found.extend(attr.value)
        return tuple(found)

    # -- misc ----------------------------------------------------------------------------------
    @property
    def index(self) -> int:
        """Position of the op in its block."""
        if self.block is None:
            raise IRError(f"op {self.type} is not in a block")
        return self.block.op_index(self)

    def describe(self) -> str:
        """``conv2d(Input=x, Filter=w) -> (Output=y)`` — for error messages."""
        ins = ", ".join(f"{s}={','.join(v)}" for s, v in self._inputs.items() if v)
        outs = ", ".join(f"{s}={','.join(v)}" for s, v in self._outputs.items() if v)
        return f"{self.type}({ins}) -> ({outs})"

    def __repr__(self) -> str:
        return f"Operator({self.describe()})"


def _names(op_type: str, slot: str, value: Any) -> tuple[str, ...]:
    from .variable import Variable

    items = [value] if isinstance(value, (str, Variable)) else list(value if value is not None else ())
    names = tuple(v.name if isinstance(v, Variable) else v for v in items)
    if not all(isinstance(n, str) and n for n in names):
        raise IRError(f"op {op_type}, slot {slot!r}: expected var names, got {value!r}")
    return names
