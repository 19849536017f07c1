"""Run one op through the builder and the executor, for kernel tests.

    out = run_op("elementwise_add", {"X": x, "Y": y}, {"axis": 1})["Out"][0]

Inputs are fed (so they may be float16); ``params`` names input slots given as parameters
(persistable vars in the scope) instead of feeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import halfway
from halfway.executor import Executor, Place, PrepareReport
from halfway.ir.builder import append_op, program_guard
from halfway.ir.schema import get_schema


def run_op(op_type: str, inputs: Mapping[str, np.ndarray | Sequence[np.ndarray]], attrs: Mapping[str, Any] | None = None,
           *, params: Sequence[str] = (), outputs: Mapping[str, int] | None = None) -> dict[str, list[np.ndarray]]:
    return run_op_with_report(op_type, inputs, attrs, params=params, outputs=outputs)[0]


def run_op_with_report(op_type: str, inputs: Mapping[str, np.ndarray | Sequence[np.ndarray]],
                       attrs: Mapping[str, Any] | None = None, *, params: Sequence[str] = (),
                       outputs: Mapping[str, int] | None = None,
                       place: Place | None = None) -> tuple[dict[str, list[np.ndarray]], PrepareReport]:
    """As ``run_op``, also returning the prepared program's report (the kernels chosen);
    ``place`` runs it elsewhere than on the CPU."""
    prog = halfway.Program()
    block = prog.global_block()
    feed: dict[str, np.ndarray] = {}
    scope = halfway.Scope()
    in_vars = {}
    with program_guard(prog):
        for slot, value in inputs.items():
            arrays = [value] if isinstance(value, np.ndarray) else list(value)
            made = []
            for i, array in enumerate(arrays):
                name = f"{slot.lower()}_{i}"
                var = block.create_var(name, dtype=array.dtype, shape=array.shape, persistable=slot in params)
                (scope.__setitem__ if slot in params else feed.__setitem__)(name, array)
                made.append(var)
            in_vars[slot] = made
        out_vars = append_op(op_type, in_vars, attrs, outputs)
    names = [(slot, v.name) for slot, vs in out_vars.items() for v in vs]
    prepared = Executor(place).prepare(prog, list(feed), [n for _, n in names], scope,
                                  feed_shapes={n: a.shape for n, a in feed.items()})
    results = prepared.run(feed)
    _check_undeclared_aliases(op_type, names, results, [*feed.values(), *(scope[n] for n in scope)])
    grouped: dict[str, list[np.ndarray]] = {}
    for (slot, _), value in zip(names, results):
        grouped.setdefault(slot, []).append(value)
    return grouped, prepared.report


def _check_undeclared_aliases(op_type: str, names: Sequence[tuple[str, str]], results: Sequence[np.ndarray],
                              inputs: Sequence[np.ndarray]) -> None:
    """An output sharing an input's memory must be declared a view in the schema, or the memory
    plan could let a later op overwrite the input through it."""
    views = get_schema(op_type).views
    for (slot, _), value in zip(names, results):
        if isinstance(value, np.ndarray) and slot not in views:
            assert not any(np.shares_memory(value, a) for a in inputs), (
                f"{op_type}: output {slot} shares an input's memory but the schema declares no view")


def float16_tolerance(reduction_length: int = 1) -> float:
    """Relative tolerance of a float16-storage, float32-accumulate kernel against a float32
    reference computed from the same float16 inputs: one float16 rounding of the result, plus
    float32 rounding growing with the reduction length."""
    eps16 = float(np.finfo(np.float16).eps)
    eps32 = float(np.finfo(np.float32).eps)
    return eps16 + reduction_length * eps32
