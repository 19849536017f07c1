"""A readable, diff-friendly text form of programs, and its parser.

::

    program version=3003001
    block 0 (parent -1):
      var image : float32[1, 3, 16, 16]
      var conv2d_0.w_0 : float32[8, 3, 3, 3] persistable
      var feed : FEED_MINIBATCH persistable
      (Out=%image) = feed(X=%feed) {col=0}
      (Output=%conv2d_0.tmp_0) = conv2d(Input=%image, Filter=%conv2d_0.w_0) {groups=1, strides=[1, 1]}
      (Out=%t) = sum(X=[%a, %b], Bias=[])

One line per var and per op, in declaration and program order; slots and attrs keep their stored
order (so the text diffs like the program). Var lines read ``var NAME : [KIND] DTYPE[DIMS] FLAGS
{VAR_ATTRS}``; op lines ``(OUT_SLOTS) = TYPE(IN_SLOTS) {ATTRS}``, where a slot holding one var is
``Slot=%name`` and any other count is a list ``Slot=[%a, %b]``. Names that are not plain
(``[A-Za-z0-9_.@/-]+``) are written as JSON strings.

Attrs are ``name=value`` when the literal says the type: an integer is INT, a number with a ``.``,
an exponent, ``inf`` or ``nan`` is FLOAT, a quoted string STRING, ``true``/``false`` BOOLEAN, and a
non-empty list of one of those the matching list type. Every other attr carries its type:
``op_role_var: strings = []``, ``sub_block: block = 1``, ``seed: long = 5``, ``s: scalar = complex(1.0, 2.0)``.
FLOAT values print as the shortest decimal that reads back to the same float32.

By default the text hides what is noise to a reader: the bookkeeping attrs Paddle puts on every
op (``BOOKKEEPING_ATTRS``), the ``op_version_map`` (a comment gives its size), and optional wire
fields that hold their default value. ``verbose=True`` writes all of it, and then
``program_from_text(program_to_text(p, verbose=True))`` serializes to the same bytes as ``p``, with
two documented limits: a NaN FLOAT attr reads back as the canonical NaN (its payload bits are
lost), and a var attr (VarDesc.Attr) of a type the IR does not model is kept by name and type only,
as the serde keeps it. Lines starting with ``#`` are comments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

import numpy as np

from .attrs import Attr, AttrType, normalize
from .block import Block
from .dtypes import DType, VarKind
from .errors import HalfwayError, SerdeError
from .operator import Operator
from .program import Program
from .variable import Variable

__all__ = ["program_to_text", "program_from_text", "op_to_text", "var_to_text", "BOOKKEEPING_ATTRS"]

BOOKKEEPING_ATTRS = frozenset({"op_callstack", "op_device", "op_namescope", "op_role", "op_role_var",
                               "with_quant_attr"})
"""Attrs Paddle attaches to every op for its own bookkeeping; hidden unless ``verbose``."""

_VAR_FLAGS = ("persistable", "need_check_feed", "is_parameter", "stop_gradient")
_PLAIN = re.compile(r"[A-Za-z0-9_.@/\-]+")
_NUMBER = re.compile(r"[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
# types whose literal implies them; every other attr type is written with ": type"
_IMPLIED = {AttrType.INT, AttrType.FLOAT, AttrType.STRING, AttrType.BOOLEAN}
_IMPLIED_LISTS = {AttrType.INTS, AttrType.FLOATS, AttrType.STRINGS, AttrType.BOOLEANS}
_TYPE_NAMES = {t: t.name.lower() for t in AttrType}
_TYPES_BY_NAME = {name: t for t, name in _TYPE_NAMES.items()}
_LIST_ELEMENT = {AttrType.INTS: AttrType.INT, AttrType.FLOATS: AttrType.FLOAT, AttrType.STRINGS: AttrType.STRING,
                 AttrType.BOOLEANS: AttrType.BOOLEAN, AttrType.BLOCKS: AttrType.BLOCK, AttrType.LONGS: AttrType.LONG,
                 AttrType.FLOAT64S: AttrType.FLOAT64, AttrType.VARS: AttrType.VAR,
                 AttrType.SCALARS: AttrType.SCALAR}


# -- writing -----------------------------------------------------------------------------------------
def program_to_text(program: Program, *, verbose: bool = False) -> str:
    """The text form of ``program`` (see the module docstring); ``verbose`` writes everything."""
    header = "program" if program.version is None else f"program version={program.version}"
    lines = [header]
    if program.op_version_map is not None:
        if verbose:
            pairs = ", ".join(f"{_name(k)}={v}" for k, v in program.op_version_map.items())
            lines.append(f"op_version_map {{{pairs}}}")
        else:
            lines.append(f"# op_version_map: {len(program.op_version_map)} entries (verbose=True shows them)")
    for block in program.blocks:
        lines.append("")
        lines.append(_block_header(block, verbose))
        lines.extend("  " + var_to_text(var, verbose=verbose) for var in block.vars.values())
        lines.extend("  " + op_to_text(op, verbose=verbose) for op in block.ops)
    return "\n".join(lines) + "\n"


def _block_header(block: Block, verbose: bool) -> str:
    forward = ""
    if block.forward_block_idx != -1 or (verbose and "forward_block_idx" in block.explicit):
        forward = f", forward_block {block.forward_block_idx}"
    return f"block {block.idx} (parent {block.parent_idx}{forward}):"


def var_to_text(var: Variable, *, verbose: bool = False) -> str:
    """``var NAME : DTYPE[DIMS] FLAGS {ATTRS}``, one line."""
    parts = [f"var {_name(var.name)} : {_var_type(var)}"]
    if var.lod_level or (verbose and "lod_level" in var.explicit):
        parts.append(f"lod_level={var.lod_level}")
    for flag in _VAR_FLAGS:
        value = getattr(var, flag)
        if value:
            parts.append(flag)
        elif verbose and flag in var.explicit:
            parts.append(f"{flag}=false")
    if verbose and var.type_extra is not None and var.type_extra != _plain_kind_bytes(var.kind):
        parts.append(f"vartype={json.dumps(var.type_extra.hex())}")
    if var.attrs:
        parts.append("{" + ", ".join(_attr_text(n, t, v) for n, t, v in var.attrs) + "}")
    return " ".join(parts)


def _var_type(var: Variable) -> str:
    if not var.kind.has_tensor:
        return var.kind.name
    dtype = var.dtype.name if var.dtype is not None else "?"
    tensor = f"{dtype}[{', '.join(map(str, var.shape or ()))}]"
    return tensor if var.kind is VarKind.DENSE_TENSOR else f"{var.kind.name} {tensor}"


def _plain_kind_bytes(kind: VarKind) -> bytes:
    """The VarType bytes of a kind with no sub-message (field 1, varint): what the serde writes
    for such a var when it has no ``type_extra``."""
    return bytes([0x08, int(kind)])


def op_to_text(op: Operator, *, verbose: bool = False) -> str:
    """``(OUT_SLOTS) = TYPE(IN_SLOTS) {ATTRS}``, one line; ``verbose`` adds bookkeeping attrs."""
    ins = _slots_text(op.inputs.items())
    outs = _slots_text(op.outputs.items())
    text = f"{_name(op.type)}({ins})"
    if op.outputs:
        text = f"({outs}) = {text}"
    attrs = [_attr_text(name, attr.type, attr.value) for name, attr in op.typed_attrs().items()
             if verbose or name not in BOOKKEEPING_ATTRS]
    if attrs:
        text += " {" + ", ".join(attrs) + "}"
    if op.is_target:
        text += " is_target"
    elif verbose and "is_target" in op.explicit:
        text += " is_target=false"
    return text


def _slots_text(slots: Iterable[tuple[str, tuple[str, ...]]]) -> str:
    parts = []
    for slot, names in slots:
        refs = [f"%{_name(n)}" for n in names]
        parts.append(f"{_name(slot)}={refs[0] if len(refs) == 1 else '[' + ', '.join(refs) + ']'}")
    return ", ".join(parts)


def _attr_text(name: str, attr_type: AttrType, value: Any) -> str:
    literal = "none" if value is None else _value_text(attr_type, value)
    implied = attr_type in _IMPLIED or (attr_type in _IMPLIED_LISTS and value)
    if implied and value is not None:
        return f"{_name(name)}={literal}"
    return f"{_name(name)}: {_TYPE_NAMES[attr_type]} = {literal}"


def _value_text(attr_type: AttrType, value: Any) -> str:
    element = _LIST_ELEMENT.get(attr_type)
    if element is not None:
        return "[" + ", ".join(_value_text(element, v) for v in value) + "]"
    if attr_type in (AttrType.STRING, AttrType.VAR):
        return json.dumps(value, ensure_ascii=False)
    if attr_type is AttrType.FLOAT:
        return str(np.float32(value))
    return _scalar_text(value)


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, complex):
        return f"complex({value.real!r}, {value.imag!r})"
    return repr(value)


def _name(name: str) -> str:
    return name if _PLAIN.fullmatch(name) else json.dumps(name, ensure_ascii=False)


# -- reading -----------------------------------------------------------------------------------------
def program_from_text(text: str) -> Program:
    """Parse the text form back into a Program. Raises SerdeError naming the line and column."""
    program = Program()
    program.blocks = []
    block: Block | None = None
    seen_header = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cursor = _Cursor(line, number)
        try:
            if not seen_header:
                _read_program_header(cursor, program)
                seen_header = True
            elif cursor.line.startswith("op_version_map") and block is None:
                _read_op_version_map(cursor, program)
            elif cursor.line.startswith("block "):
                block = _read_block_header(cursor, program)
            elif block is None:
                cursor.fail("expected a 'block N (parent P):' header before vars and ops")
            elif re.match(r"var\s", cursor.line):
                block.add_var(_read_var(cursor))
            else:
                block.insert_op(len(block.ops), _read_op(cursor))
        except SerdeError:
            raise
        except HalfwayError as e:
            raise SerdeError(f"line {number}: {e}\n  {line}") from None
    if not program.blocks:
        raise SerdeError("the text holds no block (expected 'block 0 (parent -1):')")
    return program


class _Cursor:
    """A position in one line, with the small lexer the grammar needs."""

    def __init__(self, line: str, number: int) -> None:
        self.line = line
        self.number = number
        self.pos = 0

    def fail(self, message: str) -> NoReturn:
        raise SerdeError(f"line {self.number}, column {self.pos + 1}: {message}\n  {self.line}\n"
                         f"  {' ' * self.pos}^")

    def skip_space(self) -> None:
        while self.pos < len(self.line) and self.line[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos >= len(self.line)

    def peek(self, token: str) -> bool:
        self.skip_space()
        return self.line.startswith(token, self.pos)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            found = self.line[self.pos:self.pos + 12] or "the end of the line"
            self.fail(f"expected {token!r}, found {found!r}")

    def expect_end(self) -> None:
        if not self.at_end():
            self.fail(f"unexpected {self.line[self.pos:self.pos + 12]!r}")

    def name(self, what: str = "a name") -> str:
        self.skip_space()
        if self.peek('"'):
            return self._json_string()
        match = _PLAIN.match(self.line, self.pos)
        if match is None:
            self.fail(f"expected {what}")
        self.pos = match.end()
        return match.group()

    def integer(self) -> int:
        self.skip_space()
        match = re.compile(r"[-+]?\d+").match(self.line, self.pos)
        if match is None:
            self.fail("expected an integer")
        self.pos = match.end()
        return int(match.group())

    def _json_string(self) -> str:
        try:
            value, end = json.JSONDecoder().raw_decode(self.line, self.pos)
        except json.JSONDecodeError as e:
            self.fail(f"bad string literal ({e.msg})")
        if not isinstance(value, str):
            self.fail("expected a string literal")
        self.pos = end
        return str(value)

    def literal(self) -> Any:
        """A value: number, string, true/false, none, complex(re, im), or a [list] of those."""
        self.skip_space()
        if self.accept("["):
            items: list[Any] = []
            while not self.accept("]"):
                if items:
                    self.expect(",")
                items.append(self.literal())
            return items
        if self.peek('"'):
            return self._json_string()
        for word, value in (("true", True), ("false", False), ("none", None)):
            if re.compile(word + r"\b").match(self.line, self.pos):
                self.pos += len(word)
                return value
        if self.accept("complex("):
            real = float(self.literal())
            self.expect(",")
            imag = float(self.literal())
            self.expect(")")
            return complex(real, imag)
        match = _NUMBER.match(self.line, self.pos)
        if match is None:
            self.fail("expected a value (number, string, true/false, [list])")
        self.pos = match.end()
        text = match.group()
        if re.fullmatch(r"[-+]?\d+", text):
            return int(text)
        return _FloatText(text)


class _FloatText(float):
    """A float literal that remembers its text, so FLOAT attrs round to float32 from the decimal."""

    text: str

    def __new__(cls, text: str) -> _FloatText:
        self = super().__new__(cls, float(text))
        self.text = text
        return self


def _read_program_header(cursor: _Cursor, program: Program) -> None:
    cursor.expect("program")
    if cursor.accept("version"):
        cursor.expect("=")
        program.version = cursor.integer()
    cursor.expect_end()


def _read_op_version_map(cursor: _Cursor, program: Program) -> None:
    cursor.expect("op_version_map")
    cursor.expect("{")
    versions: dict[str, int] = {}
    while not cursor.accept("}"):
        if versions:
            cursor.expect(",")
        name = cursor.name("an op name")
        cursor.expect("=")
        versions[name] = cursor.integer()
    cursor.expect_end()
    program.op_version_map = versions


def _read_block_header(cursor: _Cursor, program: Program) -> Block:
    cursor.expect("block")
    idx = cursor.integer()
    if idx != len(program.blocks):
        cursor.fail(f"block {idx} out of order: expected block {len(program.blocks)}")
    cursor.expect("(")
    cursor.expect("parent")
    block = Block(program, idx, cursor.integer())
    if cursor.accept(","):
        cursor.expect("forward_block")
        block.forward_block_idx = cursor.integer()
        block.explicit = frozenset({"forward_block_idx"})
    cursor.expect(")")
    cursor.expect(":")
    cursor.expect_end()
    program.blocks.append(block)
    return block


def _read_var(cursor: _Cursor) -> Variable:
    cursor.expect("var")
    name = cursor.name("a var name")
    cursor.expect(":")
    var = _read_var_type(cursor, name)
    explicit: set[str] = set()
    while not cursor.at_end() and not cursor.peek("{"):
        field = cursor.name("a var field")
        if field == "lod_level":
            cursor.expect("=")
            var.lod_level = cursor.integer()
            explicit.add(field)
        elif field in _VAR_FLAGS:
            value = cursor.literal() if cursor.accept("=") else True
            if not isinstance(value, bool):
                cursor.fail(f"{field} takes true or false")
            setattr(var, field, value)
            explicit.add(field)
        elif field == "vartype":
            cursor.expect("=")
            try:
                var.type_extra = bytes.fromhex(cursor.literal())
            except (TypeError, ValueError):
                cursor.fail("vartype takes a quoted hex string")
        else:
            cursor.fail(f"unknown var field {field!r} (known: lod_level, vartype, {', '.join(_VAR_FLAGS)})")
    if cursor.accept("{"):
        var.attrs = [(n, attr.type, attr.value) for n, attr in _read_attrs(cursor, allow_none=True)]
    cursor.expect_end()
    var.explicit = frozenset(explicit)
    return var


def _read_var_type(cursor: _Cursor, name: str) -> Variable:
    word = "?" if cursor.accept("?") else cursor.name("a dtype or var kind")
    kind = VarKind.DENSE_TENSOR
    if word in VarKind.__members__:
        kind = VarKind[word]
        if not kind.has_tensor:
            return Variable(name, kind=kind)
        word = "?" if cursor.accept("?") else cursor.name("a dtype")
    if word != "?" and word not in DType.__members__:
        cursor.fail(f"unknown dtype or var kind {word!r}")
    cursor.expect("[")
    dims: list[int] = []
    while not cursor.accept("]"):
        if dims:
            cursor.expect(",")
        dims.append(cursor.integer())
    return Variable(name, kind=kind, dtype=None if word == "?" else DType[word], shape=dims)


def _read_op(cursor: _Cursor) -> Operator:
    outputs: dict[str, list[str]] = {}
    if cursor.accept("("):
        outputs = _read_slots(cursor)
        cursor.expect("=")
    op_type = cursor.name("an op type")
    cursor.expect("(")
    inputs = _read_slots(cursor)
    op = Operator(op_type, inputs, outputs)
    if cursor.accept("{"):
        for name, attr in _read_attrs(cursor, allow_none=False):
            op._set_typed_attr(name, attr)
    if cursor.accept("is_target"):
        value = cursor.literal() if cursor.accept("=") else True
        if not isinstance(value, bool):
            cursor.fail("is_target takes true or false")
        op.is_target = value
        op.explicit = frozenset({"is_target"})
    cursor.expect_end()
    return op


def _read_slots(cursor: _Cursor) -> dict[str, list[str]]:
    """``Slot=%a, Other=[%b, %c])`` up to and including the closing parenthesis."""
    slots: dict[str, list[str]] = {}
    while not cursor.accept(")"):
        if slots:
            cursor.expect(",")
        slot = cursor.name("a slot name")
        if slot in slots:
            cursor.fail(f"slot {slot!r} is listed twice")
        cursor.expect("=")
        if cursor.accept("["):
            names: list[str] = []
            while not cursor.accept("]"):
                if names:
                    cursor.expect(",")
                names.append(_var_ref(cursor))
        else:
            names = [_var_ref(cursor)]
        slots[slot] = names
    return slots


def _var_ref(cursor: _Cursor) -> str:
    cursor.expect("%")
    return cursor.name("a var name")


def _read_attrs(cursor: _Cursor, *, allow_none: bool) -> list[tuple[str, Attr]]:
    """``name=value, name: type = value}`` up to and including the closing brace."""
    attrs: list[tuple[str, Attr]] = []
    while not cursor.accept("}"):
        if attrs:
            cursor.expect(",")
        name = cursor.name("an attr name")
        declared: AttrType | None = None
        if cursor.accept(":"):
            type_name = cursor.name("an attr type")
            if type_name not in _TYPES_BY_NAME:
                cursor.fail(f"unknown attr type {type_name!r} (known: {', '.join(_TYPES_BY_NAME)})")
            declared = _TYPES_BY_NAME[type_name]
        cursor.expect("=")
        start = cursor.pos
        value = cursor.literal()
        if value is None and not (allow_none and declared is not None):
            cursor.pos = start
            cursor.fail("'none' is only allowed for typed var attrs")
        attr_type = declared if declared is not None else _implied_type(value)
        if attr_type is None:
            cursor.pos = start
            cursor.fail(f"cannot tell the type of attr {name!r}; write it as '{name}: TYPE = VALUE'")
        try:
            attrs.append((name, Attr(attr_type, None if value is None else _typed_value(attr_type, value))))
        except HalfwayError as e:
            cursor.pos = start
            cursor.fail(f"attr {name!r}: {e}")
    return attrs


def _implied_type(value: Any) -> AttrType | None:
    """The type a literal written without ``: type`` has (None: it must be annotated)."""
    if isinstance(value, list):
        kinds = {_implied_type(v) for v in value}
        if len(kinds) != 1:
            return None
        element = kinds.pop()
        return next((t for t in _IMPLIED_LISTS if _LIST_ELEMENT[t] is element), None)
    if isinstance(value, bool):
        return AttrType.BOOLEAN
    if isinstance(value, int):
        return AttrType.INT
    if isinstance(value, float):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    return None


def _typed_value(attr_type: AttrType, value: Any) -> Any:
    element = _LIST_ELEMENT.get(attr_type)
    if element is not None and isinstance(value, list):
        return tuple(_typed_value(element, v) for v in value)
    if attr_type is AttrType.FLOAT and isinstance(value, _FloatText):
        value = float(np.float32(value.text))
    elif isinstance(value, _FloatText):
        value = float(value)
    return normalize(attr_type, value)
