"""Rewrite rules and the one rewrite driver, ``apply_rules``.

A rule is data: a Pattern plus a function receiving the rewrite context and the pattern's
captures as keyword arguments, returning the replacement ops, or declining with a reason::

    def fuse_relu(ctx, *, act, conv, x, w):
        if conv.attr("groups") != 1:
            return ctx.decline("the conv is grouped")     # or raise it; a bare None says nothing
        return copy_op(conv, type="fused_conv2d", ...)

    FUSE = Rules([
        # conv2d + relu -> fused_conv2d
        Rule(pattern("act:relu(X=conv:conv2d(Input=x, Filter=w))"), fuse_relu, "conv2d + relu -> fused_conv2d"),
    ])
    apply_rules(program, FUSE + OTHER, name="fuse conv+act", scope=scope)

The function's keyword parameters are checked against the pattern's captures when the Rule is
made: a capture without a parameter, or a parameter without a default that is no capture (a
misspelling), is a PassError naming the rule. A decline is a *near miss*: the pattern matched
but the function said no. The driver logs each (rule, root op, reason) at debug level, and
``collect_near_misses()`` gathers them (``PassManager(debug=True)`` shows them per pass).

An ``in_place`` rule edits the block itself through the IR (removing an op and sending its
readers to its input, say) and returns True, or declines; it must check everything before it
changes anything. The edits of the sweep so far are spliced in before it runs.

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

import contextlib
import contextvars
import inspect
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.errors import PassError
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from ..ir.variable import Variable
from .base import PassResult, register_pass
from .pattern import Match, Pattern

__all__ = ["Rule", "Rules", "RewriteContext", "RewriteStats", "Decline", "NearMiss", "apply_rules", "copy_op",
           "register_rules", "collect_near_misses"]

log = logging.getLogger("halfway.passes")

class Decline(Exception):
    """A rule function's "not here", with the reason: returned or raised (``ctx.decline(...)``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Replacement = Operator | Sequence[Operator] | Decline | bool | None
RuleFn = Callable[..., Replacement]

_NO_REASON = "declined without a reason"


@attrs.frozen
class NearMiss:
    """A match whose rule function declined: the rule, the root op it matched at, and why."""

    rule: str
    root: str
    reason: str = _NO_REASON

    def __str__(self) -> str:
        return f"{self.rule!r} at {self.root}: {self.reason}"


@attrs.frozen
class Rule:
    """``pattern`` -> ``fn(ctx, **captures)``; ``name`` is the one-line summary used in stats.
    ``in_place``: ``fn`` edits the block itself and returns True (module docstring)."""

    pattern: Pattern
    fn: RuleFn
    name: str
    in_place: bool = False

    def __attrs_post_init__(self) -> None:
        _check_parameters(self)


def _check_parameters(rule: Rule) -> None:
    """The rule function takes the context, then exactly the pattern's captures as keywords."""
    where = f"rule {rule.name!r} ({rule.pattern.text})"
    try:
        parameters = list(inspect.signature(rule.fn).parameters.values())[1:]
    except (TypeError, ValueError) as e:
        raise PassError(f"{where}: cannot read the parameters of {rule.fn!r}: {e}") from e
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        raise PassError(f"{where}: the function takes **kwargs, which would hide a misspelled capture; "
                        f"name the captures {sorted(rule.pattern.captures)} as parameters")
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unused = sorted(rule.pattern.captures - named)
    if unused:
        raise PassError(f"{where}: the pattern captures {unused} but the function has no parameter for them")
    unknown = sorted(p.name for p in parameters if p.name not in rule.pattern.captures and p.default is p.empty
                     and p.kind is not p.VAR_POSITIONAL)
    if unknown:
        raise PassError(f"{where}: the function's parameters {unknown} are no capture of the pattern "
                        f"(captures: {sorted(rule.pattern.captures)}); misspelled?")


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
    """How many times each rule fired, how many sweeps it took, and how many near misses
    (declined matches) the sweeps met."""

    counts: Counter[str] = attrs.field(factory=Counter)
    sweeps: int = 0
    declined: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class RewriteContext:
    """What a rule function gets besides its captures: the block, the scope, what the pass
    handed ``apply_rules`` as ``state`` (the names it must keep, its options), and helpers that
    create vars and parameters under fresh names (undone if the rule declines)."""

    def __init__(self, block: Block, scope: Scope | None, rule: str, state: Any = None) -> None:
        self.block = block
        self.scope = scope
        self.rule = rule
        self.state = state
        self.created: list[Variable] = []
        self.params: list[str] = []

    def decline(self, reason: str) -> Decline:
        """A decline with ``reason``, to return (or raise) from the rule function."""
        return Decline(reason)

    @property
    def program(self) -> Program:
        assert self.block.program is not None
        return self.block.program

    def var(self, name: str) -> Variable:
        return self.block.find_var(name)

    def value(self, name: str) -> np.ndarray | None:
        """The scope's value of ``name`` (None when there is no scope or no value)."""
        return self.scope.find(name) if self.scope is not None else None

    def values(self, *names: str) -> list[np.ndarray]:
        """The scope's values of ``names``; raises Decline naming those it does not hold."""
        found = [self.value(n) for n in names]
        missing = [n for n, v in zip(names, found) if v is None]
        if missing:
            raise Decline(f"the scope holds no value for {missing}")
        return found  # type: ignore[return-value]

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


