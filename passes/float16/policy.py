"""Per-op float16 decisions: the ALWAYS / FOLLOW / NEVER rules swept to their fixed point.

Every float32/float16 tensor of the block gets a *state*: FLOAT16, FLOAT32, or FREE (a value made
of parameters only, which can be had in either dtype). Sources: feed targets are FLOAT16 (the
transpiler casts them), parameters are FREE (FLOAT16 when already float16), vars the range checks
pin are FLOAT32. Then, in program order:

1. ``feed`` and ``fetch`` ops are skipped; ``cast`` ops and ops without floating inputs keep
   their dtypes (their outputs take their declared dtype); an op reading float64 is left alone.
   A cast from a float16/float32 tensor to its own dtype is decided like a white-listed op:
   exporters write ``x.to(x.dtype)`` / ``.to(input_dtype)`` of a float32 model (rotary
   embeddings, the end of an RMS norm) as float32 -> float32 casts, which in a float16 model
   cast back to float16; ``casts`` then rewrites its dtypes. Where the model meant
   ``.to(float32)`` for precision, the ops that need it (black list, pins) still run float32.
2. An op with floating inputs but no floating output (``shape``) reads whatever its input is.
3. Otherwise the first rule that applies decides: the op reads or writes a pinned var, or is
   pinned itself (range checks) -> float32; no float16 kernel where the program will run (the
   policy's ``target``, where one is given) -> float32; black list -> float32; a reduction over more than ``max_float16_reduction`` elements -> float32;
   white list -> float16; else FOLLOW: float32 if a floating input is FLOAT32, float16 if one is
   FLOAT16, FREE if all are FREE.
4. Outputs take the kernel's dtype, or where they may not (floats read in kept slots, an
   ``out_dtype`` attr) the dtype the op's schema infers for it (batch_norm's statistics stay
   float32 under a float16 kernel).

Block order is an execution order (the verifier's def-before-use), so this one sweep is the fixed
point of the forward rules. A backward sweep then settles FREE ops: float16 when every reader of
their outputs runs float16, float32 otherwise.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping

from attrs import define, field, frozen

from ...ir.block import Block
from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.operator import Operator
from ...ir.schema import InferContext, OpSchema, TensorInfo, get_schema, has_schema
from ...ir.variable import Variable
from .lists import LARGE_REDUCTIONS

__all__ = ["State", "Float16Target", "Policy", "Decision", "Plan", "decide", "float_var", "is_same_dtype_cast",
           "IO_OPS"]

IO_OPS = ("feed", "fetch")
_HALF = (DType.float16, DType.float32)


class State(enum.Enum):
    FLOAT16 = "float16"
    FLOAT32 = "float32"
    FREE = "free"

    @property
    def dtype(self) -> DType:
        return DType.float16 if self is State.FLOAT16 else DType.float32

    @staticmethod
    def of(dtype: DType) -> State:
        return State.FLOAT16 if dtype is DType.float16 else State.FLOAT32


@frozen
class Float16Target:
    """Where the float16 program will run: the backend's name and the op types it has a float16
    kernel for (``halfway.api.float16.float16_target`` reads them from the kernel registry)."""

    backend: str
    float16_ops: frozenset[str]


@frozen
class Policy:
    """What the decisions depend on besides the program. ``target`` None: no kernel check."""

    white_list: frozenset[str]
    black_list: frozenset[str]
    target: Float16Target | None
    max_float16_reduction: int
    pinned_vars: Mapping[str, str] = field(factory=dict)
    """var name -> why it must stay float32"""
    pinned_ops: Mapping[int, str] = field(factory=dict)
    """op index -> why it must run float32"""


@frozen
class Decision:
    """``state`` None: the op keeps its dtypes (nothing to decide). ``flexible``: it reads its
    floating inputs in whatever dtype they come (``shape``)."""

    state: State | None
    reason: str
    flexible: bool = False


@define
class Plan:
    """Decisions by op (``id(op)``), states by var name (floating vars only)."""

    decisions: dict[int, Decision] = field(factory=dict)
    states: dict[str, State] = field(factory=dict)

    def dtype_of(self, op: Operator) -> DType | None:
        decision = self.decisions.get(id(op))
        return decision.state.dtype if decision is not None and decision.state is not None else None


def float_var(block: Block, name: str) -> Variable | None:
    """The var ``name`` if it is a float16 or float32 tensor, else None."""
    var = block.find_var(name)
    return var if var.kind.has_tensor and var.dtype in _HALF else None


def is_same_dtype_cast(block: Block, op: Operator) -> bool:
    """Whether ``op`` casts a float16/float32 tensor to its own dtype (a no-op)."""
    if op.type != "cast":
        return False
    source, target = float_var(block, op.input("X")[0]), float_var(block, op.output("Out")[0])
    return source is not None and target is not None and source.dtype is target.dtype


def compute_inputs(op: Operator, schema: OpSchema) -> list[tuple[str, str]]:
    """(slot, name) of the inputs that must share the op's dtype (every slot but the kept ones)."""
    kept = set(schema.keep_dtype_slots)
    return [(s.name, n) for s in schema.inputs if s.name not in kept for n in op.input(s.name)]


