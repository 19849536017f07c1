"""The numpy backend: kernels are host callables returning new arrays (or writing into a dying
input when the memory plan lets them), so a handle is an index into the run's list of values,
and a value is dropped after its last reader. Every run has its own list: a prepared program
may run from several threads at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.dtypes import DType
from ..ir.schema import TensorInfo
from ..kernels.numpy.heap import keep_freed_memory
from ..kernels.registry import Kernel
from .backend import Backend, Binding, Run, register_backend
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

    def start(self) -> list[Any]:
        return list(self._template)

    def upload(self, state: list[Any], handle: int, array: np.ndarray) -> None:
        state[handle] = array

    def download(self, state: list[Any], handle: int, dtype: DType) -> np.ndarray:
        value: np.ndarray = state[handle]
        return value


def _run(kernel: Kernel, ins: tuple[int, ...], outs: tuple[int, ...], dying: tuple[int, ...]) -> Run:
    """The op's call on a run's values; one input and one output (most ops) has its own, shorter form."""
    if len(ins) == 1 and len(outs) == 1:
        (a,), (out,) = ins, outs

        def unary(values: list[Any]) -> None:
            values[out] = kernel(values[a])
            for slot in dying:
                values[slot] = None

        return unary

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
