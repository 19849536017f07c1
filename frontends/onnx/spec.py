"""What the ONNX spec requires of a node, checked before it is converted or folded: the number
of inputs and outputs its op's schema allows, its required inputs given, its required attrs,
the type of every attr the schema declares, the element types of its inputs (each one its type
constraint allows, and one type per constraint across the inputs that share it), and attrs that
index its input's dims (``perm`` a permutation, a softmax ``axis`` within the rank). ONNX Runtime
refuses such nodes; a converter would otherwise read them as something else (a one-input Add as
a copy, an int32 weight as float, a perm of -1 as the last dim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import SupportsInt, cast

import onnx.defs
from onnx import AttributeProto, NodeProto, TensorProto, helper

from ...ir.errors import HalfwayError

__all__ = ["SpecError", "check_node"]

_AXIS_WITHIN_RANK = frozenset({"Softmax", "LogSoftmax", "Hardmax"})
"""Ops whose ``axis`` the spec bounds by their input's rank, [-r, r-1], in every opset."""


class SpecError(HalfwayError):
    """A node that breaks its op's ONNX spec; the caller names the file and the node."""


def check_node(node: NodeProto, opset: int, types: Sequence[int] = (), rank: int | None = None) -> None:
    """SpecError when ``node`` (of the default domain) breaks its op's schema at ``opset``.

    ``types`` are the ONNX element types of its inputs where they are known (0: unknown), and
    ``rank`` the rank of its first input (None: unknown).
    """
    if node.domain not in ("", "ai.onnx"):
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, opset)
    except onnx.defs.SchemaError:
        return
    _check_count("inputs", len(node.input), schema.min_input, schema.max_input, node.op_type, opset)
    _check_count("outputs", len(node.output), schema.min_output, schema.max_output, node.op_type, opset)
    _check_required_inputs(node, schema, opset)
    given = {attr.name: attr for attr in node.attribute}
    missing = sorted(name for name, spec in schema.attributes.items() if spec.required and name not in given)
    if missing:
        raise SpecError(f"{node.op_type}-{opset} requires the attrs {missing}")
    for name, attr in given.items():
        spec = schema.attributes.get(name)
        if spec is not None and int(attr.type) != _code(spec.type):
            raise SpecError(f"attr {name!r} is {AttributeProto.AttributeType.Name(attr.type)}, but "
                            f"{node.op_type}-{opset} declares it {AttributeProto.AttributeType.Name(_code(spec.type))}")
    _check_types(node, schema, opset, types)
    if rank is not None:
        _check_dim_attrs(node, given, rank)


def _check_required_inputs(node: NodeProto, schema: onnx.defs.OpSchema, opset: int) -> None:
    """SpecError for an input the schema requires that the node leaves empty (``""`` marks an
    optional input that is not given)."""
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    for index, name in enumerate(node.input):
        formal = schema.inputs[min(index, len(schema.inputs) - 1)] if schema.inputs else None
        if not name and formal is not None and formal.option != optional:
            raise SpecError(f"input {index} ({formal.name}) of {node.op_type}-{opset} is required, but the node "
                            f"gives none ('')")


def _check_types(node: NodeProto, schema: onnx.defs.OpSchema, opset: int, types: Sequence[int]) -> None:
    """Each known input type within its constraint's allowed types; one type per constraint
    across the inputs bound to it (a variadic input declared heterogeneous aside)."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    bound: dict[str, tuple[str, str]] = {}
    for index, elem_type in enumerate(types[:len(node.input)]):
        if not elem_type or not schema.inputs:
            continue
        formal = schema.inputs[min(index, len(schema.inputs) - 1)]
        given = f"tensor({TensorProto.DataType.Name(elem_type).lower()})"
        if given not in allowed.get(formal.type_str, {formal.type_str}):
            raise SpecError(f"input {node.input[index]!r} ({formal.name}) is {given}, which {node.op_type}-{opset} "
                            f"does not allow there: {', '.join(sorted(allowed.get(formal.type_str, {formal.type_str})))}")
        if formal.type_str not in allowed or (formal.option == formal.option.Variadic and not formal.is_homogeneous):
            continue
        first, first_type = bound.setdefault(formal.type_str, (node.input[index], given))
        if first_type != given:
            raise SpecError(f"inputs {first!r} ({first_type}) and {node.input[index]!r} ({given}) share the type "
                            f"{formal.type_str} of {node.op_type}-{opset}, so they must have one element type")


def _check_dim_attrs(node: NodeProto, given: dict[str, AttributeProto], rank: int) -> None:
    """A Transpose ``perm`` that is a permutation of the dims; a softmax ``axis`` in [-r, r-1]."""
    if node.op_type == "Transpose" and "perm" in given:
        perm = list(helper.get_attribute_value(given["perm"]))
        if sorted(perm) != list(range(rank)):
            raise SpecError(f"Transpose perm {perm} is not a permutation of the {rank} dims 0..{rank - 1}")
    if node.op_type in _AXIS_WITHIN_RANK and "axis" in given:
        axis = helper.get_attribute_value(given["axis"])
        if not -max(rank, 1) <= axis < max(rank, 1):
            raise SpecError(f"{node.op_type} axis {axis} is outside [{-max(rank, 1)}, {max(rank, 1) - 1}] for an input "
                            f"of rank {rank}")


def _code(attr_type: onnx.defs.OpSchema.AttrType) -> int:
    """A schema attr type's ``AttributeProto`` code (onnx's stubs leave out the int() its pybind11
    enum has)."""
    return int(cast(SupportsInt, attr_type))


def _check_count(what: str, count: int, least: int, most: int, op_type: str, opset: int) -> None:
    if not least <= count <= most:
        allowed = f"{least}" if least == most else f"{least} to {most}" if most < 2**31 - 1 else f"at least {least}"
        raise SpecError(f"{op_type}-{opset} takes {allowed} {what}, the node has {count}")
