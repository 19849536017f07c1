"""Mixed precision with an accuracy budget: the fewest ops kept float32 for the fetched outputs to
stay within ``tolerance`` of float32 on the calibration feeds.

The error of a program is the largest, over feeds and fetches, of max |float16 - float32| over
max |float32| (inf where the float16 output is not finite). Steps:

1. One float32 reference run per feed on the reference evaluator, keeping every floating value.
2. The plain transpile (``transpile(pins)`` with no pins): within tolerance, it is the answer and
   nothing more stays float32.
3. Per-op attribution: every op the plain transpile runs float16 is evaluated alone in float16
   on the float32 values of its inputs (rounded to float16); its error is its outputs' relative
   error against float32. Ops are ranked by it, largest first.
4. Search: promoting (keeping float32) the first ``k`` ranked ops, ``k`` doubling from 1 until
   the error is within tolerance, then bisected down to the smallest such ``k``; about
   ``2 log2(n)`` transpiles and runs.
5. Pruning: each of those ``k`` ops, smallest own error first, runs float16 again where the
   output error stays within tolerance without it (``k`` more runs). What stays float32 has
   the reason "promoting it cut the output error from X to Y": X with it float16 and the other
   kept ops float32, Y with it float32 as well.

A tolerance that even promoting every ranked op cannot meet raises a ``PassError`` giving the
error reached, rather than returning a program that silently misses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError, PassError
from ...ir.evaluate import evaluate, evaluate_op
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.schema import get_schema
from ...ir.scope import Scope
from .lists import FLOAT16_MAX
from .policy import compute_inputs
from .range import MASK_MAGNITUDE
from .report import Float16Report

__all__ = ["Trial", "relative_error", "search_float32_ops"]

_MAX_PRUNED = 64
"""At most this many kept ops (those of smallest own error) are tried float16 again."""

Trial = Callable[[Mapping[int, str]], tuple[Program, Scope, Float16Report]]
"""Transpile with the given op indices pinned float32: the program, the scope it runs on, its report."""


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|; inf where ``got`` is not finite where ``want`` is."""
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.all(np.isfinite(got64) | ~np.isfinite(want64)):
        return math.inf
    finite = np.isfinite(want64)
    scale = float(np.abs(want64[finite]).max()) if finite.any() else 0.0
    diff = float(np.abs(got64[finite] - want64[finite]).max()) if finite.any() else 0.0
    return diff / scale if scale else diff


def search_float32_ops(program: Program, scope: Scope, feeds: Sequence[Mapping[str, np.ndarray]],
                       fetches: Sequence[str], tolerance: float, transpile: Trial) -> dict[int, str]:
    """Op index -> reason for the ops to keep float32 (see the module docstring)."""
    values = [_reference(program, scope, feed) for feed in feeds]
    references = [[run[name] for name in fetches] for run in values]

    def error(pins: Mapping[int, str]) -> float:
        half, half_scope, _ = transpile(pins)
        return _program_error(half, half_scope, feeds, fetches, references)

    plain, plain_scope, report = transpile({})
    plain_error = _program_error(plain, plain_scope, feeds, fetches, references)
    if plain_error <= tolerance:
        return {}
    ops = program.global_block().ops
    ranked = sorted(((_local_error(ops[e.index], values), e.index) for e in report.float16_ops), reverse=True)
    k, reached = _smallest_prefix(lambda n: error({i: "" for _, i in ranked[:n]}), len(ranked), tolerance)
    if reached > tolerance:
        raise PassError(f"pass 'float16': tolerance {tolerance:g} cannot be met on the calibration feeds: the "
                        f"plain float16 program's output error is {plain_error:.3g}, and with all "
                        f"{len(ranked)} float16 ops kept float32 still {reached:.3g}; loosen the tolerance")
    return _prune([index for _, index in ranked[:k]], error, reached, tolerance)


