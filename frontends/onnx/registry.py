"""The table of op converters: ONNX op type -> a function appending the equivalent halfway ops.

A converter is ``fn(ctx, node, attrs)``: ``ctx`` the GraphContext, ``attrs`` the node's attrs
as Python values. It reads its inputs through ``ctx`` (``ctx.const`` for inputs that must be
constants) and calls ``ctx.emit`` so that the node's outputs become values of the context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onnx import NodeProto

from halfway.frontends.onnx.context import GraphContext

__all__ = ["Converter", "CONVERTERS", "converts", "supported_ops"]

Converter = Callable[[GraphContext, NodeProto, dict[str, Any]], None]
CONVERTERS: dict[str, Converter] = {}


def converts(*op_types: str) -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of ``op_types``."""

    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"ONNX op {op_type} already has a converter")
            CONVERTERS[op_type] = fn
        return fn

    return register


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) the importer converts."""
    return sorted(CONVERTERS)
