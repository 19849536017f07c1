"""Rewrite rules and the one rewrite driver, ``apply_rules``.

A rule is data: a Pattern plus a function receiving the rewrite context and the pattern's
captures as keyword arguments, returning the replacement ops (or None: no rewrite here)::

    FUSE = Rules([
        # conv2d + relu -> fused_conv2d
        Rule(pattern("act:relu(X=conv:conv2d(Input=x, Filter=w))"), fuse_relu, "conv2d + relu -> fused_conv2d"),
    ])
    apply_rules(program, FUSE + OTHER, name="fuse conv+act", scope=scope)

The driver sweeps each block in program order (producers before their readers), trying at
each op the rules indexed by its type, in rule order; the first rule that rewrites wins. A match
claims its ops, so matches never overlap: an op already claimed in this sweep is neither a root
nor part of another match. All replacements of a sweep are spliced in at once
(``Block.splice``) where each match's root stood, and sweeps repeat until one changes nothing
— at most ``max_sweeps`` (the loop guard). A sweep costs O(ops), so a rewrite costs
O(ops x sweeps), not O(ops x matches); chains of rules (conv + bias, then + relu) take one sweep
per link.

A replacement may read only vars the matched ops read and vars the context created; it must
write every var of the match that is read outside it, and may write nothing else the program
already has. A rule breaking this is a PassError naming the rule.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from halfway.ir.block import Block
from halfway.ir.dtypes import DType
from halfway.ir.errors import PassError
from halfway.ir.operator import Operator
from halfway.ir.program import Program
from halfway.ir.scope import Scope
from halfway.ir.variable import Variable
from halfway.passes.base import PassResult, register_pass
from halfway.passes.pattern import Match, Pattern

__all__ = ["Rule", "Rules", "RewriteContext", "RewriteStats", "apply_rules", "copy_op", "register_rules"]

log = logging.getLogger("halfway.passes")

Replacement = Operator | Sequence[Operator] | None
RuleFn = Callable[..., Replacement]


@attrs.frozen
class Rule:
    """``pattern`` -> ``fn(ctx, **captures)``; ``name`` is the one-line summary used in stats."""

    pattern: Pattern
    fn: RuleFn
    name: str


class Rules:
    """An ordered, immutable rule list indexed by root op type; ``a + b`` concatenates."""

    __slots__ = ("rules", "_by_type")

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self._by_type: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for op_type in sorted(rule.pattern.root_types):
                self._by_type.setdefault(op_type, []).append(rule)

    def for_type(self, op_type: str) -> Sequence[Rule]:
        return self._by_type.get(op_type, ())

    def __add__(self, other: Rules) -> Rules:
        return Rules(self.rules + other.rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


@attrs.define
class RewriteStats:
    """How many times each rule fired, and how many sweeps it took."""

    counts: Counter[str] = attrs.field(factory=Counter)
    sweeps: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class RewriteContext:
    """What a rule function gets besides its captures: the block, the scope, and helpers that
    create vars and parameters under fresh names (undone if the rule returns None)."""

    def __init__(self, block: Block, scope: Scope | None, rule: str) -> None:
        self.block = block
        self.scope = scope
        self.rule = rule
        self.created: list[Variable] = []
        self.params: list[str] = []

    @property
    def program(self) -> Program:
        assert self.block.program is not None
        return self.block.program

    def var(self, name: str) -> Variable:
        return self.block.find_var(name)

    def value(self, name: str) -> np.ndarray | None:
        """The scope's value of ``name`` (None when there is no scope or no value)."""
        return self.scope.find(name) if self.scope is not None else None

    def new_var(self, prefix: str, *, like: str | None = None, shape: Sequence[int] | None = None,
                dtype: Any = None) -> str:
        """Declare a temporary var in the block (shape/dtype from ``like`` unless given)."""
        model = self.var(like) if like is not None else None
        name = self.program.unique_name(prefix)
        created = self.block.create_var(
            name, dtype=dtype if dtype is not None else (model.dtype if model is not None else DType.float32),
            shape=shape if shape is not None else (model.shape if model is not None else ()))
        self.created.append(created)
        return name

    def new_param(self, prefix: str, value: np.ndarray) -> str:
        """A new persistable var of the global block holding ``value`` in the scope."""
        if self.scope is None:
            raise PassError(f"rule {self.rule!r} creates parameters: it needs a Scope")
        name = self.program.unique_name(prefix)
        while name in self.scope:
            name = self.program.unique_name(prefix)
        created = self.program.global_block().create_var(name, dtype=DType.from_any(value.dtype), shape=value.shape,
                                                         persistable=True)
        self.created.append(created)
        self.scope.set(name, value)
        self.params.append(name)
        return name

    def undo(self) -> None:
        for created in self.created:
            if created.block is not None:
                created.block.remove_var(created.name, force=True)
        if self.scope is not None:
            for name in self.params:
                self.scope.remove(name)
        self.created.clear()
        self.params.clear()