def decide(block: Block, policy: Policy, sources: Mapping[str, State]) -> Plan:
    """Decide every op of ``block`` (see the module docstring). ``sources`` gives the state of
    the floating vars no op of the block writes (feed targets, parameters)."""
    plan = Plan(states=dict(sources))
    for op in block.ops:
        if op.type in IO_OPS:
            continue
        decision = _decide_op(block, op, policy, plan)
        plan.decisions[id(op)] = decision
        _set_outputs(block, op, decision, plan)
    _settle_free(block, plan)
    return plan


def _decide_op(block: Block, op: Operator, policy: Policy, plan: Plan) -> Decision:
    if not has_schema(op.type):
        return Decision(None, "no schema: left as it is")
    schema = get_schema(op.type)
    names = [n for _, n in compute_inputs(op, schema)]
    wide = [n for n in names if _is_wide_float(block, n)]
    if wide:
        return Decision(None, f"reads {block.find_var(wide[0]).tensor_dtype.name} {wide[0]!r}: left as it is")
    floats = [n for n in names if float_var(block, n) is not None]
    if (op.type == "cast" and not is_same_dtype_cast(block, op)) or not floats:
        return Decision(None, "sets its own output dtype" if op.type == "cast" else "no floating input")
    outputs = [n for n in op.output_names() if float_var(block, n) is not None]
    if not outputs:
        return Decision(None, "no floating output: reads its input as it is", flexible=True)
    return _classify(op, schema, floats, outputs, policy, plan)


def _classify(op: Operator, schema: OpSchema, floats: list[str], outputs: list[str], policy: Policy,
              plan: Plan) -> Decision:
    pinned = next((n for n in floats + outputs if n in policy.pinned_vars), None)
    if pinned is not None:
        return Decision(State.FLOAT32, policy.pinned_vars[pinned])
    if op.index in policy.pinned_ops:
        return Decision(State.FLOAT32, policy.pinned_ops[op.index])
    target = policy.target
    if target is not None and op.type not in target.float16_ops:
        return Decision(State.FLOAT32, f"no float16 kernel for {op.type} on the {target.backend} backend")
    if op.type in policy.black_list:
        return Decision(State.FLOAT32, "black list")
    count = reduced_elements(op, schema)
    if count is not None and count > policy.max_float16_reduction:
        return Decision(State.FLOAT32, f"reduces {count} elements (more than {policy.max_float16_reduction})")
    if op.type in policy.white_list:
        return Decision(State.FLOAT16, "white list")
    if op.block is not None and is_same_dtype_cast(op.block, op):
        return Decision(State.FLOAT16, "casts to its input's own dtype: the model's float type, float16 now")
    states = [(n, plan.states.get(n, State.FLOAT32)) for n in floats]
    wide = next((n for n, s in states if s is State.FLOAT32), None)
    if wide is not None:
        return Decision(State.FLOAT32, f"follows float32 input {wide!r}")
    if any(s is State.FLOAT16 for _, s in states):
        return Decision(State.FLOAT16, "follows its float16 inputs")
    return Decision(State.FREE, "parameters only")


