"""The numpy backend: kernels are host callables returning new arrays (or writing into a dying
input when the memory plan lets them), so a handle is an index into the run's list of values,
and a value is dropped after its last reader. Every run has its own list: a prepared program
may run from several threads at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..ir.dtypes import DType
from ..ir.ops.expr import Expr
from ..ir.schema import TensorInfo
from ..kernels.numpy.heap import keep_freed_memory
from ..kernels.numpy.pointwise import chainable, compiled_chain, pointwise_of
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
        (which nothing else reads), as one call of a compiled chain (``kernels.numpy.pointwise``)."""
        fused: list[tuple[Run, int]] = []
        chain: list[Run] = []
        for run in runs:
            link = _link(run)
            if chain and (link is None or not _continues(_link(chain[-1]), link)):
                fused += _chained(chain)
                chain = []
            if link is None:
                fused.append((run, 1))
            else:
                chain.append(run)
        return fused + _chained(chain)

    def start(self) -> list[Any]:
        return list(self._template)

    def upload(self, state: list[Any], handle: int, array: np.ndarray) -> None:
        state[handle] = array

    def download(self, state: list[Any], handle: int, dtype: DType) -> np.ndarray:
        value: np.ndarray = state[handle]
        return value


class _Link(NamedTuple):
    """What a pointwise op's run tells ``NumpyBackend.fuse``: its math, and its slots."""

    expr: Expr
    input: int
    output: int
    dying: tuple[int, ...]


def _run(kernel: Kernel, ins: tuple[int, ...], outs: tuple[int, ...], dying: tuple[int, ...]) -> Run:
    """The op's call on a run's values; one or two inputs and one output (most ops) have their
    own, shorter forms, and a pointwise kernel's run carries a ``link`` of a chain."""
    if len(ins) == 1 and len(outs) == 1:
        (a,), (out,) = ins, outs

        def unary(values: list[Any]) -> None:
            values[out] = kernel(values[a])
            for slot in dying:
                values[slot] = None

        expr = pointwise_of(kernel)
        if expr is not None and chainable(expr):
            unary.link = _Link(expr, a, out, dying)  # type: ignore[attr-defined]
        return unary

    if len(ins) == 2 and len(outs) == 1:
        (a, b), (out,) = ins, outs

        def binary(values: list[Any]) -> None:
            values[out] = kernel(values[a], values[b])
            for slot in dying:
                values[slot] = None

        return binary

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


def _link(run: Run) -> _Link | None:
    link: _Link | None = getattr(run, "link", None)
    return link


def _continues(before: _Link | None, link: _Link) -> bool:
    return before is not None and link.input == before.output and before.output in link.dying


def _chained(runs: list[Run]) -> list[tuple[Run, int]]:
    """``runs`` (a chain's) as one run of the compiled chain, or each alone where the chain does
    not compile or is one op long."""
    links = [_link(run) for run in runs]
    compute = compiled_chain([link.expr for link in links if link is not None]) if len(runs) > 1 else None
    if compute is None:
        return [(run, 1) for run in runs]
    a, out = links[0].input, links[-1].output  # type: ignore[union-attr]
    dying = tuple(slot for link in links if link is not None for slot in link.dying)

    def chain(values: list[Any]) -> None:
        result = compute(values[a])
        if result is None:
            _in_turn(runs, values)
            return
        for slot in dying:
            values[slot] = None
        values[out] = result

    return [(chain, len(runs))]


def _in_turn(runs: Sequence[Run], values: list[Any]) -> None:
    """``runs`` one by one (values the chain's machine does not take), saying which failed."""
    for offset, run in enumerate(runs):
        try:
            run(values)
        except Exception as e:
            raise StepFailure(offset, e) from e
