"""The kernels of the reference evaluator (``halfway.ir.evaluate``): which function computes an op.

A kernel takes the op's input arrays positionally, in schema slot order, and returns one array
per output (a tuple when there are several, ``None`` for an output nobody reads), as the numpy
backend's kernels do. ``reference_kernel`` finds it:

1. An op of the family tables (``halfway.ir.ops.families``: ``UNARY``, ``BINARY``, ``COMPARE``,
   ``REDUCE``) is computed with its row's own numpy math: binary operands under Paddle's
   ``axis`` rule (``numpy_operand_shapes``), ``ints`` for int dtypes where the row has it; a
   unary row's attrs bound as keyword arguments, float attrs as scalars of the dtype it computes
   in; a reduction over ``dim`` (all of X with ``reduce_all`` or no dims), accumulating in the
   wider of X's and Out's dtypes where the row accumulates. Float16 is widened to float32 and the
   result narrowed back (float16 storage, float32 arithmetic), except for the rows marked
   ``exact_half``, which compute on float16 as it is. A row's dtypes are its own and float64
   where it has float32.
2. Any other op is computed by a *provider*: ``provider(op_type, dtype, attrs, inputs, outputs)``
   returns the kernel (``attrs`` resolved with the schema's defaults, ``inputs`` / ``outputs``
   the tensor infos by slot) or raises ``KernelNotFoundError``. Providers are registered by name
   (``register_provider``) or declared as entry points of the group ``halfway.reference``, loaded
   at the first op that needs one; halfway declares its numpy kernels there
   (``halfway.kernels.reference``), so the evaluator computes every op the numpy backend runs
   with no import of the kernels by the layers below them. The providers are asked in the order
   they were registered, the declared ones after those registered before the first lookup.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol

import numpy as np

from .dtypes import DType
from .errors import HalfwayError, KernelNotFoundError, SchemaError
from .ops.families import BINARY, COMPARE, REDUCE, UNARY
from .ops.family import Elementwise, Reduction
from .ops.math import numpy_operand_shapes, reduced_axes
from .schema import TensorInfo

__all__ = ["Kernel", "Provider", "Slots", "ENTRY_POINT_GROUP", "reference_kernel", "reduction_kernel",
           "register_provider", "registered_providers"]

Kernel = Callable[..., Any]
Slots = Mapping[str, tuple[TensorInfo, ...]]

ENTRY_POINT_GROUP = "halfway.reference"


class Provider(Protocol):
    def __call__(self, op_type: str, dtype: DType, attrs: Mapping[str, Any], inputs: Slots,
                 outputs: Slots) -> Kernel: ...


_PROVIDERS: dict[str, Provider] = {}
_DECLARED: list[bool] = []  # holds True once the entry points are loaded
_LOAD_LOCK = threading.Lock()


def register_provider(name: str, provider: Provider, *, override: bool = False) -> None:
    """Register ``provider`` (see the module docstring) as ``name``.

    Raises:
        SchemaError: ``name`` is taken and ``override`` is not set.
    """
    if name in _PROVIDERS and not override:
        raise SchemaError(f"a reference kernel provider {name!r} is already registered; pass override=True "
                          f"to replace it")
    _PROVIDERS[name] = provider


def registered_providers() -> list[str]:
    """The names of the providers, in the order they are asked (the declared ones loaded)."""
    _load_declared()
    return list(_PROVIDERS)


def reference_kernel(op_type: str, dtype: DType, attrs: Mapping[str, Any], inputs: Slots,
                     outputs: Slots) -> Kernel:
    """The kernel computing ``op_type`` at ``dtype`` on tensors ``inputs`` -> ``outputs``.

    Raises:
        KernelNotFoundError: the op is a family row without ``dtype``, or no provider has a
            kernel for it; the message gives each provider's reason.
    """
    row = _ROWS.get(op_type)
    if row is not None:
        return _row_kernel(row, dtype, attrs, inputs, outputs)
    reasons = []
    for name, provider in _providers():
        try:
            return provider(op_type, dtype, attrs, inputs, outputs)
        except KernelNotFoundError as e:
            reasons.append(f"{name}: {e}")
    if not reasons:
        raise KernelNotFoundError(f"no reference kernel for {op_type}/{dtype.name}: no provider is registered "
                                  f"(halfway's numpy kernels are declared under the {ENTRY_POINT_GROUP!r} entry "
                                  f"points of the installed package)")
    raise KernelNotFoundError(f"no reference kernel for {op_type}/{dtype.name}: {'; '.join(reasons)}")


def _providers() -> list[tuple[str, Provider]]:
    _load_declared()
    return list(_PROVIDERS.items())


def _load_declared() -> None:
    if _DECLARED:
        return
    with _LOAD_LOCK:
        if _DECLARED:
            return
        try:
            for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
                if point.name not in _PROVIDERS:
                    _PROVIDERS[point.name] = _loaded(point.name, point.value, point.load)
        finally:
            _DECLARED.append(True)


def _loaded(name: str, value: str, load: Callable[[], Any]) -> Provider:
    try:
        provider = load()
    except Exception as e:
        raise HalfwayError(f"loading the reference kernel provider {name!r} ({value}) failed: "
                           f"{type(e).__name__}: {e}") from e
    if not callable(provider):
        raise HalfwayError(f"the reference kernel provider {name!r} ({value}) is not a function")
    return provider  # type: ignore[no-any-return]


# -- the family rows ------------------------------------------------------------------------------
_ROWS: dict[str, Elementwise | Reduction] = {**BINARY, **UNARY, **COMPARE, **REDUCE}


def _row_kernel(row: Elementwise | Reduction, dtype: DType, attrs: Mapping[str, Any], inputs: Slots,
                outputs: Slots) -> Kernel:
    dtypes = (*row.dtypes, DType.float64) if DType.float32 in row.dtypes else row.dtypes
    if dtype not in dtypes:
        raise KernelNotFoundError(f"no reference kernel for {row.name}/{dtype.name}: its row computes "
                                  f"{', '.join(d.name for d in dtypes)}")
    widen = dtype is DType.float16 and not row.exact_half
    narrow = outputs["Out"][0].dtype is DType.float16
    if widen:
        dtype, inputs, outputs = DType.float32, _widened(inputs), _widened(outputs)
    if isinstance(row, Reduction):
        kernel = _reduction(row, attrs, inputs, outputs)
    elif row.arity == 2:
        kernel = _binary(row, dtype, attrs, inputs)
    else:
        kernel = _unary(row, dtype, attrs)
    if not widen:
        return lambda *arrays: np.asarray(kernel(*arrays))

    def widened(*arrays: np.ndarray) -> np.ndarray:
        out = np.asarray(kernel(*[a.astype(np.float32) if a.dtype == np.float16 else a for a in arrays]))
        return out.astype(np.float16) if narrow else out

    return widened


def _widened(slots: Slots) -> dict[str, tuple[TensorInfo, ...]]:
    return {slot: tuple(TensorInfo(t.shape, DType.float32 if t.dtype is DType.float16 else t.dtype) for t in infos)
            for slot, infos in slots.items()}


def _binary(row: Elementwise, dtype: DType, attrs: Mapping[str, Any], inputs: Slots) -> Kernel:
    xs, ys = numpy_operand_shapes(inputs["X"][0].shape, inputs["Y"][0].shape, attrs.get("axis", -1))
    fn = row.numpy if dtype.is_floating or row.ints is None else row.ints
    return lambda x, y: fn(x.reshape(xs), y.reshape(ys))


def _unary(row: Elementwise, dtype: DType, attrs: Mapping[str, Any]) -> Kernel:
    scalars = {name: _scalar(value, dtype.numpy) if isinstance(value, float) else value
               for name, value in attrs.items()}
    return functools.partial(row.numpy, **scalars) if scalars else row.numpy


def _reduction(row: Reduction, attrs: Mapping[str, Any], inputs: Slots, outputs: Slots) -> Kernel:
    return reduction_kernel(row.numpy, row.accumulates, attrs, inputs["X"][0], outputs["Out"][0].dtype,
                            bool(inputs.get("DimTensor")))


def reduction_kernel(fn: Callable[..., Any], accumulates: bool, attrs: Mapping[str, Any], x: TensorInfo, out: DType,
                     runtime_dims: bool) -> Kernel:
    """``fn(X, axis=, keepdims=[, dtype=])`` over a reduce op's ``dim``, or with ``runtime_dims``
    over the dims its DimTensor (the kernel's second argument) holds; ``accumulates``: ``fn``
    takes the dtype to accumulate in."""
    rank, dtype = len(x.shape), out.numpy
    options: dict[str, Any] = {"keepdims": attrs["keep_dim"]}
    if accumulates:
        options["dtype"] = np.promote_types(x.dtype.numpy, dtype)
    if runtime_dims:
        return lambda a, dims: np.asarray(fn(a, axis=reduced_axes(rank, dims.reshape(-1).tolist(), False),
                                             **options), dtype=dtype)
    axes = reduced_axes(rank, attrs["dim"], attrs["reduce_all"])
    return lambda a: np.asarray(fn(a, axis=axes, **options), dtype=dtype)


def _scalar(value: float, dtype: np.dtype[Any]) -> np.generic:
    """``value`` as a ``dtype`` scalar, as C++'s ``static_cast<T>``: truncated toward zero and
    saturated at the range of an int dtype."""
    if dtype.kind == "f":
        return dtype.type(value)  # type: ignore[no-any-return]
    info = np.iinfo(dtype)
    return dtype.type(int(min(max(value, info.min), info.max)))  # type: ignore[no-any-return]
