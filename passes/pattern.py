"""Patterns: small subgraphs to find in a program, matched from their root op upwards.

A pattern is a tree of ``OpPattern`` nodes (an op type or a few, attr constraints, and its input
slots bound to vars or to other op patterns) rooted at the op whose outputs the match replaces.
Build it with ``op``/``var`` or with the compact text form ``pattern``::

    pattern("act:relu|relu6(X=conv:conv2d(Input=x, Filter=w:param))")
    op("relu|relu6", name="act", X=op("conv2d", name="conv", Input=var("x"), Filter=var("w", persistable=True)))

Text form: ``[name:]type[|type...](Slot=operand, ...)[.OutSlot]`` where an operand is another op
or a var ``name[:param]`` (``:param``: a persistable var; ``_``: any var, not captured), a slot
may hold a list ``[a, b]``,
and a trailing ``...`` lets the op have slots the pattern does not name (otherwise every input
slot it does not name must be empty). ``.OutSlot`` says which output of an inner op feeds its
consumer (default: the first output slot of its schema).

Matching (``Pattern.match``) follows def-use from the root: an inner op must be the only writer
of the var its consumer reads, that var must have exactly that one reader (no other op, no
sub-block, no fetch) and not be persistable. A var name captured twice must be the same var.
Captures map names to the matched Operator (ops) or var name (vars).

A value read twice (layer_norm's centred ``x - mean``, squared and divided) is an op named once
and read again by its name as a var operand: ``div(X=d:elementwise_sub(X=x, Y=m), Y=sqrt(X=
reduce_mean(X=pow(X=d))))``. The named op's output must then be read exactly at each place the
pattern names it and nowhere else. A ``shared`` op (``op(..., shared=True)``) may have readers
outside the match too; the rewrite driver then holds the replacement to write its output.

A ``commutes`` op (``op("elementwise_mul", commutes=True, X=a, Y=b)``) matches ``a * b`` and
``b * a``: one pattern where listing both orders would take two per commuting op (2^k for k of
them). Its operands are tried as written, then swapped; the first order that matches is kept, and
a later failure elsewhere does not come back to try the other, so its operands should not both
match either place (an op and a var, a parameter and a value).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

import attrs

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.errors import IRError, PassError
from ..ir.operator import Operator
from ..ir.schema import get_schema, has_schema
from ..ir.variable import Variable

__all__ = ["OpPattern", "VarPattern", "Pattern", "Match", "op", "var", "pattern"]

AttrCheck = Union[Any, Callable[[Any], bool]]

ANY = "_"
"""The var name that matches any var and captures nothing."""


@attrs.frozen
class VarPattern:
    """A var operand: captured under ``name``; optionally persistable / of ``dtype`` / passing ``where``."""

    name: str
    persistable: bool | None = None
    dtype: DType | None = None
    where: Callable[[Variable], bool] | None = None

    def accepts(self, variable: Variable) -> bool:
        return ((self.persistable is None or variable.persistable == self.persistable)
                and (self.dtype is None or variable.dtype is self.dtype)
                and (self.where is None or bool(self.where(variable))))


Operand = Union["OpPattern", VarPattern]


@attrs.frozen
class OpPattern:
    """An op node. ``attrs`` values are required values or predicates; ``where`` sees the op;
    ``open``: slots not named in ``inputs`` may be non-empty; ``out``: the output slot an inner
    op feeds its consumer through (None: its schema's first); ``shared``: that output may have
    readers outside the match too; ``commutes``: its X and Y operands match in either order."""

    types: frozenset[str]
    inputs: Mapping[str, tuple[Operand, ...]]
    name: str | None = None
    attrs: Mapping[str, AttrCheck] = attrs.field(factory=dict)
    where: Callable[[Operator], bool] | None = None
    open: bool = False
    out: str | None = None
    shared: bool = False
    commutes: bool = False

    def __attrs_post_init__(self) -> None:
        if self.commutes and not {"X", "Y"} <= set(self.inputs):
            raise PassError(f"a commuting pattern op binds X and Y, got slots {sorted(self.inputs)}")

    def accepts(self, candidate: Operator) -> bool:
        if candidate.type not in self.types:
            return False
        for attr_name, check in self.attrs.items():
            value = _attr_or_none(candidate, attr_name)
            if not (check(value) if callable(check) else value == check):
                return False
        if not self.open and any(names and slot not in self.inputs for slot, names in candidate.inputs.items()):
            return False
        return self.where is None or bool(self.where(candidate))

    def output_slot(self, candidate: Operator) -> str:
        if self.out is not None:
            return self.out
        schema = get_schema(candidate.type) if has_schema(candidate.type) else None
        return schema.outputs[0].name if schema is not None and schema.outputs else next(iter(candidate.outputs), "")


def _attr_or_none(candidate: Operator, name: str) -> Any:
    """The attr's value, its schema default when unset, None when it has neither."""
    try:
        return candidate.attr(name)
    except IRError:
        return None


def var(name: str, *, persistable: bool | None = None, dtype: Any = None,
        where: Callable[[Variable], bool] | None = None) -> VarPattern:
    """A var operand of a pattern (see VarPattern)."""
    return VarPattern(name, persistable, DType.from_any(dtype) if dtype is not None else None, where)


def op(types: str | Sequence[str], name: str | None = None, *, attrs: Mapping[str, AttrCheck] | None = None,
       where: Callable[[Operator], bool] | None = None, open: bool = False, out: str | None = None,
       shared: bool = False, commutes: bool = False, **inputs: Operand | Sequence[Operand]) -> OpPattern:
    """An op node: ``types`` is one type, ``"a|b"``, or a list; keyword args bind input slots."""
    kinds = frozenset(types.split("|") if isinstance(types, str) else types)
    slots = {slot: (v,) if isinstance(v, (OpPattern, VarPattern)) else tuple(v) for slot, v in inputs.items()}
    return OpPattern(kinds, slots, name, dict(attrs or {}), where, open, out, shared, commutes)


class Match:
    """A successful match: ``captures`` by name and the matched ops (root last)."""

    __slots__ = ("captures", "ops")

    def __init__(self) -> None:
        self.captures: dict[str, Any] = {}
        self.ops: list[Operator] = []


class Pattern:
    """A rooted pattern. ``root_types`` index it; ``match(op, claimed)`` tries it at ``op``;
    ``reads`` counts, for each op read again by its name, the places that read its output."""

    __slots__ = ("root", "text", "captures", "reads")

    def __init__(self, root: OpPattern, text: str = "") -> None:
        self.captures, self.reads = _check_names(root)
        self.root = root
        self.text = text or _describe(root)

    @property
    def root_types(self) -> frozenset[str]:
        return self.root.types

    def match(self, root: Operator, claimed: Mapping[int, Any] | None = None,
              protected: frozenset[str] = frozenset()) -> Match | None:
        """The match rooted at ``root`` or None. Ops whose id is in ``claimed`` never match;
        vars in ``protected`` (read outside the block, e.g. by sub-blocks) are never inner."""
        if root.block is None:
            return None
        walk = _Walk(root.block, claimed or {}, protected, self.reads)
        if not walk.op(self.root, root) or not walk.references_hold():
            return None
        return walk.found

    def __repr__(self) -> str:
        return f"Pattern({self.text})"


class _Walk:
    """One match attempt: the ops and vars bound so far, and the references (a var operand named
    like an op capture) to check once every op is bound."""

    def __init__(self, block: Block, claimed: Mapping[int, Any], protected: frozenset[str],
                 reads: Mapping[str, int]) -> None:
        self.block, self.claimed, self.protected, self.reads = block, claimed, protected, reads
        self.found = Match()
        self.references: list[tuple[str, str]] = []
        self.slots: dict[str, str] = {}

    def op(self, node: OpPattern, candidate: Operator) -> bool:
        if id(candidate) in self.claimed or any(candidate is o for o in self.found.ops) or not node.accepts(candidate):
            return False
        if not (self.commuted(node, candidate) if node.commutes else self.operands(node.inputs, candidate)):
            return False
        if node.name is not None:
            self.found.captures[node.name] = candidate
            self.slots[node.name] = node.output_slot(candidate)
        self.found.ops.append(candidate)
        return True

    def commuted(self, node: OpPattern, candidate: Operator) -> bool:
        """The operands as written, else (what the first try bound undone) with X and Y swapped."""
        found = self.found
        captures, ops, references = dict(found.captures), len(found.ops), len(self.references)
        if self.operands(node.inputs, candidate):
            return True
        found.captures = captures
        del found.ops[ops:], self.references[references:]
        return self.operands({**node.inputs, "X": node.inputs["Y"], "Y": node.inputs["X"]}, candidate)

    def operands(self, inputs: Mapping[str, tuple[Operand, ...]], candidate: Operator) -> bool:
        for slot, operands in inputs.items():
            names = candidate.input(slot)
            if len(names) != len(operands):
                return False
            for name, operand in zip(names, operands):
                if not (self.var(operand, name) if isinstance(operand, VarPattern) else self.inner(operand, name)):
                    return False
        return True

    def var(self, operand: VarPattern, name: str) -> bool:
        block, found = self.block, self.found
        if operand.name == ANY:
            return block.has_var(name) and operand.accepts(block.var(name))
        if operand.name in self.reads:
            self.references.append((operand.name, name))
            return True
        bound = found.captures.get(operand.name)
        if bound is not None:
            return bool(bound == name)
        try:
            variable = block.find_var(name)
        except IRError:
            return False
        if not operand.accepts(variable):
            return False
        found.captures[operand.name] = name
        return True

    def inner(self, node: OpPattern, name: str) -> bool:
        """``name`` must be written by exactly one op (matching ``node``, through its output slot),
        read exactly where the pattern reads it (unless ``shared``), not persistable and not
        protected."""
        block = self.block
        readers, wanted = len(block.uses(name)), self.reads.get(node.name or "", 1)
        if name in self.protected or readers < wanted or (readers > wanted and not node.shared):
            return False
        writers = block.producers(name)
        if len(writers) != 1:
            return False
        producer, slot, _ = writers[0]
        if not block.has_var(name) or block.var(name).persistable:
            return False
        return slot == node.output_slot(producer) and self.op(node, producer)

    def references_hold(self) -> bool:
        """Each reference reads the output its op feeds the pattern through."""
        for op_name, name in self.references:
            producer = self.found.captures.get(op_name)
            if not isinstance(producer, Operator) or name not in producer.output(self.slots[op_name]):
                return False
        return True


def _check_names(root: OpPattern) -> tuple[frozenset[str], dict[str, int]]:
    """The capture names of the pattern, and for each op read again by name (a reference) how many
    places read its output. PassError for an op name used twice, or read inside its own inputs."""
    ops: set[str] = set()
    var_names: set[str] = set()
    referenced: list[str] = []

    def visit(node: OpPattern, above: tuple[str, ...]) -> None:
        if node.name is not None:
            if node.name in ops:
                raise PassError(f"pattern names {node.name!r} twice; op captures must be unique")
            ops.add(node.name)
            above += (node.name,)
        for operands in node.inputs.values():
            for operand in operands:
                if isinstance(operand, OpPattern):
                    visit(operand, above)
                elif operand.name in above:
                    raise PassError(f"pattern reads op {operand.name!r} inside its own inputs")
                elif operand.name != ANY:
                    var_names.add(operand.name)
                    referenced.append(operand.name)

    visit(root, ())
    references = Counter(n for n in referenced if n in ops)
    return frozenset(ops | var_names), {name: count + 1 for name, count in references.items()}


def _describe(node: OpPattern) -> str:
    args = ", ".join(f"{slot}={_operands(ops)}" for slot, ops in node.inputs.items())
    head = f"{node.name}:" if node.name else ""
    return f"{head}{'|'.join(sorted(node.types))}({args}{', ...' if node.open else ''})"


def _operands(operands: tuple[Operand, ...]) -> str:
    text = [_describe(o) if isinstance(o, OpPattern) else o.name for o in operands]
    return text[0] if len(text) == 1 else f"[{', '.join(text)}]"


# -- the text form --------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(\.\.\.|[A-Za-z_][A-Za-z0-9_]*|[():|=,\[\].])")


def pattern(text: str, *, attrs: Mapping[str, Mapping[str, AttrCheck]] | None = None,
            where: Mapping[str, Callable[[Any], bool]] | None = None) -> Pattern:
    """Parse the text form (module docstring). ``attrs`` and ``where`` add attr constraints and
    predicates by capture name (a ``where`` of a var sees the Variable, of an op the Operator)."""
    tokens = _tokenize(text)
    parser = _Parser(tokens, text, dict(attrs or {}), dict(where or {}))
    root = parser.operand()
    parser.expect_end()
    if not isinstance(root, OpPattern):
        raise PassError(f"pattern {text!r}: the root must be an op, not a var")
    unused = (set(parser.attrs) | set(parser.where)) - parser.names
    if unused:
        raise PassError(f"pattern {text!r}: constraints name unknown captures {sorted(unused)}")
    return Pattern(root, text)


def _tokenize(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None:
            if text[pos:].strip():
                raise PassError(f"pattern {text!r}: unexpected character at {pos}: {text[pos:pos + 10]!r}")
            break
        tokens.append(found.group(1))
        pos = found.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[str], text: str, attrs: dict[str, Mapping[str, AttrCheck]],
                 where: dict[str, Callable[[Any], bool]]) -> None:
        self.tokens, self.pos, self.text = tokens, 0, text
        self.attrs, self.where = attrs, where
        self.names: set[str] = set()

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            want = repr(expected) if expected else "more"
            raise PassError(f"pattern {self.text!r}: expected {want} at token {self.pos}, got {token or 'the end'!r}")
        self.pos += 1
        return token

    def expect_end(self) -> None:
        if self.peek():
            raise PassError(f"pattern {self.text!r}: unexpected {self.peek()!r} after the pattern")

    def operand(self) -> Operand:
        first = self.take()
        if self.peek() == ":" and (self.peek(2) == "(" or self.peek(2) == "|"):
            self.take(":")
            return self.op_node(first, self.take())
        if self.peek() in ("(", "|"):
            return self.op_node(None, first)
        persistable = None
        if self.peek() == ":":
            self.take(":")
            flag = self.take()
            if flag != "param":
                raise PassError(f"pattern {self.text!r}: unknown var flag {flag!r} (known: param)")
            persistable = True
        self.names.add(first)
        return VarPattern(first, persistable, None, self.where.get(first))

    def op_node(self, name: str | None, first_type: str) -> OpPattern:
        types = [first_type]
        while self.peek() == "|":
            self.take("|")
            types.append(self.take())
        self.take("(")
        inputs: dict[str, tuple[Operand, ...]] = {}
        is_open = False
        while self.peek() != ")":
            if self.peek() == "...":
                self.take()
                is_open = True
            else:
                slot = self.take()
                self.take("=")
                inputs[slot] = self.operand_list()
            if self.peek() != ")":
                self.take(",")
        self.take(")")
        out = None
        if self.peek() == ".":
            self.take(".")
            out = self.take()
        if name is not None:
            self.names.add(name)
        attr_checks = self.attrs.get(name, {}) if name is not None else {}
        return OpPattern(frozenset(types), inputs, name, dict(attr_checks),
                         self.where.get(name) if name is not None else None, is_open, out)

    def operand_list(self) -> tuple[Operand, ...]:
        if self.peek() != "[":
            return (self.operand(),)
        self.take("[")
        items = [self.operand()]
        while self.peek() == ",":
            self.take(",")
            items.append(self.operand())
        self.take("]")
        return tuple(items)
