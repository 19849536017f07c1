"""Blocks: an ordered list of ops over a table of vars, with the use-def index they share.

ProgramDesc is not SSA: several ops may write one var name (Paddle's batch_norm writes its
running statistics in place, ``MeanOut`` aliasing ``Mean``). The IR keeps names as they are and
records every writer: ``producers(name)`` lists them all, ``Variable.producer()`` raises when a
var has more than one, and the verifier flags multi-writer vars that are not such in-place
aliases. Renaming to SSA on load would change the bytes a round trip must reproduce.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import IRError
from .operator import Operator
from .variable import Use, Variable

if TYPE_CHECKING:
    from .program import Program

__all__ = ["Block"]


class Block:
    """A block of a program. Edit ops and vars through its methods so use-def stays current."""

    __slots__ = ("program", "idx", "parent_idx", "forward_block_idx", "explicit", "_vars", "_ops",
                 "_ops_view", "_positions", "_uses", "_defs")

    def __init__(self, program: Program | None, idx: int, parent_idx: int = -1) -> None:
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.forward_block_idx = -1
        self.explicit: frozenset[str] = frozenset()
        self._vars: dict[str, Variable] = {}
        self._ops: list[Operator] = []
        self._ops_view: tuple[Operator, ...] | None = ()
        self._positions: dict[int, int] | None = {}
        self._uses: dict[str, list[Use]] = {}
        self._defs: dict[str, list[Use]] = {}

    def copy(self, program: Program | None) -> Block:
        """A copy of this block, its vars and its ops, for ``program``."""
        twin = Block(program, self.idx, self.parent_idx)
        twin.forward_block_idx, twin.explicit = self.forward_block_idx, self.explicit
        for var in self._vars.values():
            twin.add_var(var.copy())
        for op in self._ops:
            twin.insert_op(len(twin._ops), op.copy())
        return twin

    # -- vars ----------------------------------------------------------------------------------
    @property
    def vars(self) -> Mapping[str, Variable]:
        """The vars declared in this block, by name, in declaration order (a copy)."""
        return dict(self._vars)

    def has_var(self, name: str) -> bool:
        return name in self._vars

    def var(self, name: str) -> Variable:
        """The var ``name`` declared in this block (IRError listing near names if absent)."""
        try:
            return self._vars[name]
        except KeyError:
            raise IRError(f"block {self.idx} has no var {name!r}{_did_you_mean(name, self._vars)}") from None

    def find_var(self, name: str) -> Variable:
        """The var ``name`` from this block or, failing that, its ancestors."""
        block: Block | None = self
        while block is not None:
            if name in block._vars:
                return block._vars[name]
            block = block.parent
        raise IRError(f"no var {name!r} in block {self.idx} or its parents{_did_you_mean(name, self._vars)}")

    @property
    def parent(self) -> Block | None:
        if self.parent_idx < 0 or self.program is None or self.parent_idx >= len(self.program.blocks):
            return None
        return self.program.blocks[self.parent_idx]

    def create_var(self, name: str, **kwargs: Any) -> Variable:
        """Declare a new var (keyword arguments as ``Variable``); IRError if the name is taken."""
        return self.add_var(Variable(name, **kwargs))

    def add_var(self, var: Variable) -> Variable:
        if var.name in self._vars:
            raise IRError(f"block {self.idx} already has a var {var.name!r}")
        if var.block is not None:
            raise IRError(f"var {var.name!r} already belongs to block {var.block.idx}")
        var.block = self
        self._vars[var.name] = var
        return var

    def remove_var(self, name: str, *, force: bool = False) -> None:
        """Remove var ``name``. Unless ``force``, it must have no readers or writers left."""
        var = self.var(name)
        if not force:
            users = [f"{op.type} (block {block.idx})" for block in self._scope_of(name)
                     for op, _, _ in block._uses.get(name, []) + block._defs.get(name, [])]
            if users:
                raise IRError(f"cannot remove var {name!r} of block {self.idx}: still used by {', '.join(users)}")
        del self._vars[name]
        var.block = None

    def rename_var(self, old: str, new: str) -> None:
        """Rename a var and every reference to it in this block and its sub-blocks.

        Sub-blocks that declare a var ``old`` of their own (shadowing this one) are left alone.
        IRError, with nothing changed, if ``new`` is declared in this block or a sub-block, or
        already names a var of an enclosing block that ops here refer to.
        """
        var = self.var(old)
        if not isinstance(new, str) or not new:
            raise IRError(f"cannot rename {old!r}: a var name must be a non-empty string, got {new!r}")
        if new == old:
            return
        scope = self._scope_of(old)
        for block in scope:
            if new in block._vars:
                raise IRError(f"cannot rename {old!r} to {new!r}: block {block.idx} already has {new!r}")
            if block._uses.get(new) or block._defs.get(new):
                raise IRError(f"cannot rename {old!r} to {new!r}: ops of block {block.idx} refer to {new!r} "
                              f"of an enclosing block, and the rename would capture them")
        self._vars = {(new if k == old else k): v for k, v in self._vars.items()}
        var._name = new
        for block in scope:
            for op in {id(op): op for op, _, _ in block.uses(old) + block.producers(old)}.values():
                op.rename_input(old, new)
                op.rename_output(old, new)

    def _scope_of(self, name: str) -> list[Block]:
        """This block and the sub-blocks (recursively) where ``name`` means this block's var:
        those that do not declare a ``name`` of their own. Sub-blocks follow their parents."""
        if self.program is None:
            return [self]
        found, frontier = [self], {self.idx}
        for block in self.program.blocks:
            if block.parent_idx in frontier and block is not self and name not in block._vars:
                found.append(block)
                frontier.add(block.idx)
        return found

    def unique_name(self, prefix: str) -> str:
        """A var name starting with ``prefix`` that no block of the program uses yet."""
        if self.program is not None:
            return self.program.unique_name(prefix)
        n = 0
        while f"{prefix}_{n}" in self._vars:
            n += 1
        return f"{prefix}_{n}"

    # -- ops -----------------------------------------------------------------------------------
    @property
    def ops(self) -> tuple[Operator, ...]:
        """The ops in program order (an immutable snapshot)."""
        if self._ops_view is None:
            self._ops_view = tuple(self._ops)
        return self._ops_view

    def op_index(self, op: Operator) -> int:
        if op.block is not self:
            raise IRError(f"op {op.type} is not in block {self.idx}")
        if self._positions is None:
            self._positions = {id(o): i for i, o in enumerate(self._ops)}
        return self._positions[id(op)]

    def append_op(self, type: str, inputs: Mapping[str, Any] | None = None,
                  outputs: Mapping[str, Any] | None = None, attrs: Mapping[str, Any] | None = None) -> Operator:
        return self.insert_op(len(self._ops), Operator(type, inputs, outputs, attrs))

    def insert_op(self, index: int, op: Operator) -> Operator:
        """Insert a detached op at ``index`` (negative counts from the end, as list.insert)."""
        _check_detached([op])
        self._ops.insert(index, op)
        op.block = self
        self._changed()
        for slot, names in op._inputs.items():
            self._index(op, names, slot, False)
        for slot, names in op._outputs.items():
            self._index(op, names, slot, True)
        return op

    def insert_ops(self, index: int, ops: Iterable[Operator]) -> list[Operator]:
        """Insert detached ops, in order, starting at ``index`` (as ``insert_op``). All or none."""
        ops = list(ops)
        _check_detached(ops)
        start = max(0, len(self._ops) + index) if index < 0 else min(index, len(self._ops))
        return [self.insert_op(start + offset, op) for offset, op in enumerate(ops)]

    def remove_op(self, op: Operator) -> None:
        """Detach ``op``; its vars stay declared (remove them with remove_var)."""
        index = self.op_index(op)
        for slot, names in op._inputs.items():
            self._unindex(op, names, slot, False)
        for slot, names in op._outputs.items():
            self._unindex(op, names, slot, True)
        del self._ops[index]
        op.block = None
        self._changed()

    def replace_op(self, old: Operator, new: Iterable[Operator]) -> list[Operator]:
        """Put ``new`` ops where ``old`` was, removing ``old``. ``new`` may hold ``old`` itself
        (to wrap it); every other op must be detached, or nothing changes."""
        new = list(new)
        index = self.op_index(old)
        _check_detached(new, except_for=old)
        self.remove_op(old)
        return self.insert_ops(index, new)

    def splice(self, edits: Iterable[tuple[Iterable[Operator], Iterable[Operator]]]) -> None:
        """Apply many replacements in one sweep: each ``(old, new)`` removes the ops ``old`` (of
        this block) and puts the detached ops ``new`` where the last of ``old`` stood.

        Rewriting k places with ``replace_op`` costs O(n) each; ``splice`` costs O(n) for all.
        IRError, with nothing changed, if an old op is not in this block or appears in two
        edits, or a new op is attached or listed twice.
        """
        edits = [(list(old), list(new)) for old, new in edits]
        removed: dict[int, Operator] = {}
        for old, _ in edits:
            for op in old:
                if op.block is not self or id(op) in removed:
                    raise IRError(f"splice: op {op.type} is not in block {self.idx} or is replaced twice")
                removed[id(op)] = op
        _check_detached([op for _, new in edits for op in new])
        anchors = {id(max(old, key=self.op_index)): new for old, new in edits if old}
        if len(anchors) != len(edits):
            raise IRError("splice: every edit needs at least one op to replace")
        for op in removed.values():
            for slot, names in op._inputs.items():
                self._unindex(op, names, slot, False)
            for slot, names in op._outputs.items():
                self._unindex(op, names, slot, True)
            op.block = None
        kept: list[Operator] = []
        for op in self._ops:
            kept.extend(anchors.get(id(op), ()))
            if id(op) not in removed:
                kept.append(op)
        self._ops = kept
        self._changed()
        for new in anchors.values():
            for op in new:
                op.block = self
                for slot, names in op._inputs.items():
                    self._index(op, names, slot, False)
                for slot, names in op._outputs.items():
                    self._index(op, names, slot, True)

    def move_ops(self, order: list[Operator]) -> None:
        """Reorder the block's ops to ``order`` (a permutation of ``ops``)."""
        if len(order) != len(self._ops) or {id(o) for o in order} != {id(o) for o in self._ops}:
            raise IRError(f"block {self.idx}: move_ops needs a permutation of the block's ops")
        self._ops = list(order)
        self._changed()

    def _changed(self) -> None:
        self._ops_view = None
        self._positions = None

    # -- use-def -------------------------------------------------------------------------------
    def uses(self, name: str) -> tuple[Use, ...]:
        """Places in this block's ops that read ``name``, in program order."""
        return self._ordered(self._uses.get(name, ()))

    def producers(self, name: str) -> tuple[Use, ...]:
        """Places in this block's ops that write ``name``, in program order."""
        return self._ordered(self._defs.get(name, ()))

    def _ordered(self, places: Iterable[Use]) -> tuple[Use, ...]:
        return tuple(sorted(places, key=lambda use: (self.op_index(use[0]), use[1], use[2])))

    def _index(self, op: Operator, names: tuple[str, ...], slot: str, is_output: bool) -> None:
        table = self._defs if is_output else self._uses
        for i, name in enumerate(names):
            table.setdefault(name, []).append((op, slot, i))

    def _unindex(self, op: Operator, names: tuple[str, ...], slot: str, is_output: bool) -> None:
        table = self._defs if is_output else self._uses
        for name in set(names):
            kept = [u for u in table.get(name, ()) if not (u[0] is op and u[1] == slot)]
            if kept:
                table[name] = kept
            else:
                table.pop(name, None)

    def __repr__(self) -> str:
        return f"Block(idx={self.idx}, parent={self.parent_idx}, {len(self._vars)} vars, {len(self._ops)} ops)"


def _check_detached(ops: list[Operator], except_for: Operator | None = None) -> None:
    """IRError unless every op (``except_for`` aside, which is about to be detached) is in no
    block, and each is listed once."""
    seen: set[int] = set()
    for op in ops:
        if op.block is not None and op is not except_for:
            raise IRError(f"op {op.type} already belongs to block {op.block.idx}; remove it first")
        if id(op) in seen:
            raise IRError(f"op {op.type} is listed twice")
        seen.add(id(op))


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(names), n=3)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
