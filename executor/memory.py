"""The activation memory plan: lifetimes from the op order, buffers reused by liveness.

Each activation (not a feed, not a parameter) lives from the op that writes it to the last op
that reads it (fetched vars live to the end). Buffers are assigned greedily in op order: a value
takes the smallest free buffer at least its size, or a new one, and its buffer is freed after
its last reader. An op may write in place into an input buffer that dies at that op when its
schema says so (``inplace``) and the sizes match.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from attrs import define, field

__all__ = ["Lifetime", "MemoryPlan", "plan_memory"]


@define
class Lifetime:
    name: str
    nbytes: int
    first: int
    last: int


@define
class MemoryPlan:
    buffer_of: dict[str, int] = field(factory=dict)
    buffer_bytes: list[int] = field(factory=list)
    inplace: dict[str, str] = field(factory=dict)
    no_reuse_bytes: int = 0
    peak_bytes: int = 0

    @property
    def planned_bytes(self) -> int:
        """Bytes of all buffers the plan uses (what an arena would allocate)."""
        return sum(self.buffer_bytes)


def plan_memory(lifetimes: Sequence[Lifetime], inplace_pairs: Mapping[str, str] | None = None) -> MemoryPlan:
    """Assign buffers to values. ``inplace_pairs`` maps an output to the input it may overwrite."""
    plan = MemoryPlan(no_reuse_bytes=sum(lt.nbytes for lt in lifetimes))
    by_name = {lt.name: lt for lt in lifetimes}
    free: list[tuple[int, int]] = []  # (size, buffer index), sorted
    dying: dict[int, list[str]] = {}
    live = 0
    for lt in sorted(lifetimes, key=lambda lt: (lt.first, lt.name)):
        for step in [s for s in dying if s < lt.first]:
            for name in dying.pop(step):
                buffer = plan.buffer_of[name]
                if not _taken_by_inplace(plan, name):
                    bisect.insort(free, (plan.buffer_bytes[buffer], buffer))
                    live -= plan.buffer_bytes[buffer]
        source = (inplace_pairs or {}).get(lt.name)
        if (source in plan.buffer_of and by_name[source].last == lt.first
                and by_name[source].nbytes == lt.nbytes):
            plan.buffer_of[lt.name] = plan.buffer_of[source]
            plan.inplace[lt.name] = source
        else:
            plan.buffer_of[lt.name] = _take(plan, free, lt.nbytes)
            live += plan.buffer_bytes[plan.buffer_of[lt.name]]
        plan.peak_bytes = max(plan.peak_bytes, live)
        dying.setdefault(lt.last, []).append(lt.name)
    return plan


def _taken_by_inplace(plan: MemoryPlan, name: str) -> bool:
    """A dead value whose buffer an in-place output took over is not freed with it."""
    return name in plan.inplace.values()


def _take(plan: MemoryPlan, free: list[tuple[int, int]], nbytes: int) -> int:
    i = bisect.bisect_left(free, (nbytes, -1))
    if i < len(free):
        return free.pop(i)[1]
    plan.buffer_bytes.append(nbytes)
    return len(plan.buffer_bytes) - 1
