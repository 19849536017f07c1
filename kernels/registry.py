"""The kernel registry: kernels keyed by (op type, backend, dtype).

A kernel is registered as a *factory*: called once at prepare time with a ``KernelSpec`` (the
op's attrs with defaults, input and output tensor infos), it returns the callable that runs on
every ``run``. The callable takes the op's input arrays positionally, in schema slot order
(``spec.input_keys``), and returns one array per entry of ``spec.output_keys`` — a bare array
when there is one output, else a tuple (``None`` for an output nobody reads, such as XShape).

Lookup is exact on (op type, backend, dtype); there is no fallback here — the executor decides
what to do with a miss (the OpenCL backend falls back to numpy), and the error lists what is
registered for that op.

Float16 kernels store float16 but accumulate in float32. ``register_kernel(..., dtypes=(float32,
float16))`` registers a float32 factory for float16 too, wrapped so its floating inputs are
widened to float32 and its float16 outputs narrowed back: float16 storage, float32 arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from attrs import field, frozen

from halfway.ir.dtypes import DType
from halfway.ir.errors import KernelNotFoundError, SchemaError
from halfway.ir.schema import TensorInfo

__all__ = ["KernelKey", "KernelSpec", "register_kernel", "find_kernel", "registered_kernels", "has_kernel"]

Kernel = Callable[..., Any]
KernelFactory = Callable[["KernelSpec"], Kernel]


@frozen
class KernelKey:
    op_type: str
    backend: str
    dtype: DType

    def __str__(self) -> str:
        return f"{self.op_type}/{self.backend}/{self.dtype.name}"


@frozen
class KernelSpec:
    """What a kernel factory sees: the op's resolved attrs and its tensors by slot.

    ``inplace``: the kernel may write its output into its first input's array (the memory plan
    found that nothing reads that array afterwards, and that it is no feed, parameter or view of
    one). A kernel is free to ignore it.

    ``constants``: per input slot, the values of those inputs that are parameters no op writes
    (None for the others), in their stored dtype. A prepared program binds its parameters once,
    so a factory may precompute from them (a transformed filter, say) instead of on every run.
    """

    op_type: str
    dtype: DType
    attrs: Mapping[str, Any]
    inputs: Mapping[str, tuple[TensorInfo, ...]]
    outputs: Mapping[str, tuple[TensorInfo, ...]]
    inplace: bool = False
    constants: Mapping[str, tuple[np.ndarray | None, ...]] = field(factory=dict)

    @property
    def input_keys(self) -> list[tuple[str, int]]:
        return [(slot, i) for slot, infos in self.inputs.items() for i in range(len(infos))]

    @property
    def output_keys(self) -> list[tuple[str, int]]:
        return [(slot, i) for slot, infos in self.outputs.items() for i in range(len(infos))]

    def has_input(self, slot: str) -> bool:
        return bool(self.inputs.get(slot))

    def input(self, slot: str, index: int = 0) -> TensorInfo:
        return self.inputs[slot][index]

    def output(self, slot: str, index: int = 0) -> TensorInfo:
        return self.outputs[slot][index]

    def constant(self, slot: str, index: int = 0) -> np.ndarray | None:
        """The parameter value bound to ``slot`` (see ``constants``), or None."""
        values = self.constants.get(slot, ())
        return values[index] if index < len(values) else None


_KERNELS: dict[KernelKey, KernelFactory] = {}


def register_kernel(op_type: str, backend: str = "numpy",
                    dtypes: Iterable[Any] = (DType.float32, DType.float16), *,
                    override: bool = False) -> Callable[[KernelFactory], KernelFactory]:
    """Register the decorated factory for ``op_type`` on ``backend`` for each of ``dtypes``.

    On the numpy backend a float16 entry reuses the float32 factory through ``widen_float16``
    unless the factory is registered for float16 on its own (a dtypes list without float32).
    """
    wanted = [DType.from_any(d) for d in dtypes]

    def decorate(factory: KernelFactory) -> KernelFactory:
        for dtype in wanted:
            key = KernelKey(op_type, backend, dtype)
            if key in _KERNELS and not override:
                raise SchemaError(f"a kernel for {key} is already registered; pass override=True to replace it")
            widen = dtype is DType.float16 and DType.float32 in wanted and backend == "numpy"
            _KERNELS[key] = widen_float16(factory) if widen else factory
        return factory

    return decorate


def find_kernel(op_type: str, backend: str, dtype: DType) -> KernelFactory:
    key = KernelKey(op_type, backend, dtype)
    try:
        return _KERNELS[key]
    except KeyError:
        have = sorted(str(k) for k in _KERNELS if k.op_type == op_type)
        listed = ", ".join(have) if have else "none"
        raise KernelNotFoundError(f"no kernel for {key}; registered for {op_type}: {listed}") from None


def has_kernel(op_type: str, backend: str, dtype: DType) -> bool:
    return KernelKey(op_type, backend, dtype) in _KERNELS


def registered_kernels(backend: str | None = None) -> list[KernelKey]:
    keys = [k for k in _KERNELS if backend is None or k.backend == backend]
    return sorted(keys, key=lambda k: (k.op_type, k.backend, k.dtype.name))


def widen_float16(factory: KernelFactory) -> KernelFactory:
    """Run a float32 factory on float16 tensors: widen inputs, narrow float16 outputs."""

    def make(spec: KernelSpec) -> Kernel:
        wide = KernelSpec(spec.op_type, DType.float32, spec.attrs, _widened(spec.inputs), _widened(spec.outputs),
                          constants=spec.constants)
        kernel = factory(wide)
        narrow = [info.dtype is DType.float16 for infos in spec.outputs.values() for info in infos]
        f32, f16 = np.float32, np.float16

        def run(*args: np.ndarray) -> Any:
            out = kernel(*[a.astype(f32) if a is not None and a.dtype == f16 else a for a in args])
            if len(narrow) == 1:
                return out.astype(f16) if narrow[0] and out is not None else out
            return tuple(o.astype(f16) if n and o is not None else o for o, n in zip(out, narrow))

        return run

    return make


def _widened(tensors: Mapping[str, tuple[TensorInfo, ...]]) -> dict[str, tuple[TensorInfo, ...]]:
    return {slot: tuple(TensorInfo(t.shape, DType.float32 if t.dtype is DType.float16 else t.dtype) for t in infos)
            for slot, infos in tensors.items()}