_COLLECTOR: contextvars.ContextVar[list[NearMiss] | None] = contextvars.ContextVar("near_misses", default=None)


@contextlib.contextmanager
def collect_near_misses() -> Iterator[list[NearMiss]]:
    """Gather the near misses of every ``apply_rules`` run inside the block into the list it
    yields (each (rule, root op, reason) once)."""
    found: list[NearMiss] = []
    token = _COLLECTOR.set(found)
    try:
        yield found
    finally:
        _COLLECTOR.reset(token)


def apply_rules(program: Program, rules: Rules, *, name: str, scope: Scope | None = None, state: Any = None,
                max_sweeps: int = 64) -> RewriteStats:
    """Rewrite ``program`` in place with ``rules`` until nothing matches (module docstring).
    ``state`` reaches the rule functions as ``ctx.state``.

    Raises:
        PassError: a rule broke the replacement contract, or sweeps kept changing the program
            after ``max_sweeps`` (the rules loop).
    """
    stats = RewriteStats()
    driver = _Driver(name, scope, state, stats)
    protected = frozenset(n for block in program.blocks[1:] for o in block.ops for n in o.input_names())
    while True:
        changed = sum(driver.sweep(block, rules, protected) for block in program.blocks)
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


class _Driver:
    """One ``apply_rules`` run: its name, scope and state, the stats, the near misses seen."""

    def __init__(self, name: str, scope: Scope | None, state: Any, stats: RewriteStats) -> None:
        self.name, self.scope, self.state, self.stats = name, scope, state, stats
        self.seen: set[tuple[str, int, str]] = set()

    def sweep(self, block: Block, rules: Rules, protected: frozenset[str]) -> int:
        claimed: dict[int, Operator] = {}
        edits: list[tuple[list[Operator], list[Operator]]] = []
        changed = 0
        for candidate in block.ops:
            if id(candidate) in claimed or candidate.block is not block:
                continue
            for rule in rules.for_type(candidate.type):
                found = rule.pattern.match(candidate, claimed, protected)
                if found is None:
                    continue
                if rule.in_place and edits:
                    _splice(block, edits, protected)
                    edits = []
                new = self._rewrite(block, rule, candidate, found)
                if new is None:
                    continue
                if rule.in_place:
                    changed += 1
                else:
                    claimed.update((id(o), o) for o in found.ops)
                    edits.append((found.ops, new))
                self.stats.counts[rule.name] += 1
                break
        if edits:
            _splice(block, edits, protected)
        return changed + len(edits)

    def _rewrite(self, block: Block, rule: Rule, root: Operator, found: Match) -> list[Operator] | None:
        ctx = RewriteContext(block, self.scope, rule.name, self.state)
        try:
            result = rule.fn(ctx, **found.captures)
        except Decline as e:
            result = e
        if result is None or result is False or isinstance(result, Decline):
            ctx.undo()
            self._near_miss(rule, root, result.reason if isinstance(result, Decline) else _NO_REASON)
            return None
        if rule.in_place:
            if result is not True:
                raise PassError(f"rewrite {self.name!r}, rule {rule.name!r}: an in-place rule returns True "
                                f"or declines, got {result!r}")
            return []
        if result is True:
            raise PassError(f"rewrite {self.name!r}, rule {rule.name!r}: only an in-place rule returns True; "
                            f"return the replacement op(s) or decline")
        new = [result] if isinstance(result, Operator) else list(result)
        _check_replacement(block, rule, found.ops, new, ctx, self.name)
        return new

    def _near_miss(self, rule: Rule, root: Operator, reason: str) -> None:
        key = (rule.name, id(root), reason)
        if key in self.seen:
            return
        self.seen.add(key)
        self.stats.declined += 1
        collector = _COLLECTOR.get()
        if collector is None and not log.isEnabledFor(logging.DEBUG):
            return
        miss = NearMiss(rule.name, root.describe(), reason)
        log.debug("rewrite %r: near miss: %s", self.name, miss)
        if collector is not None:
            collector.append(miss)


def _splice(block: Block, edits: list[tuple[list[Operator], list[Operator]]], protected: frozenset[str]) -> None:
    block.splice(edits)
    _drop_dead_vars(block, edits, protected)


def _check_replacement(block: Block, rule: Rule, old: list[Operator], new: list[Operator],
                       ctx: RewriteContext, name: str) -> None:
    where = f"rewrite {name!r}, rule {rule.name!r}"
    if not new or not all(isinstance(o, Operator) and o.block is None for o in new):
        raise PassError(f"{where}: the rule must return detached Operators (or decline), got {new!r}")
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
