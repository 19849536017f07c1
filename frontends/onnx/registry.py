"""The table of op converters: ONNX op type -> a function appending the equivalent halfway ops.

A converter is ``fn(ctx, node, attrs)``: ``ctx`` the GraphContext, ``attrs`` the node's attrs
as Python values. It reads its inputs through ``ctx`` (``ctx.const`` for inputs that must be
constants) and calls ``ctx.emit`` so that the node's outputs become values of the context.

A converter declares the halfway ops it makes of an ONNX op (``makes``: its main ops, not the
reshapes and casts around them), so ``halfway.frontends.onnx_names`` tells an ONNX user, for a
halfway op type, the ONNX ops it stands for (``matmul_v2``: MatMul, Gemm). It reads this table as
``scripts/make_onnx_names.py`` writes it out (``halfway.frontends.onnx_made_of``), without
importing onnx; a test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from onnx import NodeProto

from ..table import registrar
from .context import GraphContext

__all__ = ["Converter", "CONVERTERS", "MADE_OF", "converts", "supported_ops"]

Converter = Callable[[GraphContext, NodeProto, dict[str, Any]], None]
CONVERTERS: dict[str, Converter] = {}
MADE_OF: dict[str, list[str]] = {}
"""halfway op type -> the ONNX ops whose converters make it, in registration order."""

Makes = str | Sequence[str] | Mapping[str, str | Sequence[str]]
_register = registrar(CONVERTERS, "ONNX op {} already has a converter")


def converts(*op_types: str, makes: Makes = ()) -> Callable[[Converter], Converter]:
    """``@converts(*op_types, makes=...)``: register the decorated function for ``op_types``;
    ``makes`` names the halfway ops it makes of each: one op type or several for all of them,
    or a mapping ONNX op -> op type(s)."""
    made = makes if isinstance(makes, Mapping) else dict.fromkeys(op_types, makes)
    for onnx_type, op_types_made in made.items():
        for op_type in (op_types_made,) if isinstance(op_types_made, str) else op_types_made:
            MADE_OF.setdefault(op_type, []).append(onnx_type)
    return _register(*op_types)


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) the importer converts."""
    return sorted(CONVERTERS)