def _prune(kept: list[int], error: Callable[[Mapping[int, str]], float], reached: float,
           tolerance: float) -> dict[int, str]:
    """Op index -> reason for the ``kept`` ops (ranked, largest own error first) that must stay
    float32: from the smallest own error up, an op whose float16 run keeps the output error
    within tolerance runs float16 again; the others are what their reasons say."""
    pins = {index: "" for index in kept}
    for index in reversed(kept[:_MAX_PRUNED]):
        without = {i: why for i, why in pins.items() if i != index}
        raised = error(without)
        if raised <= tolerance:
            pins, reached = without, raised
        else:
            pins[index] = f"tolerance: promoting it cut the output error from {raised:.3g} to {reached:.3g}"
    kept_reason = f"tolerance: among the ops of largest own float16 error, kept float32 (output error {reached:.3g})"
    return {index: why or kept_reason for index, why in pins.items()}


def _smallest_prefix(error: Callable[[int], float], count: int, tolerance: float) -> tuple[int, float]:
    """The smallest n in 1..count with error(n) <= tolerance (doubling, then bisection), and its
    error; (count, error(count)) when none is."""
    low, high, errors = 0, 1, {}
    while high < count:
        errors[high] = error(high)
        if errors[high] <= tolerance:
            break
        low, high = high, high * 2
    high = min(high, count)
    if high not in errors:
        errors[high] = error(high)
        if errors[high] > tolerance:
            return high, errors[high]
    while high - low > 1:
        middle = (low + high) // 2
        errors[middle] = error(middle)
        low, high = (low, middle) if errors[middle] <= tolerance else (middle, high)
    return high, errors[high]


def _reference(program: Program, scope: Scope, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {name: np.asarray(value) for name, value in feed.items()}

    def record(name: str, value: np.ndarray) -> None:
        values[name] = value

    try:
        evaluate(program, feed, [], scope, observe=record)
    except HalfwayError as e:
        raise PassError(f"pass 'float16': running the float32 program on a calibration feed failed: {e}") from e
    values.update((name, scope.get(name)) for name in _param_names(program) if name in scope)
    return values


def _param_names(program: Program) -> list[str]:
    return [v.name for v in program.persistable_vars()]


def _program_error(program: Program, scope: Scope, feeds: Sequence[Mapping[str, np.ndarray]],
                   fetches: Sequence[str], references: Sequence[Sequence[np.ndarray]]) -> float:
    worst = 0.0
    block = program.global_block()
    with np.errstate(all="ignore"):
        for feed, wanted in zip(feeds, references):
            typed = {name: _narrow(value) if block.has_var(name) and block.var(name).dtype is DType.float16 else value
                     for name, value in feed.items()}  # float16 feeds without keep_io_types
            try:
                got = evaluate(program, typed, fetches, scope)
            except HalfwayError:
                return math.inf
            worst = max([worst, *(relative_error(g, w) for g, w in zip(got, wanted))])
    return worst


def _local_error(op: Operator, values: Sequence[Mapping[str, np.ndarray]]) -> float:
    """The op's outputs' relative error when it alone runs float16 on the float32 values of its
    inputs (0 where it cannot be evaluated alone)."""
    computed = {name for _, name in compute_inputs(op, get_schema(op.type))}
    worst = 0.0
    with np.errstate(all="ignore"):
        for run in values:
            inputs = {name: _narrow(run[name]) if name in computed else run[name] for name in op.input_names()
                      if name in run}
            try:
                outputs = evaluate_op(op, inputs)
            except HalfwayError:
                return 0.0
            floating = [n for n, v in outputs.items() if n in run and np.issubdtype(v.dtype, np.floating)]
            worst = max([worst, *(_unmasked_error(outputs[n], run[n]) for n in floating)])
    return worst


def _narrow(value: np.ndarray) -> np.ndarray:
    """float16, mask values held in its range as the transpile holds them (``range``)."""
    if value.dtype != np.float32:
        return value
    narrow: np.ndarray = np.clip(value, -FLOAT16_MAX / 4, FLOAT16_MAX / 4).astype(np.float16)
    return narrow


def _unmasked_error(got: np.ndarray, want: np.ndarray) -> float:
    """``relative_error`` over the elements that are numbers, not mask values."""
    kept = np.abs(want) < MASK_MAGNITUDE
    return relative_error(got[kept], want[kept]) if kept.any() else 0.0
