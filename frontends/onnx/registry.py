"""The table of op converters: ONNX op type -> a function appending the equivalent halfway ops.

A converter is ``fn(ctx, node, attrs)``: ``ctx`` the GraphContext, ``attrs`` the node's attrs
as Python values. It reads its inputs through ``ctx`` (``ctx.const`` for inputs that must be
constants) and calls ``ctx.emit`` so that the node's outputs become values of the context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onnx import NodeProto

from ..table import registrar
from .context import GraphContext

__all__ = ["Converter", "CONVERTERS", "converts", "supported_ops"]

Converter = Callable[[GraphContext, NodeProto, dict[str, Any]], None]
CONVERTERS: dict[str, Converter] = {}


converts = registrar(CONVERTERS, "ONNX op {} already has a converter")
"""``@converts(*op_types)``: register the decorated function for ``op_types``."""


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) the importer converts."""
    return sorted(CONVERTERS)
