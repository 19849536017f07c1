"""The reference evaluator: run one op, or a program's block 0, on numpy arrays.

No executor: no memory plan, no prepared steps, no feed checks. Each op's output infos come
from its schema's shape inference, its dtype from ``halfway.ir.op_dtype``, its kernel from
``halfway.ir.reference`` (a family row's own numpy math, any other op's reference kernel: the
numpy backend's); the kernel is made and called once. This is what the passes run when they need
values (constant folding, float16 calibration and tolerance, the PassManager's output
comparisons), and the executor for the host values it computes at prepare, so none of them
imports a backend for it.

Inputs reach the kernels as read-only views: a kernel cannot write into the caller's arrays
(parameters in a scope, feeds); a var an op updates in place (a ``views`` output that is the
input var itself: a key/value cache) reaches it as a copy, which its output then is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .dtypes import DType
from .errors import HalfwayError
from .infer import infer_outputs
from .op_dtype import op_dtype
from .operator import Operator
from .program import Program
from .reference import reference_kernel
from .schema import TensorInfo, get_schema
from .scope import Scope

__all__ = ["evaluate", "evaluate_op"]

Observer = Callable[[str, np.ndarray], None]

_SKIPPED = ("feed", "fetch")


def evaluate_op(op: Operator, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of ``op`` (name -> array) computed from ``values`` (name -> array, every input).

    Raises:
        HalfwayError: an input is missing, shape inference fails, no reference kernel computes
            the op at its dtype (``KernelNotFoundError``), or the kernel fails; the message names
            the op.
    """
    schema = get_schema(op.type)
    missing = [n for n in op.input_names() if n not in values]
    if missing:
        raise HalfwayError(f"op {op.describe()}: no value for input(s) {missing}")
    state = {n for out, slot in schema.views.items() for n in op.input(slot) if n in op.output(out)}
    arrays = {s.name: [np.array(values[n]) if n in state else _read_only(values[n]) for n in op.input(s.name)]
              for s in schema.inputs if op.input(s.name)}
    inputs = {slot: tuple(TensorInfo(a.shape, DType.from_any(a.dtype)) for a in items) for slot, items in arrays.items()}
    outputs = infer_outputs(op, schema, inputs, arrays)
    infos = {n: info for slot, items in inputs.items() for n, info in zip(op.input(slot), items)}
    infos.update((n, info) for slot, items in outputs.items() for n, info in zip(op.output(slot), items))
    dtype = op_dtype(op, schema, infos)
    try:
        kernel = reference_kernel(op.type, dtype, schema.resolve_attrs(op.attrs), inputs, outputs)
        result = kernel(*[a for items in arrays.values() for a in items])
    except HalfwayError as e:
        raise type(e)(f"while evaluating op {op.describe()}: {e}") from e
    except Exception as e:  # a kernel's own failure: name the op it ran
        raise HalfwayError(f"while evaluating op {op.describe()}: {type(e).__name__}: {e}") from e
    names = [n for slot in outputs for n in op.output(slot)]
    results = (result,) if len(names) == 1 else tuple(result)
    return {n: v for n, v in zip(names, results) if v is not None}


def evaluate(program: Program, feeds: Mapping[str, np.ndarray], fetch_names: Sequence[str],
             scope: Scope | None = None, *, observe: Observer | None = None) -> list[np.ndarray]:
    """Run block 0 of ``program`` op by op on ``feeds`` and the parameters in ``scope``; return
    the values of ``fetch_names``. ``observe(name, value)`` sees every output as it is computed.

    Raises:
        HalfwayError: as ``evaluate_op``, or a fetch name that nothing computes.
    """
    scope = scope if scope is not None else Scope()
    ops = [op for op in program.global_block().ops if op.type not in _SKIPPED]
    values: dict[str, np.ndarray] = dict(feeds)
    for op, spent in zip(ops, _last_reads(ops, set(fetch_names) | set(feeds))):
        for name in op.input_names():
            if name not in values:
                values[name] = _parameter(op, name, scope)
        outputs = evaluate_op(op, values)
        values.update(outputs)
        if observe is not None:
            for name, value in outputs.items():
                observe(name, value)
        for name in spent:
            values.pop(name, None)
    unknown = [n for n in fetch_names if n not in values and scope.find(n) is None]
    if unknown:
        raise HalfwayError(f"cannot fetch {unknown}: no op computes them and they are neither fed nor parameters")
    return [values[n] if n in values else scope.get(n) for n in fetch_names]


def _last_reads(ops: Sequence[Operator], kept: set[str]) -> list[list[str]]:
    """Per op, the names no later op reads or writes (and that are not ``kept``): dropped after it."""
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        for name in op.input_names() + op.output_names():
            last[name] = i
    spent: list[list[str]] = [[] for _ in ops]
    for name, i in last.items():
        if name not in kept:
            spent[i].append(name)
    return spent


def _parameter(op: Operator, name: str, scope: Scope) -> np.ndarray:
    value = scope.find(name)
    if value is None:
        raise HalfwayError(f"op {op.describe()}: input {name!r} is neither fed, computed nor in the scope")
    return value


def _read_only(value: np.ndarray) -> np.ndarray:
    view = np.asarray(value).view()
    view.flags.writeable = False
    return view
