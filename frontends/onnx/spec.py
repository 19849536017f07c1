"""What the ONNX spec requires of a node, checked before it is converted or folded: the number
of inputs and outputs its op's schema allows, its required attrs, and the type of every attr
the schema declares. ONNX Runtime refuses such nodes; a converter would otherwise read them as
something else (a one-input Add as a copy)."""

from __future__ import annotations

import onnx.defs
from onnx import AttributeProto, NodeProto

from halfway.ir.errors import HalfwayError

__all__ = ["SpecError", "check_node"]


class SpecError(HalfwayError):
    """A node that breaks its op's ONNX spec; the caller names the file and the node."""


def check_node(node: NodeProto, opset: int) -> None:
    """SpecError when ``node`` (of the default domain) breaks its op's schema at ``opset``."""
    if node.domain not in ("", "ai.onnx"):
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, opset)
    except onnx.defs.SchemaError:
        return
    _check_count("inputs", len(node.input), schema.min_input, schema.max_input, node.op_type, opset)
    _check_count("outputs", len(node.output), schema.min_output, schema.max_output, node.op_type, opset)
    given = {attr.name: attr for attr in node.attribute}
    missing = sorted(name for name, spec in schema.attributes.items() if spec.required and name not in given)
    if missing:
        raise SpecError(f"{node.op_type}-{opset} requires the attrs {missing}")
    for name, attr in given.items():
        spec = schema.attributes.get(name)
        if spec is not None and int(attr.type) != int(spec.type):
            raise SpecError(f"attr {name!r} is {AttributeProto.AttributeType.Name(attr.type)}, but "
                            f"{node.op_type}-{opset} declares it {AttributeProto.AttributeType.Name(int(spec.type))}")


def _check_count(what: str, count: int, least: int, most: int, op_type: str, opset: int) -> None:
    if not least <= count <= most:
        allowed = f"{least}" if least == most else f"{least} to {most}" if most < 2**31 - 1 else f"at least {least}"
        raise SpecError(f"{op_type}-{opset} takes {allowed} {what}, the node has {count}")
