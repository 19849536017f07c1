"""Pruning: the part of a program that computing some fetch targets needs.

``prune(program, ["y"], ["h"])`` returns a new program (the input is not touched)::

    before                                  after prune(fetch=["y"], feed=["h"])
      (Out=%x) = feed(X=%feed) {col=0}        (Out=%h) = feed(X=%feed) {col=0}
      (Out=%h) = relu(X=%x)                   (Out=%y) = scale(X=%h)
      (Out=%y) = scale(X=%h)                  (Out=%fetch) = fetch(X=%y) {col=0}
      (Out=%z) = exp(X=%x)
      (Out=%fetch) = fetch(X=%y) {col=0}
      (Out=%fetch) = fetch(X=%z) {col=1}

The rules:

1. Block 0 is sliced backward from the fetch targets over def-use, in program order: an op is kept
   when it writes a var still needed below it; then what it writes stops being needed and what
   it reads (its sub-blocks' reads included) becomes needed. An op with sub-blocks counts their
   writes as its own, and keeps its sub-blocks whole.
2. Feed names stop the slice: ops writing them are dropped, their values come from outside.
3. Feed ops are kept for the feed targets kept ops still read (or that are fetched). When the
   program has feed ops, a feed name without one gets a new ``feed`` op. The cols are renumbered
   0..n-1: ``feed_names`` first in their order, then other kept feeds in their old col order.
4. Fetch ops are kept only for ``fetch_names``, one each, with cols in ``fetch_names`` order; when
   the program has fetch ops, a fetch name without one gets a new ``fetch`` op at the end.
5. Vars of block 0 that no remaining op reads or writes are removed, persistable ones included
   (the fetch and needed feed names stay). Blocks whose only referencing ops were dropped are
   removed, and the remaining blocks renumbered (BLOCK attrs and parents follow).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from .attrs import AttrType
from .block import Block
from .dtypes import VarKind
from .errors import IRError
from .operator import Operator
from .program import FEED_VAR, FETCH_VAR, Program, sub_block_ops

__all__ = ["prune"]


def prune(program: Program, fetch_names: Iterable[str] | str,
          feed_names: Iterable[str] | str | None = None) -> Program:
    """A copy of ``program`` holding only what computing ``fetch_names`` needs (rules above).

    Raises:
        IRError: a fetch or feed name is not a var of block 0, is listed twice, or no fetch
            name is given. The program is left as it was.
    """
    fetches = _names(program, fetch_names, "fetch")
    if not fetches:
        raise IRError("prune needs at least one fetch name")
    feeds = _names(program, feed_names, "feed") if feed_names is not None else []
    result = program.clone()
    block = result.global_block()
    reachable_before = _reachable_blocks(result)
    had_feed_ops = any(op.type == "feed" for op in block.ops)
    had_fetch_ops = any(op.type == "fetch" for op in block.ops)
    kept, fed = _backward_slice(block, fetches, set(feeds))
    for op in block.ops:
        if id(op) not in kept and op.type not in ("feed", "fetch"):
            block.remove_op(op)
    _rebuild_feeds(block, kept, [n for n in feeds if n in fed], had_feed_ops)
    _rebuild_fetches(block, fetches, had_fetch_ops)
    _drop_orphan_blocks(result, reachable_before - _reachable_blocks(result))
    _drop_unused_vars(result, set(fetches) | fed)
    return result


def _names(program: Program, given: Iterable[str] | str, role: str) -> list[str]:
    names = [given] if isinstance(given, str) else list(given)
    block = program.global_block()
    unknown = [n for n in names if not (isinstance(n, str) and block.has_var(n))]
    if unknown:
        hints = [difflib.get_close_matches(str(n), list(block.vars), n=1) for n in unknown]
        near = [f"{n!r} (did you mean {h[0]!r}?)" if h else repr(n) for n, h in zip(unknown, hints)]
        raise IRError(f"prune: unknown {role} name(s) {', '.join(near)}: block 0 declares no such var")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise IRError(f"prune: {role} name(s) {', '.join(map(repr, twice))} listed more than once")
    return names


def _backward_slice(block: Block, fetches: list[str], stop: set[str]) -> tuple[set[int], set[str]]:
    """Ids of the ops to keep, and the stop (feed) names that kept ops read or that are fetched."""
    live = set(fetches) - stop
    fed = set(fetches) & stop
    kept: set[int] = set()
    for op in reversed(block.ops):
        if op.type == "fetch" or (op.type == "feed" and set(op.output_names()) & stop):
            continue
        nested = list(sub_block_ops(op))
        writes = set(op.output_names()).union(*(inner.output_names() for inner in nested))
        if not writes & live:
            continue
        kept.add(id(op))
        reads = set(op.input_names()).union(*(inner.input_names() for inner in nested))
        live = (live - writes) | (reads - stop)
        fed |= reads & stop
    return kept, fed


def _rebuild_feeds(block: Block, kept: set[int], feed_names: list[str], had_feed_ops: bool) -> None:
    """Keep the feed ops of kept or needed feed targets (one each), add missing ones for
    ``feed_names`` at the front, renumber the cols."""
    ops = [op for op in block.ops if op.type == "feed"]
    by_target: dict[str, Operator] = {}
    for op in sorted(ops, key=lambda op: op.attr("col", 0)):
        target = op.output("Out")[0] if op.output("Out") else None
        if target is None or target in by_target or not (id(op) in kept or target in feed_names):
            block.remove_op(op)
        else:
            by_target[target] = op
    if had_feed_ops:
        list_var = _list_var(block, ops, "X", FEED_VAR, VarKind.FEED_MINIBATCH)
        for name in feed_names:
            if name not in by_target:
                by_target[name] = block.insert_op(0, Operator("feed", {"X": [list_var]}, {"Out": [name]},
                                                              {"col": 0}))
    order = feed_names + [n for n in by_target if n not in feed_names]
    for col, name in enumerate(n for n in order if n in by_target):
        by_target[name].set_attr("col", col)


def _rebuild_fetches(block: Block, fetches: list[str], had_fetch_ops: bool) -> None:
    """One fetch op per fetch name (existing ones reused), cols in ``fetches`` order."""
    ops = [op for op in block.ops if op.type == "fetch"]
    by_source: dict[str, Operator] = {}
    for op in sorted(ops, key=lambda op: op.attr("col", 0)):
        source = op.input("X")[0] if op.input("X") else None
        if source in fetches and source not in by_source:
            by_source[source] = op
        else:
            block.remove_op(op)
    if had_fetch_ops:
        list_var = _list_var(block, ops, "Out", FETCH_VAR, VarKind.FETCH_LIST)
        for name in fetches:
            if name not in by_source:
                by_source[name] = block.append_op("fetch", {"X": [name]}, {"Out": [list_var]}, {"col": 0})
    for col, name in enumerate(n for n in fetches if n in by_source):
        by_source[name].set_attr("col", col)


def _list_var(block: Block, ops: list[Operator], slot: str, default: str, kind: VarKind) -> str:
    """The feed/fetch list var the program's feed/fetch ops use (declared if it is missing)."""
    for op in ops:
        names = op.input(slot) if slot == "X" else op.output(slot)
        if names:
            return names[0]
    if not block.has_var(default):
        block.create_var(default, kind=kind, persistable=True)
    return default