def apply_rules(program: Program, rules: Rules, *, name: str, scope: Scope | None = None,
                max_sweeps: int = 64) -> RewriteStats:
    """Rewrite ``program`` in place with ``rules`` until nothing matches (module docstring).

    Raises:
        PassError: a rule broke the replacement contract, or sweeps kept changing the program
            after ``max_sweeps`` (the rules loop).
    """
    stats = RewriteStats()
    protected = frozenset(n for block in program.blocks[1:] for o in block.ops for n in o.input_names())
    while True:
        changed = sum(_sweep(block, rules, name, scope, protected, stats) for block in program.blocks)
        stats.sweeps += 1
        if not changed:
            break
        if stats.sweeps >= max_sweeps:
            fired = ", ".join(f"{r} x{n}" for r, n in stats.counts.most_common(3))
            raise PassError(f"rewrite {name!r} still changed the program after {max_sweeps} sweeps "
                            f"(the rules loop; most fired: {fired})")
    if stats.total:
        log.debug("rewrite %r: %s in %d sweeps", name, dict(stats.counts), stats.sweeps)
    return stats


def _sweep(block: Block, rules: Rules, name: str, scope: Scope | None, protected: frozenset[str],
           stats: RewriteStats) -> int:
    claimed: dict[int, Operator] = {}
    edits: list[tuple[list[Operator], list[Operator]]] = []
    for candidate in block.ops:
        if id(candidate) in claimed:
            continue
        for rule in rules.for_type(candidate.type):
            found = rule.pattern.match(candidate, claimed, protected)
            if found is None:
                continue
            new = _rewrite(block, rule, found, scope, name)
            if new is None:
                continue
            claimed.update((id(o), o) for o in found.ops)
            edits.append((found.ops, new))
            stats.counts[rule.name] += 1
            break
    if edits:
        block.splice(edits)
        _drop_dead_vars(block, edits, protected)
    return len(edits)


def _rewrite(block: Block, rule: Rule, found: Match, scope: Scope | None, name: str) -> list[Operator] | None:
    ctx = RewriteContext(block, scope, rule.name)
    result = rule.fn(ctx, **found.captures)
    if result is None:
        ctx.undo()
        return None
    new = [result] if isinstance(result, Operator) else list(result)
    _check_replacement(block, rule, found.ops, new, ctx, name)
    return new


def _check_replacement(block: Block, rule: Rule, old: list[Operator], new: list[Operator],
                       ctx: RewriteContext, name: str) -> None:
    where = f"rewrite {name!r}, rule {rule.name!r}"
    if not new or not all(isinstance(o, Operator) and o.block is None for o in new):
        raise PassError(f"{where}: the rule must return detached Operators (or None), got {new!r}")
    created = {v.name for v in ctx.created}
    read = {n for o in old for n in o.input_names()} | created
    inner_written = {n for o in new for n in o.output_names()}
    old_written = {n for o in old for n in o.output_names()}
    for o in new:
        stray = [n for n in o.input_names() if n not in read and n not in inner_written]
        if stray:
            raise PassError(f"{where}: replacement {o.describe()} reads {stray}, which the matched ops did not")
        foreign = [n for n in o.output_names() if n not in old_written and n not in created]
        if foreign:
            raise PassError(f"{where}: replacement {o.describe()} writes {foreign}, which the match did not write")
    old_ids = {id(o) for o in old}
    for written in sorted(old_written - inner_written):
        if block.has_var(written) and block.var(written).persistable:
            continue  # an in-place parameter update (batch_norm's MeanOut): the value stays in the scope
        outside = [u for u in block.uses(written) if id(u[0]) not in old_ids]
        if outside:
            raise PassError(f"{where}: {written!r} is read by {outside[0][0].describe()} but the replacement "
                            f"no longer writes it")


def _drop_dead_vars(block: Block, edits: list[tuple[list[Operator], list[Operator]]],
                    protected: frozenset[str]) -> None:
    """Remove the non-persistable vars the replaced ops wrote that nothing reads or writes now."""
    names = {n for old, _ in edits for o in old for n in o.output_names()}
    for var_name in sorted(names):
        if var_name in protected or not block.has_var(var_name) or block.var(var_name).persistable:
            continue
        if not block.uses(var_name) and not block.producers(var_name):
            block.remove_var(var_name, force=True)



def copy_op(source: Operator, *, inputs: Mapping[str, Any] | None = None, outputs: Mapping[str, Any] | None = None,
            type: str | None = None, attrs: Mapping[str, Any] | None = None) -> Operator:
    """A detached copy of ``source`` (attrs keep their wire types) with some slots, the type or
    attrs replaced; a slot set to None or () is left out."""
    new_inputs = {**source.inputs, **(inputs or {})}
    new_outputs = {**source.outputs, **(outputs or {})}
    new = Operator(type or source.type, {k: v for k, v in new_inputs.items() if v},
                   {k: v for k, v in new_outputs.items() if v})
    for attr_name, attr in source.typed_attrs().items():
        new.set_attr(attr_name, attr.value, attr.type)
    for attr_name, value in (attrs or {}).items():
        new.set_attr(attr_name, value)
    return new


def register_rules(name: str, rules: Rules | Sequence[Rules], summary: str, *, needs_scope: bool = False) -> None:
    """Register pass ``name`` applying ``rules`` — or several rule lists, one after the other
    (each to its fixpoint) — with stats: rewrites in all and per rule."""
    phases = [rules] if isinstance(rules, Rules) else list(rules)

    def run(program: Program, scope: Scope | None, options: None) -> PassResult:
        counts: Counter[str] = Counter()
        for i, phase in enumerate(phases):
            label = name if len(phases) == 1 else f"{name} ({i + 1}/{len(phases)})"
            counts.update(apply_rules(program, phase, name=label, scope=scope).counts)
        total = sum(counts.values())
        return PassResult(program, total > 0, {"rewrites": total, **counts})

    run.__doc__ = summary
    run.__name__ = name
    register_pass(name, needs_scope=needs_scope)(run)
