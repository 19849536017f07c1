"""The dtype an op runs in, which picks its kernel.

An op's dtype is the dtype of its decisive input slots (``OpSchema.decisive_slots``; the first
input slot unless the schema says otherwise). Floating inputs of other slots must agree with it,
except slots the schema lets keep their own dtype (batch_norm's statistics, shape tensors). So a
program whose edges were cast to float16 runs float16 kernels op after op, with no flag.
"""

from __future__ import annotations

from collections.abc import Mapping

from .dtypes import DType
from .errors import HalfwayError
from .operator import Operator
from .schema import OpSchema, TensorInfo

__all__ = ["op_dtype"]


def op_dtype(op: Operator, schema: OpSchema, infos: Mapping[str, TensorInfo]) -> DType:
    """The dtype that picks ``op``'s kernel (see the module docstring); HalfwayError on a clash."""
    decisive = [(n, infos[n].dtype) for s in schema.decisive_slots for n in op.input(s) if n in infos]
    if not decisive:
        outputs = [infos[n].dtype for n in op.output_names() if n in infos]
        return outputs[0] if outputs else DType.float32
    floating = [(n, d) for n, d in decisive if d.is_floating]
    dtype = floating[0][1] if floating else decisive[0][1]
    kept = set(schema.keep_dtype_slots)
    for slot in (s.name for s in schema.inputs if s.name not in kept):
        for name in op.input(slot):
            other = infos[name].dtype if name in infos else None
            if other is not None and other.is_floating and dtype.is_floating and other is not dtype:
                raise HalfwayError(f"op {op.describe()}: input {slot}={name} is {other.name} but the op runs "
                                   f"{dtype.name} (from {decisive[0][0]}); cast it or transpile the program")
    return dtype
