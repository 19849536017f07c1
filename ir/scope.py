"""Scopes: name -> numpy array, with child scopes for temporaries.

A lookup falls back to the parent scope, so a run can keep its activations in a child scope
over the parameters without touching them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from .errors import IRError

__all__ = ["Scope"]


class Scope:
    """Holds parameter and activation values by var name."""

    __slots__ = ("_values", "parent")

    def __init__(self, values: Mapping[str, np.ndarray] | None = None, parent: Scope | None = None) -> None:
        self._values: dict[str, np.ndarray] = {}
        self.parent = parent
        for name, value in (values or {}).items():
            self.set(name, value)

    def new_scope(self) -> Scope:
        """A child scope: reads fall through to this one, writes stay in the child."""
        return Scope(parent=self)

    def set(self, name: str, value: np.ndarray) -> None:
        if not isinstance(value, np.ndarray):
            raise IRError(f"scope value for {name!r} must be a numpy array, got {type(value).__name__}")
        self._values[name] = value

    def get(self, name: str) -> np.ndarray:
        """The value of ``name`` here or in an ancestor (IRError if none holds it)."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope._values:
                return scope._values[name]
            scope = scope.parent
        raise IRError(f"scope holds no value for {name!r}")

    def find(self, name: str) -> np.ndarray | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope._values:
                return scope._values[name]
            scope = scope.parent
        return None

    def remove(self, name: str) -> None:
        self._values.pop(name, None)

    def local_names(self) -> list[str]:
        return list(self._values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __getitem__(self, name: str) -> np.ndarray:
        return self.get(name)

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        self.set(name, value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Scope({len(self._values)} values{', with parent' if self.parent else ''})"
