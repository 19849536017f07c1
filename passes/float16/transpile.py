"""The ``float16`` pass: run what is safe in float16, keep the rest float32, cast in between.

    result = get_pass("float16", keep_io_types=True)(program, scope)
    print(result.report)

Steps (nothing is changed until the last one; with ``tolerance``, ``tolerance`` first finds
the ops to keep float32 by transpiling copies of the program):

1. Check: block 0 only (ops with sub-blocks are refused), the program verifies, calibration runs.
2. Float16 copies of the float32 parameters (``values``), mask constants held at
   +-``max_abs_value / 2`` in them, and range pins (``range``): other parameters beyond float16's
   range, and with calibration feeds, vars and accumulations that exceed ``max_abs_value``, must
   stay float32; so must the scores TopK orders (``selection``).
3. Decisions (``policy``): ALWAYS / FOLLOW / NEVER per op from the lists in
   ``lists``, the float16 kernels of the ``target`` where one is given, and the pins.
4. Rewrite (``casts``): one cast per var crossing a float32/float16 boundary, the float16
   copies that float16 ops read in the program and the scope (``<name>.fp16``), unused parameters
   removed from the program (and from the scope with ``drop_unused_params``).

The result's ``report`` is a ``Float16Report``. Running the pass on its own output
changes nothing: casts it inserted keep their dtypes and float16 parameters are float16 sources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ...ir.block import Block
from ...ir.dtypes import DType
from ...ir.errors import HalfwayError, PassError
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.schema import get_schema, has_schema
from ...ir.scope import Scope
from ...ir.verifier import verify
from ..base import Pass, PassResult, register_pass
from .casts import Edges, plan_vars, rewrite
from .lists import DEFAULT_BLACK_LIST, DEFAULT_WHITE_LIST, FLOAT16_MAX
from .policy import IO_OPS, Float16Target, Plan, Policy, State, decide, float_var
from .range import calibrate, calibration_pins, clamp_mask_constants, parameter_pins
from .report import Float16Report, OpEntry
from .selection import selection_pins
from .tolerance import search_float32_ops
from .values import Losses, to_float16

__all__ = ["Float16Options", "Float16Pass"]


def _names(value: Any) -> frozenset[str]:
    return frozenset([value] if isinstance(value, str) else value)


def _feeds(value: Any) -> tuple[Mapping[str, np.ndarray], ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, Mapping) else tuple(value)


def _pairs(value: Any) -> tuple[tuple[int, str], ...]:
    return tuple(sorted(dict(value).items()))


def _disjoint(instance: Float16Options, attribute: Any, value: frozenset[str]) -> None:
    both = value & instance.black_list
    if both:
        raise ValueError(f"ops on both the white and the black list: {sorted(both)}")


@attrs.frozen
class Float16Options:
    """Options of the ``float16`` pass.

    ``keep_io_types``: feeds and fetches stay float32 (casts at the edges). ``black_list`` /
    ``white_list``: op types that never / always run float16 (defaults in ``lists``).
    ``target``: where the program will run (``Float16Target``): an op without a float16 kernel
    there stays float32; None (the default) checks no kernels. ``max_float16_reduction``: reductions over more
    elements stay float32. ``calibration_feeds``: feed dicts to run the float32 program on;
    ``max_abs_value``: the largest |value| a float16 var may reach on them (half of 65504 leaves
    room for float16 rounding). ``fetch_names``: the outputs, when the program has no fetch ops
    (default: vars that no op reads, in the first output slot of their writer).
    ``drop_unused_params``: also remove from the scope the parameters the program no longer uses.
    ``tolerance``: keep float32 the fewest ops for the fetched outputs to stay within this
    relative error of float32 on the calibration feeds (``tolerance``; needs them).
    ``float32_ops``: op index -> why, ops that must run float32 (a mapping or pairs).
    """

    keep_io_types: bool = True
    black_list: frozenset[str] = attrs.field(default=frozenset(DEFAULT_BLACK_LIST), converter=_names)
    white_list: frozenset[str] = attrs.field(default=frozenset(DEFAULT_WHITE_LIST), converter=_names,
                                             validator=_disjoint)
    target: Float16Target | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Float16Target)))
    max_float16_reduction: int = attrs.field(default=4096, validator=attrs.validators.gt(0))
    calibration_feeds: tuple[Mapping[str, np.ndarray], ...] = attrs.field(default=(), converter=_feeds)
    max_abs_value: float = attrs.field(default=FLOAT16_MAX / 2,
                                       validator=[attrs.validators.gt(0.0), attrs.validators.le(FLOAT16_MAX)])
    fetch_names: tuple[str, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    drop_unused_params: bool = False
    tolerance: float | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0.0)))
    float32_ops: tuple[tuple[int, str], ...] = attrs.field(default=(), converter=_pairs)


@register_pass("float16", options=Float16Options, needs_scope=True)
class Float16Pass(Pass):
    """Transpile to float16: ALWAYS/FOLLOW/NEVER decisions, minimal casts, float16 parameters."""

    def apply(self, program: Program, scope: Scope | None) -> PassResult:
        assert scope is not None
        options: Float16Options = self.options
        _check_program(program)
        if options.tolerance is not None:
            return _within_tolerance(program, scope, options, options.tolerance)
        block = program.global_block()
        edges = _edges(program, options)
        params = [v.name for v in program.persistable_vars() if float_var(block, v.name) is not None]
        missing = [n for n in params if n not in scope]
        if missing:
            raise PassError(f"pass 'float16': the scope holds no value for parameter(s) {missing}")
        float32_params = [n for n in params if block.var(n).dtype is DType.float32]
        float16_copies, clamped = clamp_mask_constants(
            scope, dict(zip(float32_params, to_float16([scope.get(n) for n in float32_params]))),
            options.max_abs_value)
        policy, out_of_range = _policy(program, scope, float16_copies, clamped, options)
        plan = decide(block, policy, _sources(block, params, edges, policy))
        report = Float16Report(ops=_op_entries(program, plan), out_of_range=out_of_range, clamped=clamped,
                               param_bytes_before=_param_bytes(program, scope))
        var_plans = plan_vars(block, plan, edges)
        rewrite(block, scope, var_plans, params, float16_copies, report)
        if options.drop_unused_params:
            for name in report.params_removed:
                scope.remove(name)
        report.param_bytes_after = _param_bytes(program, scope)
        return PassResult(program, modified=bool(var_plans), stats=_stats(report), report=report)


def _within_tolerance(program: Program, scope: Scope, options: Float16Options, tolerance: float) -> PassResult:
    """The transpile keeping float32 the ops ``search_float32_ops`` finds (``tolerance``)."""
    if not options.calibration_feeds:
        raise PassError(f"pass 'float16': tolerance={tolerance:g} needs calibration_feeds, the inputs "
                        f"on which the float16 program's error is measured")
    given = dict(options.float32_ops)

    def pinned(pins: Mapping[int, str]) -> Float16Pass:
        return Float16Pass(attrs.evolve(options, tolerance=None, float32_ops={**pins, **given}))

    def trial(pins: Mapping[int, str]) -> tuple[Program, Scope, Float16Report]:
        trial_scope = scope.new_scope()
        result = pinned(pins).apply(program.clone(), trial_scope)
        return result.program, trial_scope, result.report

    fetches = _edges(program, options).fetches
    pins = search_float32_ops(program, scope, options.calibration_feeds, fetches, tolerance, trial)
    return pinned(pins).apply(program, scope)


def _check_program(program: Program) -> None:
    for op in program.global_block().ops:
        if op.sub_blocks():
            raise PassError(f"pass 'float16': op #{op.index} {op.type} runs sub-block(s) "
                            f"{list(op.sub_blocks())}; control flow is not supported by the float16 "
                            f"transpiler (transpile a program without it, or keep it float32)")
    try:
        verify(program, check_shapes=False)  # the order and structure the decisions rely on
    except HalfwayError as e:
        raise PassError(f"pass 'float16': the input program does not verify: {e}") from e


def _edges(program: Program, options: Float16Options) -> Edges:
    block = program.global_block()
    written = {n for op in block.ops if op.type != "feed" for n in op.output_names()}
    feeds = set(program.feed_names())
    feeds |= {v.name for v in block.vars.values() if v.need_check_feed}
    feeds |= {n for op in block.ops for n in op.input_names()
              if n not in written and not block.find_var(n).persistable}
    fetches = program.fetch_names() or list(options.fetch_names or _leaves(program))
    unknown = [n for n in fetches if not block.has_var(n)]
    if unknown:
        raise PassError(f"pass 'float16': fetch name(s) {unknown} are not vars of block 0")
    return Edges(tuple(sorted(feeds)), tuple(fetches), options.keep_io_types)


def _leaves(program: Program) -> list[str]:
    block = program.global_block()
    return [names[0] for op in block.ops if op.type not in IO_OPS
            for names in list(op.outputs.values())[:1] if names and not block.uses(names[0])]


def _policy(program: Program, scope: Scope, float16_copies: Mapping[str, tuple[np.ndarray, Losses]],
            clamped: Mapping[str, int], options: Float16Options) -> tuple[Policy, dict[str, int]]:
    block = program.global_block()
    pinned, out_of_range = parameter_pins(scope, float16_copies)
    pinned = selection_pins(block) | pinned
    pinned_ops: dict[int, str] = dict(options.float32_ops)
    if options.calibration_feeds:
        held = scope.new_scope()  # the mask constants as the float16 program holds them
        for name in clamped:
            held.set(name, float16_copies[name][0].astype(np.float32))
        ranges = calibrate(program, held, options.calibration_feeds)
        measured, measured_ops = calibration_pins(block, scope, ranges, options.max_abs_value)
        pinned, pinned_ops = measured | pinned, measured_ops | pinned_ops
    policy = Policy(options.white_list, options.black_list, options.target, options.max_float16_reduction,
                    pinned, pinned_ops)
    return policy, out_of_range


def _sources(block: Block, params: Sequence[str], edges: Edges, policy: Policy) -> dict[str, State]:
    sources = {}
    for name in edges.feeds:
        if float_var(block, name) is not None:
            sources[name] = State.FLOAT32 if name in policy.pinned_vars else State.FLOAT16
    for name in params:
        dtype = block.var(name).dtype
        sources[name] = State.FLOAT32 if name in policy.pinned_vars else (
            State.FLOAT16 if dtype is DType.float16 else State.FREE)
    return sources


def _op_entries(program: Program, plan: Plan) -> list[OpEntry]:
    entries = []
    for index, op in enumerate(program.global_block().ops):
        decision = plan.decisions.get(id(op))
        if decision is None:
            continue
        dtype = decision.state.dtype.name if decision.state is not None else "as is"
        output = _first_output(op)
        entries.append(OpEntry(index, op.type, output, dtype, decision.reason))
    return entries


def _first_output(op: Operator) -> str:
    """What the op writes in its first schema output slot (Y for batch_norm, not MeanOut)."""
    slots = [s.name for s in get_schema(op.type).outputs] if has_schema(op.type) else list(op.outputs)
    return next((op.output(s)[0] for s in slots if op.output(s)), "")


def _param_bytes(program: Program, scope: Scope) -> int:
    return sum(scope.get(v.name).nbytes for v in program.persistable_vars() if v.name in scope)


def _stats(report: Float16Report) -> dict[str, int]:
    return {"float16_ops": len(report.float16_ops), "float32_ops": len(report.float32_ops),
            "casts": len(report.casts), "params_converted": len(report.params)}
