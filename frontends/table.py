"""Tables keyed by op type that a decorator fills: the importer's converters, the exporter's
exporters."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["registrar"]

F = TypeVar("F", bound=Callable[..., None])


def registrar(table: dict[str, F], duplicate: str) -> Callable[..., Callable[[F], F]]:
    """A decorator factory: ``@register(*op_types)`` enters the decorated function in ``table``
    under each op type. ``duplicate`` (formatted with the op type) is the ValueError's message
    for an op type already in the table."""

    def register_as(*op_types: str) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for op_type in op_types:
                if op_type in table:
                    raise ValueError(duplicate.format(op_type))
                table[op_type] = fn
            return fn

        return register

    return register_as