def _reachable_blocks(program: Program) -> set[int]:
    found = {0}
    for op in program.global_block().ops:
        found.update(op.sub_blocks())
        found.update(idx for inner in sub_block_ops(op) for idx in inner.sub_blocks())
    return found


def _drop_orphan_blocks(program: Program, orphans: set[int]) -> None:
    """Remove the ``orphans`` blocks (and blocks nested in them); renumber the rest."""
    if not orphans:
        return
    dropped: set[int] = set()
    for block in program.blocks:
        if block.idx in orphans or block.parent_idx in dropped:
            dropped.add(block.idx)
    kept = [b for b in program.blocks if b.idx not in dropped]
    new_idx = {b.idx: i for i, b in enumerate(kept)}
    for block in kept:
        block.idx = new_idx[block.idx]
        block.parent_idx = new_idx.get(block.parent_idx, -1)
        if block.forward_block_idx != -1:
            block.forward_block_idx = new_idx.get(block.forward_block_idx, -1)
        for op in block.ops:
            for name, attr in op.typed_attrs().items():
                if attr.type is AttrType.BLOCK:
                    op.set_attr(name, new_idx.get(attr.value, attr.value))
                elif attr.type is AttrType.BLOCKS:
                    op.set_attr(name, [new_idx.get(i, i) for i in attr.value])
    program.blocks = kept


def _drop_unused_vars(program: Program, keep: set[str]) -> None:
    used = {name for op in program.all_ops() for name in op.input_names() + op.output_names()}
    block = program.global_block()
    for name in block.vars:
        if name not in used and name not in keep:
            block.remove_var(name)
