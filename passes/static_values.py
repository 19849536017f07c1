"""The values of small integer vars that a pass can know before run time.

TorchScript exports compute a slice's bounds from the shape of what they slice (``x[..., :d // 2]``
is ``Slice(x, 0, Unsqueeze(Div(Gather(Shape(x), 3), 2)))``); where the sliced dim is a known size,
the bound is a constant that no op of the program holds. ``static_value`` finds it: a parameter's
value; a vector whose every entry ``probe_dims`` decodes as a known size (the ``shape``, ``gather``
and ``concat`` arithmetic it follows); or the reference evaluator's result of an op of
``ARITHMETIC`` over such values (the division, the maximum and the unsqueeze it does not follow),
a few ops deep at most.
"""

from __future__ import annotations

import numpy as np

from ..ir.block import Block
from ..ir.errors import HalfwayError
from ..ir.evaluate import evaluate_op
from ..ir.scope import Scope
from .dims import DimTable
from .rewire import sole_writer

__all__ = ["ARITHMETIC", "static_value"]

ARITHMETIC = frozenset({"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                        "elementwise_floordiv", "elementwise_max", "elementwise_min", "scale", "cast", "unsqueeze2",
                        "squeeze2", "reshape2", "concat", "gather"})
"""Ops whose small integer results ``static_value`` computes from static inputs."""
_DEPTH = 6
_SMALL = 64


def static_value(block: Block, scope: Scope | None, table: DimTable, name: str, depth: int = _DEPTH) -> np.ndarray | None:
    """The value ``name`` has at every run, or None where the passes cannot know it (module docstring)."""
    var = block.find_var(name)
    if var is None or var.dtype is None or var.dtype.is_floating:
        return None
    if var.persistable:
        value = scope.find(name) if scope is not None and not block.producers(name) else None
        return value if value is not None and value.size <= _SMALL else None
    entries = table.vector(name)
    if entries is not None and all(isinstance(e, int) for e in entries):
        shape = tuple(var.shape or ())
        array = np.array(entries, dtype=var.dtype.numpy)
        return array.reshape(shape) if all(d >= 0 for d in shape) and array.size == int(np.prod(shape)) else array
    writer = sole_writer(block, name)
    if writer is None or writer.type not in ARITHMETIC or depth == 0:
        return None
    inputs = {n: static_value(block, scope, table, n, depth - 1) for n in writer.input_names()}
    if any(v is None for v in inputs.values()):
        return None
    try:
        return evaluate_op(writer, inputs).get(name)  # type: ignore[arg-type]
    except HalfwayError:
        return None
