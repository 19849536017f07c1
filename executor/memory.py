"""The activation memory plan: values grouped by shared memory, buffers reused by liveness.

Values that share memory form one group living in one buffer:

- a *view* (an output the schema declares may share an input's memory: reshapes, transposes,
  slices, split pieces) joins its input's group;
- an *in-place* output (a pair the schema allows) joins its input's group when nothing reads
  that group after the op, the group holds an activation (never a feed or a parameter, which
  the caller owns) and the sizes match.

A group lives from the op that writes its first value to the last op that reads any of its
values (a fetched value lives to the end). A view of a feed or a parameter is no activation:
it lives in the caller's memory and is never written in place. Buffers are assigned greedily in
op order: a group takes the smallest free buffer at least its size, or a new one, and frees it
after its last reader.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from attrs import define, field

__all__ = ["Value", "Lifetime", "MemoryPlan", "plan_memory"]


@define
class Value:
    """One value of the program as the plan sees it: its size, the step writing it (None for a
    feed or parameter), the last step reading it, and what it may share memory with."""

    name: str
    nbytes: int
    first: int | None
    last: int
    view_of: str | None = None
    inplace_of: str | None = None


@define
class Lifetime:
    """A group of values sharing one buffer: its root value, size and live steps."""

    name: str
    nbytes: int
    first: int
    last: int


@define
class MemoryPlan:
    buffer_of: dict[str, int] = field(factory=dict)
    buffer_bytes: list[int] = field(factory=list)
    inplace: dict[str, str] = field(factory=dict)
    views: dict[str, str] = field(factory=dict)
    no_reuse_bytes: int = 0
    peak_bytes: int = 0

    @property
    def planned_bytes(self) -> int:
        """Bytes of all buffers the plan uses (what an arena would allocate)."""
        return sum(self.buffer_bytes)


def plan_memory(values: Sequence[Value], *, reuse: bool = True) -> MemoryPlan:
    """Group ``values`` (in op order) by shared memory and assign buffers to the activation groups.

    ``reuse=False`` plans one buffer per group, never freed, and no in-place writes (views still
    share their source's buffer).
    """
    groups = _Groups(values)
    plan = MemoryPlan(no_reuse_bytes=sum(v.nbytes for v in values if v.first is not None and v.view_of is None))
    for value in sorted(values, key=lambda v: (v.first if v.first is not None else -1)):
        if value.view_of is not None and groups.join(value.name, value.view_of):
            plan.views[value.name] = groups.root(value.name)
        elif reuse and value.inplace_of is not None and groups.may_overwrite(value.inplace_of, value):
            groups.join(value.name, value.inplace_of)
            plan.inplace[value.name] = value.inplace_of
    lifetimes = groups.lifetimes()
    buffers = _assign(lifetimes, plan, reuse)
    for value in values:
        root = groups.root(value.name)
        if root in buffers:
            plan.buffer_of[value.name] = buffers[root]
    return plan


class _Groups:
    """Union of values sharing memory; each group's root is its first value."""

    def __init__(self, values: Iterable[Value]) -> None:
        self.values = {v.name: v for v in values}
        self.parent: dict[str, str] = {}
        self.last = {name: v.last for name, v in self.values.items()}

    def root(self, name: str) -> str:
        while name in self.parent:
            name = self.parent[name]
        return name

    def join(self, name: str, into: str) -> bool:
        """Put ``name``'s group into ``into``'s; False when ``into`` is unknown (not planned)."""
        if into not in self.values:
            return False
        a, b = self.root(name), self.root(into)
        if a != b:
            self.parent[a] = b
            self.last[b] = max(self.last[a], self.last[b])
        return True

    def may_overwrite(self, source: str, value: Value) -> bool:
        if source not in self.values:
            return False
        root = self.values[self.root(source)]
        return (root.first is not None and self.last[root.name] == value.first
                and self.values[source].nbytes == value.nbytes)

    def lifetimes(self) -> list[Lifetime]:
        return [Lifetime(v.name, v.nbytes, v.first, self.last[v.name]) for name, v in self.values.items()
                if name not in self.parent and v.first is not None]


def _assign(lifetimes: list[Lifetime], plan: MemoryPlan, reuse: bool) -> dict[str, int]:
    """Greedy best-fit in op order; returns root name -> buffer index and sets the peak."""
    buffer_of: dict[str, int] = {}
    free: list[tuple[int, int]] = []  # (size, buffer index), sorted
    dying: dict[int, list[str]] = {}
    live = 0
    for lt in sorted(lifetimes, key=lambda lt: (lt.first, lt.name)):
        for step in [s for s in dying if s < lt.first]:
            for name in dying.pop(step):
                bisect.insort(free, (plan.buffer_bytes[buffer_of[name]], buffer_of[name]))
                live -= plan.buffer_bytes[buffer_of[name]]
        buffer_of[lt.name] = _take(plan, free, lt.nbytes)
        live += plan.buffer_bytes[buffer_of[lt.name]]
        plan.peak_bytes = max(plan.peak_bytes, live)
        if reuse:
            dying.setdefault(lt.last, []).append(lt.name)
    return buffer_of


def _take(plan: MemoryPlan, free: list[tuple[int, int]], nbytes: int) -> int:
    i = bisect.bisect_left(free, (nbytes, -1))
    if i < len(free):
        return free.pop(i)[1]
    plan.buffer_bytes.append(nbytes)
    return len(plan.buffer_bytes) - 1
