"""The table of op exporters: halfway op type -> a function writing the equivalent ONNX nodes.

An exporter is ``fn(ctx, op)``: ``ctx`` the ExportContext, ``op`` the halfway Operator. It reads
the op's vars by name (an ONNX value keeps its var's name), writes nodes with ``ctx.node`` and
constants with ``ctx.const``, and must define every output the program reads.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.operator import Operator
from ..table import registrar
from .context import ExportContext

__all__ = ["Exporter", "EXPORTERS", "exports", "exportable_ops"]

Exporter = Callable[[ExportContext, Operator], None]
EXPORTERS: dict[str, Exporter] = {}


exports = registrar(EXPORTERS, "halfway op {} already has an ONNX exporter")
"""``@exports(*op_types)``: register the decorated function for ``op_types``."""


def exportable_ops() -> list[str]:
    """The halfway op types the exporter writes."""
    return sorted(EXPORTERS)
