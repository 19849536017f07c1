"""One op's output tensor infos, from its inputs' infos and values through its schema's inference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from halfway.ir.errors import HalfwayError
from halfway.ir.limits import check_tensor_size
from halfway.ir.operator import Operator
from halfway.ir.schema import InferContext, OpSchema, TensorInfo

__all__ = ["infer_outputs"]


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
