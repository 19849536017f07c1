"""One op's output tensor infos, from its inputs' infos and values through its schema's inference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .block import Block
from .errors import HalfwayError
from .limits import check_tensor_size
from .operator import Operator
from .schema import InferContext, OpSchema, TensorInfo, get_schema
from .scope import Scope

__all__ = ["infer_outputs", "infer_new_op"]


def infer_outputs(op: Operator, schema: OpSchema, inputs: Mapping[str, Sequence[TensorInfo]],
                  values: Mapping[str, Sequence[np.ndarray | None]]) -> dict[str, tuple[TensorInfo, ...]]:
    """Per output slot of ``op``, the infos of its vars; ``values`` are the inputs' values where
    known (constants, parameters), which shape inference may read (a Reshape's shape tensor).
    Every output's size is checked here, before any kernel allocates it.

    Raises:
        InferError: the schema's inference refused the inputs.
        TensorSizeError: an output would exceed the tensor size limit (``halfway.ir.limits``).
        HalfwayError: inference gave no info for an output ``op`` writes.
    """
    ctx = InferContext(schema, {slot: list(infos) for slot, infos in inputs.items()}, op.attrs,
                       {slot: list(items) for slot, items in values.items()})
    if schema.infer is not None:
        schema.infer(ctx)
    return {s.name: tuple(_inferred(ctx, s.name, i, op) for i in range(len(op.output(s.name))))
            for s in schema.outputs if op.output(s.name)}


def _inferred(ctx: InferContext, slot: str, index: int, op: Operator) -> TensorInfo:
    infos = ctx.outputs.get(slot, [])
    if index < len(infos) and infos[index] is not None:
        info = infos[index]
        check_tensor_size(info.shape, info.dtype.numpy, f"{op.type} (op #{op.index}, output {op.output(slot)[index]})")
        return info
    raise HalfwayError(f"op {op.describe()}: shape inference gave no {slot}[{index}]")


def infer_new_op(block: Block, scope: Scope, op_type: str, inputs: Mapping[str, Sequence[str]],
                 attrs: Mapping[str, Any]) -> tuple[Operator, InferContext]:
    """For importers: a new op of ``op_type`` (not yet in ``block``) reading the vars ``inputs``,
    its attrs ``attrs`` over the schema's defaults, and the inference of its outputs (the inputs'
    values read from ``scope`` where it holds them). Raises the schema's InferError."""
    schema = get_schema(op_type)
    op = Operator(op_type, {slot: list(names) for slot, names in inputs.items()})
    for name, value in schema.resolve_attrs(attrs).items():
        op.set_attr(name, value, schema.attr_spec(name).type)  # type: ignore[union-attr]
    infos = {slot: [_var_info(block, n) for n in names] for slot, names in inputs.items()}
    values = {slot: [scope.find(n) for n in names] for slot, names in inputs.items()}
    ctx = InferContext(schema, infos, op.attrs, values)
    if schema.infer is not None:
        schema.infer(ctx)
    return op, ctx


def _var_info(block: Block, name: str) -> TensorInfo:
    var = block.var(name)
    if var.dtype is None:
        raise HalfwayError(f"var {name!r} has no dtype; an op's input needs one")
    return TensorInfo(var.shape or (), var.dtype)
