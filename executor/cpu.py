"""The numpy backend: kernels are host callables returning new arrays (or writing into a dying
input when the memory plan lets them), so a handle is an index into the run's list of values,
and a value is dropped after its last reader. Every run has its own list: a prepared program
may run from several threads at once. A run of pointwise ops, each reading the one before, is
one call of a compiled chain (``fuse``): numpy's per-op call costs more than tiny ops' work."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..ir.dtypes import DType
from ..ir.ops.expr import Expr
from ..ir.schema import TensorInfo
from ..kernels.numpy.heap import keep_freed_memory
from ..kernels.numpy.pointwise import Chain, chainable, compiled_chain, pointwise_of, swapped
from ..kernels.registry import Kernel
from .backend import Backend, Binding, Run, StepFailure, register_backend
from .memory import MemoryPlan

__all__ = ["NumpyBackend"]


@register_backend
class NumpyBackend(Backend):
    name = "numpy"

    def allocate(self, tensors: Mapping[str, TensorInfo], plan: MemoryPlan, parameters: Mapping[str, np.ndarray],
                 feeds: Sequence[str], shared: Mapping[str, Any] | None = None) -> dict[str, int]:
        """An index per tensor; parameters sit in every run's list from the start (the host's
        memory is every program's: none is ``shared``). The heap keeps freed memory from here on
        (``halfway.kernels.numpy.heap``)."""
        keep_freed_memory()
        self._template = [parameters.get(name) for name in tensors]
        return {name: index for index, name in enumerate(tensors)}

    def bind(self, kernel: Kernel, inputs: Sequence[int], outputs: Sequence[int], dying: Sequence[int]) -> Binding:
        return Binding(_run(kernel, tuple(inputs), tuple(outputs), tuple(dying)), 1)

    def fuse(self, runs: Sequence[Run]) -> list[tuple[Run, int]]:
        """Each run of two or more pointwise ops, every one reading the output of the one before
        (which nothing else reads) and all of them at most one other input, as one call of a
        compiled chain (``kernels.numpy.pointwise``)."""
        fused: list[tuple[Run, int]] = []
        chain = _Chain()
        for run in runs:
            link = _link(run)
            if link is not None and chain.take(run, link):
                continue
            fused += chain.fused()
            chain = _Chain()
            if link is None or not chain.take(run, link):
                fused.append((run, 1))
        return fused + chain.fused()

    def start(self) -> list[Any]:
        return list(self._template)

    def upload(self, state: list[Any], handle: int, array: np.ndarray) -> None:
        state[handle] = array

    def download(self, state: list[Any], handle: int, dtype: DType) -> np.ndarray:
        value: np.ndarray = state[handle]
        return value


class _Link(NamedTuple):
    """What a pointwise op's run tells ``NumpyBackend.fuse``: its math (in ``X``, and ``Y`` for a
    second input), and its slots."""

    expr: Expr
    inputs: tuple[int, ...]
    output: int
    dying: tuple[int, ...]

    def placed(self, value: int) -> tuple[Expr, int | None] | None:
        """Its math with the chain's value (in slot ``value``) as ``X``, and the slot of its other
        input (None: it has none); None where both inputs are the chain's value."""
        if self.inputs == (value,):
            return self.expr, None
        a, b = self.inputs
        if (a == value) == (b == value):
            return None
        return (self.expr, b) if a == value else (swapped(self.expr), a)


def _run(kernel: Kernel, ins: tuple[int, ...], outs: tuple[int, ...], dying: tuple[int, ...]) -> Run:
    """The op's call on a run's values; one or two inputs and one output (most ops) have their
    own, shorter forms, and a pointwise kernel's run carries a ``link`` of a chain."""
    if len(ins) == 1 and len(outs) == 1:
        (a,), (out,) = ins, outs

        def unary(values: list[Any]) -> None:
            values[out] = kernel(values[a])
            for slot in dying:
                values[slot] = None

        return _linked(unary, kernel, ins, out, dying)

    if len(ins) == 2 and len(outs) == 1:
        (a, b), (out,) = ins, outs

        def binary(values: list[Any]) -> None:
            values[out] = kernel(values[a], values[b])
            for slot in dying:
                values[slot] = None

        return _linked(binary, kernel, ins, out, dying)

    def call(values: list[Any]) -> None:
        result = kernel(*[values[i] for i in ins])
        if len(outs) == 1:
            values[outs[0]] = result
        else:
            for slot, value in zip(outs, result):
                values[slot] = value
        for slot in dying:
            values[slot] = None

    return call


def _linked(run: Run, kernel: Kernel, ins: tuple[int, ...], out: int, dying: tuple[int, ...]) -> Run:
    """``run``, carrying its ``_Link`` where ``kernel`` is pointwise and the machine computes it."""
    expr = pointwise_of(kernel)
    if expr is not None and chainable(expr):
        run.link = _Link(expr, ins, out, dying)  # type: ignore[attr-defined]
    return run


def _link(run: Run) -> _Link | None:
    link: _Link | None = getattr(run, "link", None)
    return link


class _Chain:
    """Runs of pointwise ops being gathered into a chain (``NumpyBackend.fuse``): each reads the
    one before's output, which nothing else reads, and all of them at most one other input."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.exprs: list[Expr] = []
        self.side: int | None = None

    def take(self, run: Run, link: _Link) -> bool:
        """Add ``run`` where it continues the chain (or starts one); False, adding nothing, where not."""
        if self.runs:
            last = _link(self.runs[-1])
            assert last is not None
            if last.output not in link.inputs or last.output not in link.dying:
                return False
            placed = link.placed(last.output)
        else:
            placed = link.placed(link.inputs[0])
        if placed is None:
            return False
        expr, side = placed
        if side is not None and self.side not in (None, side):
            return False
        self.runs.append(run)
        self.exprs.append(expr)
        self.side = side if side is not None else self.side
        return True

    def fused(self) -> list[tuple[Run, int]]:
        """The chain as one run of the compiled chain, or each op alone where the chain does not
        compile or is one op long."""
        runs = self.runs
        compute = compiled_chain(self.exprs) if len(runs) > 1 else None
        if compute is None:
            return [(run, 1) for run in runs]
        links = [link for link in map(_link, runs) if link is not None]
        dying = tuple(slot for link in links for slot in link.dying)
        return [(_chain_run(compute, runs, links[0].inputs[0], self.side, links[-1].output, dying), len(runs))]


def _chain_run(compute: Chain, runs: list[Run], a: int, side: int | None, out: int, dying: tuple[int, ...]) -> Run:
    def chain(values: list[Any]) -> None:
        result = compute(values[a], None if side is None else values[side])
        if result is None:
            _in_turn(runs, values)
            return
        for slot in dying:
            values[slot] = None
        values[out] = result

    return chain


def _in_turn(runs: Sequence[Run], values: list[Any]) -> None:
    """``runs`` one by one (values the chain's machine does not take), saying which failed."""
    for offset, run in enumerate(runs):
        try:
            run(values)
        except Exception as e:
            raise StepFailure(offset, e) from e
