"""Programs: a list of blocks (block 0 is the global block) plus the version metadata."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

from .block import Block
from .errors import IRError
from .initializers import Initializer
from .operator import Operator
from .variable import Variable

__all__ = ["Program", "topological_order", "sub_block_ops"]

FEED_VAR = "feed"
FETCH_VAR = "fetch"


class Program:
    """An inference program. ``Program()`` starts with an empty global block.

    ``version`` and ``op_version_map`` (op name -> version) are carried through unchanged; they
    are ``None`` when the file had none. ``initializers`` (parameter name -> Initializer) is
    filled by the builder for ``init_scope``; it is not part of the wire format.
    """

    __slots__ = ("blocks", "version", "op_version_map", "initializers", "_name_counters")

    def __init__(self) -> None:
        self.blocks: list[Block] = [Block(self, 0, -1)]
        self.version: int | None = None
        self.op_version_map: dict[str, int] | None = None
        self.initializers: dict[str, Initializer] = {}
        self._name_counters: dict[str, itertools.count[int]] = {}

    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, idx: int) -> Block:
        if not 0 <= idx < len(self.blocks):
            raise IRError(f"program has no block {idx} (it has {len(self.blocks)})")
        return self.blocks[idx]

    def create_block(self, parent_idx: int = 0) -> Block:
        self.block(parent_idx)
        block = Block(self, len(self.blocks), parent_idx)
        self.blocks.append(block)
        return block

    def all_ops(self) -> Iterator[Operator]:
        for block in self.blocks:
            yield from block.ops

    def all_vars(self) -> Iterator[Variable]:
        for block in self.blocks:
            yield from block.vars.values()

    def persistable_vars(self) -> list[Variable]:
        """Persistable tensors of the global block (the parameters), in declaration order."""
        return [v for v in self.global_block().vars.values() if v.persistable and v.kind.has_tensor]

    def unique_name(self, prefix: str) -> str:
        """``prefix_N`` with the smallest N not yet handed out nor used by any block."""
        counter = self._name_counters.setdefault(prefix, itertools.count())
        while True:
            name = f"{prefix}_{next(counter)}"
            if not any(block.has_var(name) for block in self.blocks):
                return name

    # -- feed / fetch --------------------------------------------------------------------------
    def feed_names(self) -> list[str]:
        """Names the ``feed`` ops write, in ``col`` order."""
        return _by_col(self.global_block(), "feed", "Out")

    def fetch_names(self) -> list[str]:
        """Names the ``fetch`` ops read, in ``col`` order."""
        return _by_col(self.global_block(), "fetch", "X")

    # -- whole-program operations -----------------------------------------------------------------
    def clone(self) -> Program:
        """A deep, independent copy (it saves to the same bytes)."""
        copy = Program()
        copy.blocks = [block.copy(copy) for block in self.blocks]
        copy.version = self.version
        copy.op_version_map = None if self.op_version_map is None else dict(self.op_version_map)
        copy.initializers = dict(self.initializers)
        return copy

    def to_bytes(self) -> bytes:
        from . import serde

        return serde.program_to_bytes(self)

    @staticmethod
    def from_bytes(data: bytes, *, source: str = "<bytes>") -> Program:
        from . import serde

        return serde.program_from_bytes(data, source=source)

    def prune(self, fetch_names: list[str], feed_names: list[str] | None = None) -> Program:
        """A copy holding only what computing ``fetch_names`` needs (see ``halfway.ir.prune``)."""
        from .prune import prune

        return prune(self, fetch_names, feed_names)

    def to_text(self) -> str:
        from .text import program_to_text

        return program_to_text(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        ops = sum(len(b.ops) for b in self.blocks)
        return f"Program({len(self.blocks)} blocks, {ops} ops)"


def _by_col(block: Block, op_type: str, slot: str) -> list[str]:
    entries = []
    for op in block.ops:
        if op.type != op_type:
            continue
        names = op.input(slot) if slot == "X" else op.output(slot)
        col = op.attr("col", None)
        if len(names) != 1 or not isinstance(col, int) or isinstance(col, bool):
            raise IRError(f"malformed {op_type} op {op.describe()}: it needs one {slot} var and an int col")
        entries.append((col, names[0]))
    return [name for _, name in sorted(entries)]


def topological_order(block: Block) -> list[Operator]:
    """The block's ops reordered so every op follows the ops writing its inputs.

    An op with sub-blocks also follows the writers of what its sub-blocks read. Stable: among
    ready ops the earliest in the current order goes first, so an already sorted block comes
    back unchanged. An op that reads and writes one var (in place) does not depend on itself.
    Raises IRError naming the ops of a cycle.
    """
    ops = list(block.ops)
    position = {id(op): i for i, op in enumerate(ops)}
    waits_on: dict[int, set[int]] = {i: set() for i in range(len(ops))}
    for i, op in enumerate(ops):
        reads = op.input_names() + [n for inner in sub_block_ops(op) for n in inner.input_names()]
        for name in reads:
            waits_on[i].update(position[id(w)] for w, _, _ in block.producers(name) if w is not op)
    dependents: dict[int, list[int]] = {i: [] for i in range(len(ops))}
    for i, deps in waits_on.items():
        for d in deps:
            dependents[d].append(i)
    ready = [i for i, deps in waits_on.items() if not deps]
    heapq.heapify(ready)
    order: list[Operator] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(ops[i])
        for j in dependents[i]:
            waits_on[j].discard(i)
            if not waits_on[j]:
                heapq.heappush(ready, j)
    if len(order) != len(ops):
        stuck = [f"#{i} {ops[i].type}" for i, deps in waits_on.items() if deps][:6]
        raise IRError(f"block {block.idx} has a dependency cycle among ops {', '.join(stuck)}")
    return order


def sub_block_ops(op: Operator) -> Iterator[Operator]:
    """The ops of the blocks ``op`` names in BLOCK/BLOCKS attrs and, recursively, of theirs.

    Block indices that name no block are skipped (the verifier reports them).
    """
    program = op.block.program if op.block is not None else None
    if program is None:
        return
    pending, seen = list(op.sub_blocks()), set()
    while pending:
        idx = pending.pop(0)
        if idx in seen or not 0 <= idx < len(program.blocks):
            continue
        seen.add(idx)
        for inner in program.blocks[idx].ops:
            yield inner
            pending.extend(inner.sub_blocks())