def reduced_elements(op: Operator, schema: OpSchema) -> int | None:
    """How many elements one output element of a reduction sums; None for other ops or unknown dims."""
    if op.type not in LARGE_REDUCTIONS or op.block is None:
        return None
    if op.type == "sum":
        return len(op.input("X"))
    shape = op.block.find_var(op.input("X")[0]).shape or ()
    if op.type != "mean" and not op.attr("reduce_all", False) and op.attr("dim", (0,)):
        rank = len(shape)
        shape = tuple(shape[d % rank] for d in set(op.attr("dim", (0,)))) if rank else ()
    return None if any(d < 0 for d in shape) else math.prod(shape)


def _is_wide_float(block: Block, name: str) -> bool:
    var = block.find_var(name)
    return var.kind.has_tensor and var.dtype is not None and var.dtype.is_floating and var.dtype not in _HALF


def _set_outputs(block: Block, op: Operator, decision: Decision, plan: Plan) -> None:
    outputs = [n for n in op.output_names() if float_var(block, n) is not None]
    if decision.state is None:
        plan.states.update((n, State.of(block.find_var(n).tensor_dtype)) for n in outputs)
        return
    dtype = decision.state.dtype if decision.state is not State.FREE else DType.float16
    may_differ = _outputs_may_differ(block, op) and not is_same_dtype_cast(block, op)
    inferred = output_dtypes(block, op, dtype) if may_differ else {}
    for name in outputs:
        dtype = inferred.get(name, DType.float16 if decision.state is State.FREE else decision.state.dtype)
        if decision.state is State.FREE:
            plan.states[name] = State.FREE if dtype is DType.float16 else State.FLOAT32
        else:
            plan.states[name] = State.of(dtype)


def _outputs_may_differ(block: Block, op: Operator) -> bool:
    """Whether an output may not take the kernel's dtype: the op reads floats in slots that keep
    their own dtype (batch_norm's statistics become MeanOut...) or sets ``out_dtype``."""
    schema = get_schema(op.type)
    kept = (n for s in schema.keep_dtype_slots for n in op.input(s))
    return op.has_attr("out_dtype") or any(float_var(block, n) is not None for n in kept)


def output_dtypes(block: Block, op: Operator, dtype: DType) -> dict[str, DType]:
    """The dtypes the schema infers for ``op``'s outputs when its kernel runs ``dtype``."""
    schema = get_schema(op.type)
    computed = {n for _, n in compute_inputs(op, schema)}
    inputs: dict[str, list[TensorInfo]] = {}
    for slot in op.inputs:
        infos = []
        for name in op.input(slot):
            var = block.find_var(name)
            own = var.dtype if var.dtype is not None else DType.float32
            infos.append(TensorInfo(var.shape or (), dtype if name in computed and own in _HALF else own))
        inputs[slot] = infos
    ctx = InferContext(schema, inputs, op.attrs)
    if schema.infer is None:
        return {}
    try:
        schema.infer(ctx)
    except HalfwayError:
        return {}
    return {name: info.dtype for slot, infos in ctx.outputs.items()
            for name, info in zip(op.output(slot), infos) if info is not None}


def _settle_free(block: Block, plan: Plan) -> None:
    for op in reversed(block.ops):
        decision = plan.decisions.get(id(op))
        if decision is None or decision.state is not State.FREE:
            continue
        free = [n for n in op.output_names() if plan.states.get(n) is State.FREE]
        votes = {_vote(block, plan, reader, slot) for n in free for reader, slot, _ in block.uses(n)}
        votes.discard(None)
        state = State.FLOAT16 if votes == {State.FLOAT16} else State.FLOAT32
        why = "its readers run float16" if state is State.FLOAT16 else "a reader runs float32"
        plan.decisions[id(op)] = Decision(state, f"parameters only; {why}")
        for name in free:
            plan.states[name] = state


def _vote(block: Block, plan: Plan, reader: Operator, slot: str) -> State | None:
    """What dtype ``reader`` wants in ``slot``: None if it takes either."""
    if reader.type in IO_OPS:
        return State.FLOAT32
    decision = plan.decisions.get(id(reader))
    if decision is None:
        return State.FLOAT32
    if decision.state is None:
        return None if decision.flexible else State.FLOAT32
    if slot in get_schema(reader.type).keep_dtype_slots:
        return None
    return decision.state
