"""What the cleanup passes (dce, remove_identity, fold_constants, cancel_casts) share: the names
a pass must leave alone, and taking an op that copies one var into another out of the graph.

The passes rewrite block 0 only. A var that ops of any other block read or write counts as used
by something the passes do not see, so they neither remove nor rename it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import attrs

from ..ir.block import Block
from ..ir.errors import PassError
from ..ir.operator import Operator
from ..ir.program import Program
from .rewrite import Decline

__all__ = ["Guard", "bypass", "sole_writer", "spare", "written_between", "remove_unused_vars"]


@attrs.frozen
class Guard:
    """Names of block 0 that a pass must not remove or rename.

    ``fed``: feed op targets and ``layers.data`` vars (``need_check_feed``). ``fetched``: fetch op
    sources plus the ``fetch_names`` a caller passes for programs without fetch ops.
    ``elsewhere``: names that ops of other blocks read or write.
    """

    fed: frozenset[str]
    fetched: frozenset[str]
    elsewhere: frozenset[str]

    @classmethod
    def of(cls, program: Program, fetch_names: Iterable[str], pass_name: str) -> Guard:
        """The guard of ``program``; PassError if a name of ``fetch_names`` is not a var of block 0."""
        block = program.global_block()
        extra = list(fetch_names)
        unknown = [n for n in extra if not block.has_var(n)]
        if unknown:
            near = difflib.get_close_matches(unknown[0], list(block.vars), n=3)
            hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
            raise PassError(f"pass {pass_name!r}: fetch name {unknown[0]!r} is not a var of block 0{hint}")
        fed = {n for op in block.ops if op.type == "feed" for n in op.output("Out")}
        fed |= {v.name for v in block.vars.values() if v.need_check_feed}
        fetched = {n for op in block.ops if op.type == "fetch" for n in op.input("X")} | set(extra)
        elsewhere = {n for b in program.blocks[1:] for op in b.ops for n in op.input_names() + op.output_names()}
        return cls(frozenset(fed), frozenset(fetched), frozenset(elsewhere))

    def kept(self, name: str) -> bool:
        """Whether ``name`` must keep its name and its place in the program."""
        return name in self.fed or name in self.fetched or name in self.elsewhere


def sole_writer(block: Block, name: str) -> Operator | None:
    """The op writing ``name`` if exactly one op of ``block`` writes it, exactly once."""
    places = block.producers(name)
    return places[0][0] if len(places) == 1 else None


def spare(block: Block, guard: Guard, op: Operator, reader: Operator) -> None:
    """Decline unless ``op``'s Out is read by ``reader`` alone and its other outputs by nobody."""
    out = op.output("Out")[0]
    others = [n for n in op.output_names() if n != out]
    if guard.kept(out) or [u[0] for u in block.uses(out)] != [reader] or any(guard.kept(n) or block.uses(n)
                                                                               for n in others):
        raise Decline(f"{out} or another output of {op.type} is read elsewhere or kept")


def written_between(block: Block, name: str, start: Operator, stop: Operator | None = None) -> bool:
    """Whether an op of ``block`` after ``start`` (and before ``stop``, when given) writes ``name``."""
    low = start.index
    high = stop.index if stop is not None else len(block.ops)
    return any(low < op.index < high for op, _, _ in block.producers(name))


def bypass(op: Operator, src: str, out: str, guard: Guard) -> bool:
    """Take ``op`` out of the graph, given that it computes ``out`` as an exact copy of ``src``.

    Forward (``out`` is not guarded)::

        (Out=%out) = op(X=%src)          -> removed
        (Out=%y) = relu(X=%out)          -> (Out=%y) = relu(X=%src)

    Backward (``out`` is fetched, so it keeps its name; ``src`` has one writer and ``op`` is its
    only reader)::

        (Out=%src) = conv2d(...)         -> (Out=%out) = conv2d(...)
        (Out=%out) = op(X=%src)          -> removed

    Nothing changes (and Decline is raised, saying why) unless: ``op`` is the only writer of
    ``out``, ``src`` and ``out`` are declared with one dtype, ``out`` is not persistable (nor,
    going backward, ``src``), ``src`` is neither written again after ``op`` nor used by other
    blocks, and the op's other outputs (dropout's Mask) are unread, unguarded temporaries. The
    vars left unused are removed. Returns True (the rewrite driver's "done" for in-place rules).
    """
    block = op.block
    assert block is not None
    if src == out or sole_writer(block, out) is not op:
        raise Decline(f"{out} is its own input or has other writers")
    if not _removable_outputs(op, out, guard):
        raise Decline("another output of the op is read, kept or written elsewhere")
    if block.var(src).dtype != block.var(out).dtype or block.var(out).persistable:
        raise Decline(f"{src} and {out} differ in dtype, or {out} is persistable")
    if not guard.kept(out):
        return _forward(block, op, src, out, guard)
    if out in guard.fetched and not (out in guard.fed or out in guard.elsewhere):
        return _backward(block, op, src, out, guard)
    raise Decline(f"{out} is fed or used by another block")


def _forward(block: Block, op: Operator, src: str, out: str, guard: Guard) -> bool:
    if written_between(block, src, op) or src in guard.elsewhere:
        raise Decline(f"{src} is written again after the op, or used by another block")
    if not block.uses(out):
        raise Decline(f"nothing reads {out} (it may be the program's output: name it in fetch_names)")
    for reader in {id(r): r for r, _, _ in block.uses(out)}.values():
        reader.rename_input(out, src)
    _remove_op_and_outputs(block, op, guard)
    return True


def _backward(block: Block, op: Operator, src: str, out: str, guard: Guard) -> bool:
    writer = sole_writer(block, src)
    if (writer is None or guard.kept(src) or block.var(src).persistable
            or [u[0] for u in block.uses(src)] != [op]):
        raise Decline(f"{out} is fetched and {src} cannot take its name (kept, persistable, several "
                      "writers or other readers)")
    _remove_op_and_outputs(block, op, guard)
    writer.rename_output(src, out)
    block.remove_var(src)
    return True


def _removable_outputs(op: Operator, out: str, guard: Guard) -> bool:
    """Whether every output of ``op`` but ``out`` is an unread, unguarded temporary only ``op`` writes."""
    block = op.block
    assert block is not None
    for name in op.output_names():
        if name == out:
            continue
        if guard.kept(name) or block.uses(name) or block.var(name).persistable or sole_writer(block, name) is not op:
            return False
    return True


def _remove_op_and_outputs(block: Block, op: Operator, guard: Guard) -> None:
    outputs = op.output_names()
    block.remove_op(op)
    remove_unused_vars(block, outputs, guard)


def remove_unused_vars(block: Block, names: Iterable[str], guard: Guard) -> list[str]:
    """Remove those of ``names`` that no op of ``block`` reads or writes and ``guard`` does not
    keep; returns the names removed."""
    removed = []
    for name in dict.fromkeys(names):
        if block.has_var(name) and not guard.kept(name) and not block.uses(name) and not block.producers(name):
            block.remove_var(name)
            removed.append(name)
    return removed
