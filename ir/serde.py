"""The one module that touches protobuf messages: Program <-> ``ProgramDesc``.

Round trips are exact: a ``.pdmodel`` parsed into a Program and serialized again gives the same
bytes. Optional proto2 fields are written when they were present on load (each object's
``explicit`` set) or differ from their default; vars of kinds the IR does not model keep their
``VarType`` bytes in ``Variable.type_extra``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, EncodeError

from ..proto import framework_pb2 as pb
from .attrs import Attr, AttrType
from .block import Block
from .dtypes import DType, VarKind
from .errors import HalfwayError, SerdeError
from .operator import Operator
from .program import Program
from .variable import Variable

__all__ = ["program_from_bytes", "program_to_bytes", "program_from_proto", "program_to_proto",
           "tensor_desc_from_bytes", "tensor_desc_to_bytes"]

_VAR_FLAGS = ("persistable", "need_check_feed", "is_parameter", "stop_gradient")

_ATTR_FIELD = {
    AttrType.INT: "i", AttrType.FLOAT: "f", AttrType.STRING: "s", AttrType.INTS: "ints",
    AttrType.FLOATS: "floats", AttrType.STRINGS: "strings", AttrType.BOOLEAN: "b",
    AttrType.BOOLEANS: "bools", AttrType.BLOCK: "block_idx", AttrType.LONG: "l",
    AttrType.BLOCKS: "blocks_idx", AttrType.LONGS: "longs", AttrType.FLOAT64S: "float64s",
    AttrType.VAR: "var_name", AttrType.VARS: "vars_name", AttrType.FLOAT64: "float64",
    AttrType.SCALAR: "scalar", AttrType.SCALARS: "scalars",
}
_VAR_ATTR_FIELD = {AttrType.INT: "i", AttrType.STRING: "s", AttrType.INTS: "ints"}
_TENSOR_FIELD = {VarKind.DENSE_TENSOR: "dense_tensor", VarKind.DENSE_TENSOR_ARRAY: "tensor_array",
                 VarKind.SELECTED_ROWS: "selected_rows"}


# -- bytes -------------------------------------------------------------------------------------------
def program_from_bytes(data: bytes, *, source: str = "<bytes>") -> Program:
    """Parse a serialized ProgramDesc. Raises SerdeError naming ``source`` on any defect."""
    desc = pb.ProgramDesc()
    try:
        desc.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError, TypeError) as e:
        raise SerdeError(f"{source}: not a valid ProgramDesc ({_reason(e)})") from None
    _require_initialized(desc, source)
    _require_utf8(desc, source)
    try:
        return program_from_proto(desc)
    except HalfwayError as e:
        raise SerdeError(f"{source}: {e}") from None


def program_to_bytes(program: Program) -> bytes:
    try:
        return bytes(program_to_proto(program).SerializeToString())
    except EncodeError as e:
        raise SerdeError(f"cannot serialize program: {_reason(e)}") from None


def _require_initialized(desc: Any, source: str) -> None:
    """protobuf's parser accepts messages missing required fields (or holding unknown enum
    values, which proto2 moves aside): reject them as Paddle does."""
    if not desc.IsInitialized():
        missing = desc.FindInitializationErrors()
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise SerdeError(f"{source}: required fields missing or invalid: {shown}")


def _is_repeated(field: FieldDescriptor) -> bool:
    """protobuf 6.31+ has ``is_repeated`` and protobuf 7 dropped ``label``; older ones have only ``label``."""
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated if repeated is not None else field.label == FieldDescriptor.LABEL_REPEATED)


def _require_utf8(desc: Any, source: str) -> None:
    """upb hands back a proto2 string field that is not valid UTF-8 as ``bytes``; the IR holds
    ``str`` and protobuf refuses to write such bytes again, so reject them on load."""
    for field, value in desc.ListFields():
        values = value if _is_repeated(field) else (value,)
        if field.type == FieldDescriptor.TYPE_STRING and any(isinstance(v, bytes) for v in values):
            raise SerdeError(f"{source}: a {field.full_name} string is not valid UTF-8")
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for sub in values:
                _require_utf8(sub, source)


def _reason(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) < 300 else text[:300] + "..."


# -- from proto --------------------------------------------------------------------------------------
def program_from_proto(desc: pb.ProgramDesc) -> Program:
    if not desc.blocks:
        raise SerdeError("the program has no blocks")
    program = Program()
    program.blocks = []
    for position, block_desc in enumerate(desc.blocks):
        if block_desc.idx != position:
            raise SerdeError(f"block #{position} says its idx is {block_desc.idx}")
        program.blocks.append(_block_from_proto(program, block_desc))
    if desc.HasField("version"):
        program.version = desc.version.version
    if desc.HasField("op_version_map"):
        program.op_version_map = {p.op_name: p.op_version.version for p in desc.op_version_map.pair}
    return program


def _block_from_proto(program: Program, desc: pb.BlockDesc) -> Block:
    block = Block(program, desc.idx, desc.parent_idx)
    block.forward_block_idx = desc.forward_block_idx
    block.explicit = frozenset({"forward_block_idx"} if desc.HasField("forward_block_idx") else ())
    for var_desc in desc.vars:
        if block.has_var(var_desc.name):
            raise SerdeError(f"block {desc.idx} declares var {var_desc.name!r} twice")
        block.add_var(_var_from_proto(var_desc))
    for i, op_desc in enumerate(desc.ops):
        try:
            block.insert_op(i, _op_from_proto(op_desc))
        except HalfwayError as e:
            raise SerdeError(f"block {desc.idx}, op #{i} {op_desc.type}: {e}") from None
    return block


def _var_from_proto(desc: pb.VarDesc) -> Variable:
    try:
        var = _typed_var(desc.name, desc.type)
    except HalfwayError as e:
        raise SerdeError(f"var {desc.name!r}: {e}") from None
    for flag in _VAR_FLAGS:
        setattr(var, flag, getattr(desc, flag))
    var.explicit = frozenset(f for f in _VAR_FLAGS if desc.HasField(f)) | var.explicit
    var.attrs = [(a.name, AttrType(a.type), _var_attr_value(a)) for a in desc.attrs]
    return var


def _typed_var(name: str, vtype: pb.VarType) -> Variable:
    kind = _known_kind(vtype.type)
    field = _TENSOR_FIELD.get(kind) if kind is not None else None
    if kind is None or field is None or not _only_field(vtype, field):
        var = Variable(name, kind=kind if kind is not None and not kind.has_tensor else VarKind.RAW)
        var.type_extra = vtype.SerializeToString()
        return var
    sub = getattr(vtype, field)
    tensor = sub if kind is VarKind.SELECTED_ROWS else sub.tensor
    var = Variable(name, kind=kind, dtype=DType(tensor.data_type), shape=list(tensor.dims))
    if kind is not VarKind.SELECTED_ROWS:
        var.lod_level = sub.legacy_lod_level
        if sub.HasField("legacy_lod_level"):
            var.explicit = frozenset({"lod_level"})
    return var


def _known_kind(value: int) -> VarKind | None:
    try:
        return VarKind(value)
    except ValueError:
        return None


def _only_field(vtype: pb.VarType, field: str) -> bool:
    """True when ``vtype`` sets ``field`` and no other sub-message the IR would drop."""
    present = [f.name for f, _ in vtype.ListFields()]
    return present == ["type", field] and _dtype_known(vtype, field)


def _dtype_known(vtype: pb.VarType, field: str) -> bool:
    sub = getattr(vtype, field)
    tensor = sub if field == "selected_rows" else sub.tensor
    return tensor.data_type in DType._value2member_map_


def _var_attr_value(attr: pb.VarDesc.Attr) -> Any:
    field = _VAR_ATTR_FIELD.get(AttrType(attr.type))
    if field is None:
        return None
    value = getattr(attr, field)
    return tuple(value) if field == "ints" else value


def _op_from_proto(desc: pb.OpDesc) -> Operator:
    op = Operator(desc.type,
                  {v.parameter: list(v.arguments) for v in desc.inputs},
                  {v.parameter: list(v.arguments) for v in desc.outputs})
    if len(op._inputs) != len(desc.inputs) or len(op._outputs) != len(desc.outputs):
        raise SerdeError("a slot is listed twice")
    for attr in desc.attrs:
        op._set_typed_attr(attr.name, _attr_from_proto(attr))
    op.is_target = desc.is_target
    op.explicit = frozenset({"is_target"} if desc.HasField("is_target") else ())
    return op


def _attr_from_proto(attr: pb.OpDesc.Attr) -> Attr:
    attr_type = AttrType(attr.type)
    value = getattr(attr, _ATTR_FIELD[attr_type])
    if attr_type is AttrType.SCALAR:
        value = _scalar_from_proto(value)
    elif attr_type is AttrType.SCALARS:
        value = tuple(_scalar_from_proto(s) for s in value)
    elif attr_type.is_list:
        value = tuple(value)
    return Attr(attr_type, value)


def _scalar_from_proto(s: pb.Scalar) -> bool | int | float | complex:
    if s.type == pb.Scalar.BOOLEAN:
        return bool(s.b)
    if s.type == pb.Scalar.LONG:
        return int(s.i)
    if s.type == pb.Scalar.FLOAT64:
        return float(s.r)
    return complex(s.c.r, s.c.i)


# -- to proto ----------------------------------------------------------------------------------------
def program_to_proto(program: Program) -> pb.ProgramDesc:
    desc = pb.ProgramDesc()
    for block in program.blocks:
        _block_to_proto(block, desc.blocks.add())
    if program.version is not None:
        desc.version.version = program.version
    if program.op_version_map is not None:
        desc.op_version_map.SetInParent()
        for name, version in program.op_version_map.items():
            pair = desc.op_version_map.pair.add()
            pair.op_name = name
            pair.op_version.version = version
    return desc


def _block_to_proto(block: Block, desc: pb.BlockDesc) -> None:
    desc.idx = block.idx
    desc.parent_idx = block.parent_idx
    for var in block.vars.values():
        _var_to_proto(var, desc.vars.add())
    for op in block.ops:
        _op_to_proto(op, desc.ops.add())
    if "forward_block_idx" in block.explicit or block.forward_block_idx != -1:
        desc.forward_block_idx = block.forward_block_idx


def _var_to_proto(var: Variable, desc: pb.VarDesc) -> None:
    desc.name = var.name
    if var.type_extra is not None:
        desc.type.ParseFromString(var.type_extra)
    else:
        _var_type_to_proto(var, desc.type)
    for flag in _VAR_FLAGS:
        value = getattr(var, flag)
        if flag in var.explicit or value:
            setattr(desc, flag, value)
    for name, attr_type, value in var.attrs:
        attr = desc.attrs.add()
        attr.name, attr.type = name, attr_type
        field = _VAR_ATTR_FIELD.get(attr_type)
        if field == "ints":
            attr.ints.extend(value)
        elif field is not None:
            setattr(attr, field, value)


def _var_type_to_proto(var: Variable, vtype: pb.VarType) -> None:
    vtype.type = var.kind
    field = _TENSOR_FIELD.get(var.kind)
    if field is None:
        return
    sub = getattr(vtype, field)
    tensor = sub if var.kind is VarKind.SELECTED_ROWS else sub.tensor
    tensor.data_type = var.dtype if var.dtype is not None else DType.float32
    tensor.dims.extend(var.shape or ())
    if var.kind is not VarKind.SELECTED_ROWS and ("lod_level" in var.explicit or var.lod_level):
        sub.legacy_lod_level = var.lod_level


def _op_to_proto(op: Operator, desc: pb.OpDesc) -> None:
    for slot, names in op._inputs.items():
        entry = desc.inputs.add()
        entry.parameter = slot
        entry.arguments.extend(names)
    for slot, names in op._outputs.items():
        entry = desc.outputs.add()
        entry.parameter = slot
        entry.arguments.extend(names)
    desc.type = op.type
    for name, attr in op._attrs.items():
        _attr_to_proto(name, attr, desc.attrs.add())
    if "is_target" in op.explicit or op.is_target:
        desc.is_target = op.is_target


def _attr_to_proto(name: str, attr: Attr, desc: pb.OpDesc.Attr) -> None:
    desc.name = name
    desc.type = attr.type
    field = _ATTR_FIELD[attr.type]
    if attr.type is AttrType.SCALAR:
        _scalar_to_proto(attr.value, desc.scalar)
    elif attr.type is AttrType.SCALARS:
        for value in attr.value:
            _scalar_to_proto(value, desc.scalars.add())
    elif attr.type.is_list:
        getattr(desc, field).extend(attr.value)
    else:
        setattr(desc, field, attr.value)


def _scalar_to_proto(value: bool | int | float | complex, s: pb.Scalar) -> None:
    if isinstance(value, bool):
        s.type, s.b = pb.Scalar.BOOLEAN, value
    elif isinstance(value, int):
        s.type, s.i = pb.Scalar.LONG, value
    elif isinstance(value, float):
        s.type, s.r = pb.Scalar.FLOAT64, value
    else:
        s.type = pb.Scalar.COMPLEX128
        s.c.r, s.c.i = value.real, value.imag


# -- tensor descs (for the parameter file) ------------------------------------------------------------
def tensor_desc_to_bytes(dtype: DType, dims: tuple[int, ...]) -> bytes:
    desc = pb.VarType.TensorDesc()
    desc.data_type = dtype
    desc.dims.extend(dims)
    return bytes(desc.SerializeToString())


def tensor_desc_from_bytes(data: bytes) -> tuple[DType, tuple[int, ...]]:
    """Parse a ``VarType.TensorDesc``; SerdeError if it is malformed or of an unknown dtype."""
    desc = pb.VarType.TensorDesc()
    try:
        desc.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError) as e:
        raise SerdeError(f"bad tensor description ({_reason(e)})") from None
    _require_initialized(desc, "tensor description")
    if desc.data_type not in DType._value2member_map_:
        raise SerdeError(f"tensor description has data type {desc.data_type}, which is not an element type")
    return DType(desc.data_type), tuple(desc.dims)
