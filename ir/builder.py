"""The builder: append schema-checked ops to the current program, inferring output vars.

    prog = Program()
    with program_guard(prog):
        x = layers.data("x", [1, 3, 32, 32])
        y = layers.conv2d(x, num_filters=8, filter_size=3, padding=1, act="relu")
    scope = init_scope(prog, seed=0)

Layer functions (``halfway.api.layers``) are thin: they turn friendly arguments into slots and attrs
and call ``append_op`` here, which validates against the op's schema, creates output vars with
the inferred shapes and dtypes, and appends the op.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np

from .dtypes import DType
from .errors import IRError, SchemaError
from .initializers import Initializer, default_for
from .operator import Operator
from .program import Program
from .schema import InferContext, TensorInfo, get_schema
from .scope import Scope
from .variable import Variable

__all__ = ["program_guard", "default_main_program", "append_op", "atomic", "apply_act", "create_parameter", "data",
           "init_scope"]

_STACK: list[Program] = [Program()]

VarArg = Variable | Sequence[Variable] | None
P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def program_guard(program: Program) -> Iterator[Program]:
    """Make ``program`` the target of layer functions inside the ``with`` block."""
    _STACK.append(program)
    try:
        yield program
    finally:
        _STACK.pop()


def default_main_program() -> Program:
    return _STACK[-1]


def append_op(op_type: str, inputs: Mapping[str, VarArg], attrs: Mapping[str, Any] | None = None,
              outputs: Mapping[str, int | Sequence[Variable]] | None = None,
              name: str | None = None) -> dict[str, list[Variable]]:
    """Append an ``op_type`` op to the current program's global block.

    ``inputs`` maps slots to vars (absent or None for a dispensable slot). ``outputs`` maps an
    output slot to how many vars to create (default: one per output slot the schema declares,
    none for dispensable ones) or to existing vars to write. Every declared attr is written,
    the given value or the schema default. Returns the output vars by slot.
    """
    block = default_main_program().global_block()
    schema = get_schema(op_type)
    in_vars = {slot: _as_list(v) for slot, v in inputs.items() if _as_list(v)}
    for slot in in_vars:
        if schema.input_slot(slot) is None:
            raise SchemaError(f"op {op_type} has no input slot {slot!r} (has {[s.name for s in schema.inputs]})")
    attr_values = schema.resolve_attrs(attrs or {})
    op = Operator(op_type, in_vars)
    specs = {spec.name: spec for spec in schema.attrs}
    for attr_name, value in attr_values.items():
        op.set_attr(attr_name, value, specs[attr_name].type)
    for attr_name, value in (attrs or {}).items():
        if schema.attr_spec(attr_name) is None:
            op.set_attr(attr_name, value)
    infos = {s: [TensorInfo(v.tensor_shape, v.tensor_dtype) for v in vs] for s, vs in in_vars.items()}
    ctx = InferContext(schema, infos, op.attrs)
    if schema.infer is not None:
        schema.infer(ctx)
    out_vars = {slot: _outputs_for(block, slot, spec, ctx, name or op_type)
                for slot, spec in _output_plan(schema, outputs).items()}
    for slot, made in out_vars.items():
        op.set_output(slot, made)
    block.insert_op(len(block.ops), op)
    return out_vars


def _as_list(value: VarArg) -> list[Variable]:
    if value is None:
        return []
    return [value] if isinstance(value, Variable) else list(value)


def _output_plan(schema: Any, outputs: Mapping[str, int | Sequence[Variable]] | None) -> dict[str, Any]:
    if outputs is not None:
        return dict(outputs)
    return {slot.name: 1 for slot in schema.outputs if not slot.dispensable}


def _outputs_for(block: Any, slot: str, spec: int | Sequence[Variable], ctx: InferContext,
                 prefix: str) -> list[Variable]:
    inferred = ctx.outputs.get(slot, [])
    if not isinstance(spec, int):
        return list(spec)
    made = []
    for i in range(spec):
        info = inferred[i] if i < len(inferred) and inferred[i] is not None else TensorInfo((), DType.float32)
        var_name = block.unique_name(f"{prefix}.tmp")
        made.append(block.create_var(var_name, dtype=info.dtype, shape=info.shape))
    return made


@contextlib.contextmanager
def _rollback() -> Iterator[None]:
    """Undo the ops, vars and initializers added to the current program if the body raises."""
    program = default_main_program()
    block = program.global_block()
    n_ops, names, inits = len(block.ops), set(block.vars), set(program.initializers)
    try:
        yield
    except BaseException:
        for op in reversed(block.ops[n_ops:]):
            block.remove_op(op)
        for name in set(block.vars) - names:
            block.remove_var(name, force=True)
        for name in set(program.initializers) - inits:
            del program.initializers[name]
        raise


def atomic(layer: Callable[P, R]) -> Callable[P, R]:
    """Decorate a layer function that appends several ops or parameters: if it fails, the
    program is left as it was."""

    @functools.wraps(layer)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with _rollback():
            return layer(*args, **kwargs)

    return wrapper


def apply_act(x: Variable, act: str | None, **attrs: Any) -> Variable:
    """Append activation ``act`` (an op type such as "relu") on ``x``; no-op when None."""
    if act is None:
        return x
    return append_op(act, {"X": x}, attrs)["Out"][0]


def create_parameter(prefix: str, shape: Sequence[int], dtype: Any = DType.float32,
                     initializer: Initializer | None = None) -> Variable:
    """A persistable var named ``<prefix>_N`` with an initializer recorded for ``init_scope``."""
    program = default_main_program()
    block = program.global_block()
    var = block.create_var(block.unique_name(prefix), dtype=dtype, shape=shape, persistable=True)
    program.initializers[var.name] = initializer or default_for(tuple(shape))
    return var


def data(name: str, shape: Sequence[int], dtype: Any = "float32") -> Variable:
    """Declare a model input (a feed target); -1 marks a dim known only at run time."""
    block = default_main_program().global_block()
    return block.create_var(name, dtype=DType.from_any(dtype), shape=shape, need_check_feed=True)


def init_scope(program: Program, seed: int = 0, values: Mapping[str, np.ndarray] | None = None) -> Scope:
    """A Scope holding a value for every persistable tensor of ``program``.

    ``values`` are taken as given (checked against the var's shape); the rest come from the
    program's initializers (``default_for`` where it has none), drawn in name order from one
    generator seeded with ``seed``.
    """
    rng = np.random.default_rng(seed)
    scope = Scope()
    given = dict(values or {})
    for var in sorted(program.persistable_vars(), key=lambda v: v.name.encode()):
        if var.name in given:
            scope.set(var.name, _checked(var, np.asarray(given.pop(var.name))))
            continue
        shape = var.shape or ()
        if any(d < 0 for d in shape):
            raise IRError(f"parameter {var.name!r} has an unknown dim {list(shape)}; give its value")
        init = program.initializers.get(var.name) or default_for(shape)
        scope.set(var.name, init(shape, var.tensor_dtype.numpy, rng))
    if given:
        raise IRError(f"init_scope: no persistable var named {', '.join(sorted(given))}")
    return scope


def _checked(var: Variable, value: np.ndarray) -> np.ndarray:
    shape = var.shape or ()
    if len(shape) != value.ndim or any(d not in (-1, v) for d, v in zip(shape, value.shape)):
        raise IRError(f"value for {var.name!r} has shape {list(value.shape)}, the var {list(shape)}")
    return value.astype(var.tensor_dtype.numpy, copy=True)
